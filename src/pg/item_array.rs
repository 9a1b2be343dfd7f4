//! Array arguments of items: read in place when their elements are fixed-length and there
//! are no NULLs (the feed's bigint and uuid candidates), else taken apart; and new arrays of
//! a selection of their elements.

use crate::pg::errors::bad_argument;
use crate::pg::item_type::{Item, ItemType};
use pgrx::pg_sys;

/// A one-dimensional array argument, read in place when its elements are fixed-length and
/// it has no NULLs (the feed's bigint and uuid candidates), else taken apart.
pub struct ItemArray {
    pub element_type: pg_sys::Oid,
    pub item_type: ItemType,
    pub len: usize,
    typlen: i16,
    typbyval: bool,
    typalign: std::ffi::c_char,
    elements: Elements,
    /// The array itself when it is exactly what `select` of all its elements would build (one
    /// dimension from 1, no NULLs, packed): returned as it is when nothing is dropped.
    as_selected: Option<pg_sys::Datum>,
}

enum Elements {
    /// Elements packed `stride` bytes apart from `data`, none NULL.
    Packed { data: *const u8, stride: usize },
    /// From deconstruct_array: element datums and null flags.
    Deconstructed {
        datums: *mut pg_sys::Datum,
        nulls: *mut bool,
    },
}

/// Header bytes of a one-dimensional array without a null bitmap (ARR_OVERHEAD_NONULLS(1)):
/// the 16-byte ArrayType, one dimension and one lower bound, MAXALIGNed.
const ONE_DIM_HEADER: usize = (std::mem::size_of::<pg_sys::ArrayType>() + 8 + 7) & !7;
// `select` writes every header byte itself: the header must have no padding.
const _: () = assert!(ONE_DIM_HEADER == std::mem::size_of::<pg_sys::ArrayType>() + 8);

/// Bytes between consecutive fixed-length elements: the length rounded up to the alignment.
fn element_stride(typlen: i16, typalign: std::ffi::c_char) -> usize {
    let align = match typalign as u8 {
        b'd' => 8,
        b'i' => 4,
        b's' => 2,
        _ => 1,
    };
    (typlen as usize).next_multiple_of(align)
}

impl ItemArray {
    /// Reads an array datum; multi-dimensional arrays are refused (22023) and element types
    /// the filter cannot hash are refused (42804).
    ///
    /// # Safety
    /// `datum` must be a non-null array datum.
    pub unsafe fn from_datum(datum: pg_sys::Datum, function: &'static str) -> ItemArray {
        // SAFETY: `datum` is an array (the contract), detoasted here; its header's ndim,
        // dataoffset, element type and, for one dimension without a null bitmap, its
        // dimension and lower bound are read within ONE_DIM_HEADER; deconstruct_array gets
        // the element type's own storage constants.
        unsafe {
            let array = pg_sys::pg_detoast_datum(datum.cast_mut_ptr()) as *mut pg_sys::ArrayType;
            let ndim = (*array).ndim;
            if ndim > 1 {
                bad_argument(format!(
                    "{} expects a one-dimensional array, got {ndim} dimensions",
                    crate::pg::errors::sql_name(function)
                ));
            }
            let element_type = (*array).elemtype;
            let item_type = ItemType::from_oid(element_type).unwrap_or_else(|| {
                crate::pg::errors::unsupported_type(
                    &crate::pg::errors::sql_name(function),
                    &crate::pg::item_type::type_name(element_type),
                )
            });
            let (typlen, typbyval, typalign) = item_type.storage();
            let mut array_data = ItemArray {
                element_type,
                item_type,
                len: 0,
                typlen,
                typbyval,
                typalign,
                elements: Elements::Packed {
                    data: std::ptr::null(),
                    stride: 1,
                },
                as_selected: None,
            };
            // dataoffset 0: no null bitmap, the data right after the one-dimension header.
            if typlen > 0 && (*array).dataoffset == 0 {
                if ndim == 1 {
                    let dims = (array as *const u8).add(std::mem::size_of::<pg_sys::ArrayType>())
                        as *const i32;
                    array_data.len = (*dims).max(0) as usize;
                    array_data.elements = Elements::Packed {
                        data: (array as *const u8).add(ONE_DIM_HEADER),
                        stride: element_stride(typlen, typalign),
                    };
                    let lower_bound = *dims.add(1);
                    if lower_bound == 1 && array_data.len > 0 {
                        array_data.as_selected = Some(pg_sys::Datum::from(array));
                    }
                }
                return array_data;
            }
            let mut datums: *mut pg_sys::Datum = std::ptr::null_mut();
            let mut nulls: *mut bool = std::ptr::null_mut();
            let mut len: i32 = 0;
            pg_sys::deconstruct_array(
                array,
                element_type,
                typlen as i32,
                typbyval,
                typalign,
                &mut datums,
                &mut nulls,
                &mut len,
            );
            array_data.len = len as usize;
            array_data.elements = Elements::Deconstructed { datums, nulls };
            array_data
        }
    }

    /// Element `i` (below `len`), None for NULL.
    #[inline]
    fn element(&self, i: usize) -> Option<pg_sys::Datum> {
        assert!(i < self.len);
        // SAFETY: packed elements lie `stride` bytes apart in the detoasted array, `len` of
        // them; deconstructed ones are `len` datums and flags from deconstruct_array.
        unsafe {
            match self.elements {
                Elements::Packed { data, stride } => {
                    let at = data.add(i * stride);
                    Some(if !self.typbyval {
                        pg_sys::Datum::from(at)
                    } else {
                        match self.typlen {
                            2 => pg_sys::Datum::from((at as *const i16).read_unaligned()),
                            4 => pg_sys::Datum::from((at as *const i32).read_unaligned()),
                            _ => pg_sys::Datum::from((at as *const i64).read_unaligned()),
                        }
                    })
                }
                Elements::Deconstructed { datums, nulls } => {
                    if *nulls.add(i) {
                        None
                    } else {
                        Some(*datums.add(i))
                    }
                }
            }
        }
    }

    /// Whether any element is not NULL (a packed array has no NULLs).
    pub fn has_items(&self) -> bool {
        match self.elements {
            Elements::Packed { .. } => self.len > 0,
            Elements::Deconstructed { .. } => self.elements().any(|e| e.is_some()),
        }
    }

    /// The element datums, None for NULL.
    fn elements(&self) -> impl Iterator<Item = Option<pg_sys::Datum>> + '_ {
        (0..self.len).map(move |i| self.element(i))
    }

    /// The elements as items, None for NULL.
    pub fn items(&self) -> impl Iterator<Item = Option<Item>> + '_ {
        self.elements().map(|element| {
            // SAFETY: a non-null element is a datum of `element_type`, which hashes as
            // `item_type` (from_datum).
            element.map(|d| unsafe { Item::new(self.element_type, self.item_type, d) })
        })
    }

    /// The elements' bytes when they are bigints packed without NULLs (the feed's usual
    /// candidates, hashed straight off the array's data).
    pub fn packed_int8(&self) -> Option<&[[u8; 8]]> {
        match (&self.elements, self.item_type) {
            (Elements::Packed { data, stride: 8 }, ItemType::Int8) => {
                // SAFETY: a packed array of `len` 8-byte elements starts at `data`, inside
                // the detoasted array, which lives as long as the call.
                Some(unsafe { std::slice::from_raw_parts(*data as *const [u8; 8], self.len) })
            }
            _ => None,
        }
    }

    /// The array itself when it is exactly what `select` of all its elements would build.
    pub fn unchanged(&self) -> Option<pg_sys::Datum> {
        self.as_selected
    }

    /// A new one-dimensional array of this element type holding elements `indexes` (none
    /// NULL), in that order. Packed elements are copied as bytes into the new array.
    pub fn select(&self, indexes: &[u32]) -> pg_sys::Datum {
        assert!(indexes.iter().all(|&i| (i as usize) < self.len));
        // SAFETY: indexes are below `len` (asserted); the new array is palloc'd with room for
        // its header and every selected element, and each header field is written.
        unsafe {
            if indexes.is_empty() {
                return pg_sys::Datum::from(pg_sys::construct_empty_array(self.element_type));
            }
            if let Elements::Packed { data, stride } = self.elements {
                let total = ONE_DIM_HEADER + indexes.len() * stride;
                // Not zeroed: the header's fields and every element's bytes are written below
                // (the one-dimension header has no padding).
                let array = pg_sys::palloc(total) as *mut pg_sys::ArrayType;
                pgrx::set_varsize_4b(array as *mut pg_sys::varlena, total as i32);
                (*array).ndim = 1;
                (*array).dataoffset = 0;
                (*array).elemtype = self.element_type;
                let dims =
                    (array as *mut u8).add(std::mem::size_of::<pg_sys::ArrayType>()) as *mut i32;
                *dims = indexes.len() as i32;
                *dims.add(1) = 1;
                let out = (array as *mut u8).add(ONE_DIM_HEADER);
                if stride == 8 {
                    // bigint items: a load and a store each, where a copy of a length known
                    // only at run time is a call to memcpy per element.
                    let (from, to) = (data as *const u64, out as *mut u64);
                    for (k, &i) in indexes.iter().enumerate() {
                        to.add(k)
                            .write_unaligned(from.add(i as usize).read_unaligned());
                    }
                } else {
                    for (k, &i) in indexes.iter().enumerate() {
                        std::ptr::copy_nonoverlapping(
                            data.add(i as usize * stride),
                            out.add(k * stride),
                            stride,
                        );
                    }
                }
                return pg_sys::Datum::from(array);
            }
            let datums: Vec<pg_sys::Datum> = indexes
                .iter()
                .map(|&i| {
                    self.element(i as usize)
                        .expect("selected elements are not NULL")
                })
                .collect();
            let array = pg_sys::construct_array(
                datums.as_ptr() as *mut pg_sys::Datum,
                datums.len() as i32,
                self.element_type,
                self.typlen as i32,
                self.typbyval,
                self.typalign,
            );
            pg_sys::Datum::from(array)
        }
    }
}

/// A new one-dimensional boolean array, NULL where a value is None.
pub fn bool_array(values: &[Option<bool>]) -> pg_sys::Datum {
    let mut datums: Vec<pg_sys::Datum> = values
        .iter()
        .map(|v| pg_sys::Datum::from(v.unwrap_or(false)))
        .collect();
    let mut nulls: Vec<bool> = values.iter().map(Option::is_none).collect();
    let mut dims = [values.len() as i32];
    let mut lower_bounds = [1i32];
    // SAFETY: `datums` and `nulls` hold dims[0] entries each; bool is 1 byte, by value,
    // char-aligned (pg_type's row for boolean).
    let array = unsafe {
        pg_sys::construct_md_array(
            datums.as_mut_ptr(),
            nulls.as_mut_ptr(),
            1,
            dims.as_mut_ptr(),
            lower_bounds.as_mut_ptr(),
            pg_sys::BOOLOID,
            1,
            true,
            b'c' as std::ffi::c_char,
        )
    };
    pg_sys::Datum::from(array)
}

/// A new one-dimensional bytea array of `values` (palloc'd in the current context).
pub fn bytea_array(values: &[Vec<u8>]) -> pg_sys::Datum {
    let datums: Vec<pg_sys::Datum> = values
        .iter()
        .map(|v| crate::pg::varlena::varlena_datum(v))
        .collect();
    // SAFETY: `datums` holds values.len() bytea datums; bytea is varlena (-1), by reference,
    // int-aligned (pg_type's row for bytea).
    let array = unsafe {
        pg_sys::construct_array(
            datums.as_ptr() as *mut pg_sys::Datum,
            datums.len() as i32,
            pg_sys::BYTEAOID,
            -1,
            false,
            b'i' as std::ffi::c_char,
        )
    };
    pg_sys::Datum::from(array)
}

/// The relations of a regclass[] datum, in order (a multi-dimensional array read in storage
/// order); 22004 for a NULL element, which names no table.
pub fn regclass_elements(datum: pg_sys::Datum, function: &str) -> Vec<pg_sys::Oid> {
    let mut elements: *mut pg_sys::Datum = std::ptr::null_mut();
    let mut nulls: *mut bool = std::ptr::null_mut();
    let mut count = 0i32;
    // SAFETY: `datum` is a non-null regclass[] argument; regclass is 4 bytes, by value,
    // int-aligned (pg_type's row), and deconstruct_array fills `count` elements and flags
    // allocated in the current memory context.
    let (elements, nulls) = unsafe {
        let array = pg_sys::pg_detoast_datum(datum.cast_mut_ptr()) as *mut pg_sys::ArrayType;
        pg_sys::deconstruct_array(
            array,
            pg_sys::REGCLASSOID,
            4,
            true,
            b'i' as std::ffi::c_char,
            &mut elements,
            &mut nulls,
            &mut count,
        );
        let count = count.max(0) as usize;
        if count == 0 {
            (&[][..], &[][..])
        } else {
            (
                std::slice::from_raw_parts(elements, count),
                std::slice::from_raw_parts(nulls, count),
            )
        }
    };
    if nulls.contains(&true) {
        crate::pg::errors::raise_with_hint(
            pgrx::PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            format!("{function}: the array of tables holds a NULL"),
            "Name each tracked table, e.g. ARRAY['impressions', 'served']::regclass[].".into(),
        );
    }
    elements
        .iter()
        .map(|d| pg_sys::Oid::from(d.value() as u32))
        .collect()
}

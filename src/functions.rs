//! The value-level SQL functions: bloom_empty, bloom_add, bloom_contains, bloom_unseen,
//! bloom_union, bloom_cardinality, bloom_info.

use crate::errors::OrRaise;
use crate::filter_arg::{bloom_datum, cached_filter_view as filter_view, varlena_bytes};
use crate::gucs::{default_shape, DEFAULT_CAPACITY, DEFAULT_ERROR_RATE};
use crate::items::{keep_unseen, CandidateHashes, ItemArray, ItemType};
use crate::v1::{arg, return_null, v1_function};
use bloom_core::{Bloom, BloomView, Shape};
use pgrx::pg_sys;
use pgrx::{IntoDatum, JsonB};

/// The filter an add starts from: a copy of argument 0, or a default filter when it is NULL.
unsafe fn filter_to_update(fcinfo: pg_sys::FunctionCallInfo) -> Bloom {
    unsafe {
        match arg(fcinfo, 0) {
            Some(d) => Bloom::from_view(&BloomView::parse(varlena_bytes(d)).or_raise()),
            None => Bloom::new(default_shape()).or_raise(),
        }
    }
}

v1_function!(bloom_empty, pg_finfo_bloom_empty, |fcinfo| {
    let capacity = arg(fcinfo, 0)
        .map(|d| d.value() as i64)
        .unwrap_or(DEFAULT_CAPACITY.get() as i64);
    let error_rate = arg(fcinfo, 1)
        .map(|d| f64::from_bits(d.value() as u64))
        .unwrap_or(DEFAULT_ERROR_RATE.get());
    let scaling = arg(fcinfo, 2).map(|d| d.value() != 0).unwrap_or(true);
    let shape = Shape::new(capacity, error_rate, scaling).or_raise();
    bloom_datum(&Bloom::new(shape).or_raise())
});

/// `bloom_add(bloom, item)`: a NULL item returns the filter unchanged (NULL stays NULL).
unsafe fn add_one(fcinfo: pg_sys::FunctionCallInfo, item_type: ItemType) -> pg_sys::Datum {
    unsafe {
        let Some(item) = arg(fcinfo, 1) else {
            return match arg(fcinfo, 0) {
                Some(filter) => filter,
                None => return_null(fcinfo),
            };
        };
        let mut filter = filter_to_update(fcinfo);
        filter.admit(item_type.family()).or_raise();
        filter.insert_hash(item_type.hash(item)).or_raise();
        bloom_datum(&filter)
    }
}

v1_function!(bloom_add_int8, pg_finfo_bloom_add_int8, |fcinfo| {
    add_one(fcinfo, ItemType::Int8)
});
v1_function!(bloom_add_bytes, pg_finfo_bloom_add_bytes, |fcinfo| {
    add_one(fcinfo, ItemType::Bytes)
});
v1_function!(bloom_add_uuid, pg_finfo_bloom_add_uuid, |fcinfo| {
    add_one(fcinfo, ItemType::Uuid)
});

v1_function!(bloom_add_array, pg_finfo_bloom_add_array, |fcinfo| {
    let Some(items) = arg(fcinfo, 1) else {
        return match arg(fcinfo, 0) {
            Some(filter) => filter,
            None => return_null(fcinfo),
        };
    };
    let items = ItemArray::from_datum(items, "bloom_add");
    let mut filter = filter_to_update(fcinfo);
    // An array without items adds nothing and records nothing.
    if items.has_items() {
        filter.admit(items.item_type.family()).or_raise();
    }
    for item in items.elements().flatten() {
        filter.insert_hash(items.item_type.hash(item)).or_raise();
    }
    bloom_datum(&filter)
});

/// `bloom_contains(bloom, item)`, strict.
unsafe fn contains_one(fcinfo: pg_sys::FunctionCallInfo, item_type: ItemType) -> pg_sys::Datum {
    unsafe {
        let view = filter_view(fcinfo, arg(fcinfo, 0).unwrap());
        view.guard().check(item_type.family()).or_raise();
        let found = view.contains_hash(item_type.hash(arg(fcinfo, 1).unwrap()));
        pg_sys::Datum::from(found)
    }
}

v1_function!(
    bloom_contains_int8,
    pg_finfo_bloom_contains_int8,
    |fcinfo| { contains_one(fcinfo, ItemType::Int8) }
);
v1_function!(
    bloom_contains_bytes,
    pg_finfo_bloom_contains_bytes,
    |fcinfo| { contains_one(fcinfo, ItemType::Bytes) }
);
v1_function!(
    bloom_contains_uuid,
    pg_finfo_bloom_contains_uuid,
    |fcinfo| { contains_one(fcinfo, ItemType::Uuid) }
);

v1_function!(
    bloom_contains_array,
    pg_finfo_bloom_contains_array,
    |fcinfo| {
        let view = filter_view(fcinfo, arg(fcinfo, 0).unwrap());
        let items = ItemArray::from_datum(arg(fcinfo, 1).unwrap(), "bloom_contains");
        if items.has_items() {
            view.guard().check(items.item_type.family()).or_raise();
        }
        let mut answers = Vec::with_capacity(items.len);
        let mut nulls = Vec::with_capacity(items.len);
        for item in items.elements() {
            match item {
                Some(d) => {
                    answers.push(pg_sys::Datum::from(
                        view.contains_hash(items.item_type.hash(d)),
                    ));
                    nulls.push(false);
                }
                None => {
                    answers.push(pg_sys::Datum::from(false));
                    nulls.push(true);
                }
            }
        }
        let mut dims = [answers.len() as i32];
        let mut lower_bounds = [1i32];
        let array = pg_sys::construct_md_array(
            answers.as_mut_ptr(),
            nulls.as_mut_ptr(),
            1,
            dims.as_mut_ptr(),
            lower_bounds.as_mut_ptr(),
            pg_sys::BOOLOID,
            1,
            true,
            b'c' as std::ffi::c_char,
        );
        pg_sys::Datum::from(array)
    }
);

v1_function!(bloom_unseen, pg_finfo_bloom_unseen, |fcinfo| {
    let Some(candidates) = arg(fcinfo, 1) else {
        return return_null(fcinfo);
    };
    let view = arg(fcinfo, 0).map(|d| filter_view(fcinfo, d));
    let candidates = ItemArray::from_datum(candidates, "bloom_unseen");
    if let Some(view) = view.as_ref().filter(|_| candidates.has_items()) {
        view.guard().check(candidates.item_type.family()).or_raise();
    }
    let hashes = CandidateHashes::of(&candidates);
    keep_unseen(&candidates, &hashes, |i| {
        view.as_ref()
            .is_some_and(|v| hashes.get(i).is_some_and(|h| v.contains_hash(h)))
    })
});

v1_function!(bloom_union, pg_finfo_bloom_union, |fcinfo| {
    let left = BloomView::parse(varlena_bytes(arg(fcinfo, 0).unwrap())).or_raise();
    let right = BloomView::parse(varlena_bytes(arg(fcinfo, 1).unwrap())).or_raise();
    let mut union = Bloom::from_view(&left);
    union.union_with(&right).or_raise();
    bloom_datum(&union)
});

v1_function!(bloom_cardinality, pg_finfo_bloom_cardinality, |fcinfo| {
    let view = filter_view(fcinfo, arg(fcinfo, 0).unwrap());
    pg_sys::Datum::from(view.cardinality() as i64)
});

v1_function!(bloom_info, pg_finfo_bloom_info, |fcinfo| {
    let view = filter_view(fcinfo, arg(fcinfo, 0).unwrap());
    let json = serde_json::to_value(view.info()).expect("bloom info serializes");
    JsonB(json).into_datum().expect("jsonb datum")
});

//! The arguments and result of a SQL call, read through typed accessors.
//!
//! Every C function reads its arguments here, never as raw datums: each accessor checks the
//! type the function's SQL declaration gives the argument before reading the datum as that
//! type, so a declaration that does not match the library (a `CREATE FUNCTION` by hand over
//! one of its symbols, an old catalogue) is an error (42P13) instead of a float read as bits
//! or an integer read as a pointer. The declared types are looked up once per call site and
//! kept in its `fn_extra`, beside the detoasted copy of a stored filter (see `bloom`).

use crate::pg::errors::OrRaise;
use crate::pg::item_array::ItemArray;
use crate::pg::item_type::{Item, ItemType};
use crate::pg::varlena::{payload, varlena_bytes};
use bloom_core::BloomView;
use pgrx::{ereport, pg_sys, PgSqlErrorCode};

/// How an argument is declared, as far as the library reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Declared {
    Int2,
    Int4,
    Int8,
    Float8,
    Bool,
    Regclass,
    Text,
    Varchar,
    Bytea,
    Uuid,
    Interval,
    Timestamptz,
    Cstring,
    Internal,
    Bloom,
    AnyElement,
    /// Any array type: anyarray, int4[], int8[] (the array header names its element type).
    Array,
    Other,
}

impl Declared {
    fn of(oid: pg_sys::Oid) -> Declared {
        match oid {
            pg_sys::INT2OID => Declared::Int2,
            pg_sys::INT4OID => Declared::Int4,
            pg_sys::INT8OID => Declared::Int8,
            pg_sys::FLOAT8OID => Declared::Float8,
            pg_sys::BOOLOID => Declared::Bool,
            pg_sys::REGCLASSOID | pg_sys::OIDOID => Declared::Regclass,
            pg_sys::TEXTOID => Declared::Text,
            pg_sys::VARCHAROID => Declared::Varchar,
            pg_sys::BYTEAOID => Declared::Bytea,
            pg_sys::UUIDOID => Declared::Uuid,
            pg_sys::INTERVALOID => Declared::Interval,
            pg_sys::TIMESTAMPTZOID => Declared::Timestamptz,
            pg_sys::CSTRINGOID => Declared::Cstring,
            pg_sys::INTERNALOID => Declared::Internal,
            pg_sys::ANYELEMENTOID => Declared::AnyElement,
            pg_sys::ANYARRAYOID | pg_sys::INT4ARRAYOID | pg_sys::INT8ARRAYOID => Declared::Array,
            _ if crate::pg::item_type::type_name(oid).rsplit('.').next() == Some("bloom") => {
                Declared::Bloom
            }
            _ => Declared::Other,
        }
    }

    /// The item type a datum of this declared type is hashed as, if any.
    fn item_type(self) -> Option<ItemType> {
        match self {
            Declared::Int2 => Some(ItemType::Int2),
            Declared::Int4 => Some(ItemType::Int4),
            Declared::Int8 => Some(ItemType::Int8),
            Declared::Text | Declared::Varchar | Declared::Bytea => Some(ItemType::Bytes),
            Declared::Uuid => Some(ItemType::Uuid),
            _ => None,
        }
    }
}

/// Most arguments a seen_bloom function takes (`seen_bloom._fold` has 6).
const MAX_ARGS: usize = 8;

/// What a call site keeps in `fn_extra` (in `fn_mcxt`, as long as the call site lives).
struct CallSite {
    declared: [Declared; MAX_ARGS],
    /// The declared types' OIDs, for messages.
    declared_oids: [pg_sys::Oid; MAX_ARGS],
    nargs: usize,
    /// Per argument, the stored filter last read from it here, detoasted once (see
    /// `Args::bloom`). One slot per argument: a view of one argument stays valid while
    /// another is read.
    detoasted: [Option<Detoasted>; MAX_ARGS],
}

/// A stored filter's detoasted copy (in `fn_mcxt`) and its parsed view, by the (toast
/// relation, value id) of the TOAST pointer it came from.
#[derive(Clone, Copy)]
struct Detoasted {
    key: (pg_sys::Oid, pg_sys::Oid),
    copy: *mut pg_sys::varlena,
    /// Borrows `copy`, which lives as long as the call site.
    view: BloomView<'static>,
}

/// The arguments of the current call of a C function.
pub struct Args {
    fcinfo: pg_sys::FunctionCallInfo,
    /// The call site's declared types; null for a call without one (DirectFunctionCall),
    /// whose arguments are then read as the library's own declaration says.
    site: *mut CallSite,
    nargs: usize,
    function: &'static str,
}

fn mismatch(function: &str, n: usize, declared: pg_sys::Oid, reading: &str) -> ! {
    let declared = if declared == pg_sys::InvalidOid {
        "missing".to_string()
    } else {
        crate::pg::item_type::type_name(declared)
    };
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INVALID_FUNCTION_DEFINITION,
        format!(
            "seen_bloom: argument {} of the SQL function over the C function {function} is declared {declared}, which the library does not read as {reading}",
            n + 1
        ),
        "The function's SQL declaration does not match the library: ALTER EXTENSION seen_bloom UPDATE, or drop the hand-made declaration."
    );
    #[allow(unreachable_code)]
    {
        unreachable!()
    }
}

impl Args {
    /// The arguments of the call `fcinfo`, with the call site's declared types (looked up on
    /// its first call).
    ///
    /// # Safety
    /// `fcinfo` must be the live call's, made by fmgr for the C function `function`.
    pub unsafe fn new(fcinfo: pg_sys::FunctionCallInfo, function: &'static str) -> Args {
        // SAFETY: fcinfo is the live call's (the contract); flinfo, when set, is its call
        // site, whose fn_extra is ours and was set only below, to a CallSite in fn_mcxt;
        // get_func_signature returns a palloc'd array of `count` OIDs, read below `count`.
        unsafe {
            let nargs = (*fcinfo).nargs as usize;
            if nargs > MAX_ARGS {
                pgrx::error!("seen_bloom: {function} called with {nargs} arguments");
            }
            let flinfo = (*fcinfo).flinfo;
            let mut site = std::ptr::null_mut();
            if !flinfo.is_null() {
                site = (*flinfo).fn_extra as *mut CallSite;
                if site.is_null() {
                    let mut declared_oids: *mut pg_sys::Oid = std::ptr::null_mut();
                    let mut count = 0;
                    pg_sys::get_func_signature((*flinfo).fn_oid, &mut declared_oids, &mut count);
                    let count = (count.max(0) as usize).min(MAX_ARGS);
                    let mut declared = [Declared::Other; MAX_ARGS];
                    let mut oids = [pg_sys::InvalidOid; MAX_ARGS];
                    for i in 0..count {
                        oids[i] = *declared_oids.add(i);
                        declared[i] = Declared::of(oids[i]);
                    }
                    site = pg_sys::MemoryContextAlloc(
                        (*flinfo).fn_mcxt,
                        std::mem::size_of::<CallSite>(),
                    ) as *mut CallSite;
                    site.write(CallSite {
                        declared,
                        declared_oids: oids,
                        nargs: count,
                        detoasted: [None; MAX_ARGS],
                    });
                    (*flinfo).fn_extra = site as *mut std::ffi::c_void;
                }
            }
            Args {
                fcinfo,
                site,
                nargs,
                function,
            }
        }
    }

    /// Arguments of this call.
    pub fn nargs(&self) -> usize {
        self.nargs
    }

    fn site(&self) -> Option<&CallSite> {
        // SAFETY: `site` is null or the call site's CallSite (see `new`), which outlives the call.
        unsafe { self.site.as_ref() }
    }

    /// The declared type of argument `n`, checked against what the caller reads it as.
    fn declared(&self, n: usize, reading: &str, ok: impl Fn(Declared) -> bool) -> Option<Declared> {
        assert!(
            n < self.nargs,
            "{}: argument {n} of {}",
            self.function,
            self.nargs
        );
        let site = self.site()?;
        let (declared, oid) = if n < site.nargs {
            (site.declared[n], site.declared_oids[n])
        } else {
            (Declared::Other, pg_sys::InvalidOid)
        };
        if !ok(declared) {
            mismatch(self.function, n, oid, reading);
        }
        Some(declared)
    }

    /// The raw datum of argument `n`, or None when it is NULL.
    fn datum(&self, n: usize) -> Option<pg_sys::Datum> {
        assert!(n < self.nargs);
        // SAFETY: fcinfo is the live call's and has `nargs` arguments (see `new`).
        unsafe {
            let a = &(*self.fcinfo).args.as_slice(self.nargs)[n];
            (!a.isnull).then_some(a.value)
        }
    }

    pub fn is_null(&self, n: usize) -> bool {
        self.datum(n).is_none()
    }

    /// Argument `n` as it was passed, for a function that returns it unchanged (a NULL item
    /// returns the filter; an aggregate's state is passed on).
    pub fn passed(&self, n: usize) -> Option<pg_sys::Datum> {
        self.datum(n)
    }

    pub fn int4(&self, n: usize) -> Option<i32> {
        self.declared(n, "integer", |d| d == Declared::Int4);
        self.datum(n).map(|d| d.value() as i32)
    }

    pub fn int8(&self, n: usize) -> Option<i64> {
        self.declared(n, "bigint", |d| d == Declared::Int8);
        self.datum(n).map(|d| d.value() as i64)
    }

    pub fn float8(&self, n: usize) -> Option<f64> {
        self.declared(n, "double precision", |d| d == Declared::Float8);
        self.datum(n).map(|d| f64::from_bits(d.value() as u64))
    }

    pub fn bool(&self, n: usize) -> Option<bool> {
        self.declared(n, "boolean", |d| d == Declared::Bool);
        self.datum(n).map(|d| d.value() != 0)
    }

    /// A regclass (or oid) argument.
    pub fn regclass(&self, n: usize) -> Option<pg_sys::Oid> {
        self.declared(n, "regclass", |d| d == Declared::Regclass);
        self.datum(n).map(|d| pg_sys::Oid::from(d.value() as u32))
    }

    /// A timestamptz argument, in microseconds since 2000-01-01.
    pub fn timestamptz(&self, n: usize) -> Option<i64> {
        self.declared(n, "timestamptz", |d| d == Declared::Timestamptz);
        self.datum(n).map(|d| d.value() as i64)
    }

    /// An interval argument.
    pub fn interval(&self, n: usize) -> Option<pg_sys::Interval> {
        self.declared(n, "interval", |d| d == Declared::Interval);
        // SAFETY: a non-null interval datum points to an Interval (checked declaration).
        self.datum(n)
            .map(|d| unsafe { *d.cast_mut_ptr::<pg_sys::Interval>() })
    }

    /// The bytes of a text, bytea or bloom argument, detoasted; valid for the call.
    pub fn bytes(&self, n: usize) -> Option<&[u8]> {
        self.declared(n, "a varlena", |d| {
            matches!(
                d,
                Declared::Text | Declared::Varchar | Declared::Bytea | Declared::Bloom
            )
        });
        // SAFETY: a non-null datum of a varlena type (checked declaration).
        self.datum(n).map(|d| unsafe { varlena_bytes(d) })
    }

    /// A cstring argument (a type's input function).
    pub fn cstring(&self, n: usize) -> Option<&std::ffi::CStr> {
        self.declared(n, "cstring", |d| d == Declared::Cstring);
        // SAFETY: a non-null cstring datum points to a NUL-terminated string of the call.
        self.datum(n)
            .map(|d| unsafe { std::ffi::CStr::from_ptr(d.cast_mut_ptr()) })
    }

    /// The unread bytes of a receive function's buffer (an `internal` StringInfo), marked read.
    pub fn received_bytes(&self, n: usize) -> Option<&[u8]> {
        self.declared(n, "a receive buffer", |d| d == Declared::Internal);
        // SAFETY: a type's receive function gets a StringInfo as its internal argument; its
        // bytes from `cursor` to `len` are the value's, valid for the call.
        self.datum(n).map(|d| unsafe {
            let buf = d.cast_mut_ptr::<pg_sys::StringInfoData>();
            let start = (*buf).cursor.max(0) as usize;
            let end = ((*buf).len.max(0) as usize).max(start);
            (*buf).cursor = (*buf).len;
            std::slice::from_raw_parts(((*buf).data as *const u8).add(start), end - start)
        })
    }

    /// An `internal` argument's pointer (an aggregate's state).
    pub fn internal(&self, n: usize) -> Option<*mut std::ffi::c_void> {
        self.declared(n, "internal", |d| d == Declared::Internal);
        self.datum(n).map(|d| d.cast_mut_ptr())
    }

    /// A one-dimensional array argument of items (22023 for more dimensions, 42804 for an
    /// element type the filters cannot hash).
    pub fn items(&self, n: usize) -> Option<ItemArray> {
        self.declared(n, "an array", |d| d == Declared::Array);
        // SAFETY: a non-null datum of an array type (checked declaration).
        self.datum(n)
            .map(|d| unsafe { ItemArray::from_datum(d, self.function) })
    }

    /// An item argument (declared as one of the item types, or anyelement of one); 42804
    /// for a type the filters cannot hash.
    pub fn item(&self, n: usize) -> Option<Item> {
        let declared = self.declared(n, "an item", |d| {
            d.item_type().is_some() || d == Declared::AnyElement
        });
        let oid = match declared {
            Some(Declared::AnyElement) | None => self.arg_type(n),
            Some(d) => match d {
                Declared::Int2 => pg_sys::INT2OID,
                Declared::Int4 => pg_sys::INT4OID,
                Declared::Int8 => pg_sys::INT8OID,
                Declared::Text => pg_sys::TEXTOID,
                Declared::Varchar => pg_sys::VARCHAROID,
                Declared::Bytea => pg_sys::BYTEAOID,
                _ => pg_sys::UUIDOID,
            },
        };
        let item_type = ItemType::from_oid(oid).unwrap_or_else(|| {
            crate::pg::errors::unsupported_type(
                &self.function_sql_name(),
                &crate::pg::item_type::type_name(oid),
            )
        });
        // SAFETY: a non-null datum of type `oid` (checked declaration, or the expression's
        // actual type for anyelement), which hashes as `item_type`.
        self.datum(n)
            .map(|datum| unsafe { Item::new(oid, item_type, datum) })
    }

    /// The type of argument `n`: the actual type of the call's expression (which resolves
    /// polymorphic arguments), or, for a call without one (a trigger, DirectFunctionCall),
    /// the type the function's SQL declaration gives it. InvalidOid for a polymorphic
    /// argument of a call without an expression.
    pub fn arg_type(&self, n: usize) -> pg_sys::Oid {
        let Some(site) = self.site() else {
            return pg_sys::InvalidOid;
        };
        // SAFETY: a call site (`site`) means fcinfo has a flinfo, the live call's.
        let actual = unsafe { pg_sys::get_fn_expr_argtype((*self.fcinfo).flinfo, n as i32) };
        if actual != pg_sys::InvalidOid {
            return actual;
        }
        match site.declared_oids.get(n).filter(|_| n < site.nargs) {
            Some(&pg_sys::ANYELEMENTOID) | Some(&pg_sys::ANYARRAYOID) | None => pg_sys::InvalidOid,
            Some(&oid) => oid,
        }
    }

    /// A `bloom` argument, parsed. A filter stored out of line is fetched and parsed once
    /// per call site and kept while the same stored value comes back: for the per-row form
    /// (`WHERE NOT bloom_contains(f.seen, c.id)`) PostgreSQL passes the same TOAST pointer
    /// on every row and keeps no detoasted copy (a TOAST value id is not reused while a
    /// statement can still see the old value). The view is valid for this call.
    pub fn bloom(&self, n: usize) -> Option<BloomView<'_>> {
        self.declared(n, "bloom", |d| d == Declared::Bloom);
        let datum = self.datum(n)?;
        // SAFETY: a non-null bloom datum (checked declaration) is a varlena; `site` is the
        // call site's (see `new`), and the copy it keeps lives in fn_mcxt with it.
        unsafe {
            let v = datum.cast_mut_ptr::<pg_sys::varlena>();
            let (Some(key), false) = (toast_pointer_key(v), self.site.is_null()) else {
                return Some(BloomView::parse(varlena_bytes(datum)).or_raise());
            };
            let site = &mut *self.site;
            if let Some(kept) = site.detoasted[n].filter(|kept| kept.key == key) {
                return Some(kept.view);
            }
            let mcxt = (*(*self.fcinfo).flinfo).fn_mcxt;
            let old = pg_sys::MemoryContextSwitchTo(mcxt);
            let copy = pg_sys::detoast_external_attr(v);
            pg_sys::MemoryContextSwitchTo(old);
            let view: BloomView<'static> = BloomView::parse(payload(copy)).or_raise();
            // The previous copy of this argument was a value of an earlier call, whose views
            // are gone.
            if let Some(previous) = site.detoasted[n].take() {
                pg_sys::pfree(previous.copy as *mut std::ffi::c_void);
            }
            site.detoasted[n] = Some(Detoasted { key, copy, view });
            Some(view)
        }
    }

    /// Marks the result NULL; returns the datum to return with it.
    pub fn return_null(&self) -> pg_sys::Datum {
        // SAFETY: fcinfo is the live call's.
        unsafe { (*self.fcinfo).isnull = true };
        pg_sys::Datum::from(0usize)
    }

    /// The memory context of the aggregate this call is a support function of (22023 when
    /// called outside an aggregate).
    pub fn aggregate_context(&self) -> pg_sys::MemoryContext {
        let mut context: pg_sys::MemoryContext = std::ptr::null_mut();
        // SAFETY: fcinfo is the live call's; AggCheckCallContext only reads its context.
        if unsafe { pg_sys::AggCheckCallContext(self.fcinfo, &mut context) } == 0 {
            crate::pg::errors::bad_argument(format!(
                "{} must be called as part of an aggregate",
                self.function_sql_name()
            ));
        }
        context
    }

    /// The call's context node (a trigger's TriggerData), or null.
    pub fn context(&self) -> *mut pg_sys::Node {
        // SAFETY: fcinfo is the live call's.
        unsafe { (*self.fcinfo).context }
    }

    /// The SQL name the C function serves, for messages: its symbol without the type suffix.
    pub fn function_sql_name(&self) -> String {
        crate::pg::errors::sql_name(self.function)
    }
}

/// The (toast relation, value id) of an on-disk TOAST pointer, or None for any other datum.
///
/// # Safety
/// `v` must point to a varlena.
unsafe fn toast_pointer_key(v: *const pg_sys::varlena) -> Option<(pg_sys::Oid, pg_sys::Oid)> {
    use pgrx::varlena::{varatt_is_1b_e, vartag_external};
    // SAFETY: `v` is a varlena (the contract); an external one is followed by the two header
    // bytes and a struct varatt_external: rawsize, extinfo, valueid, toastrelid.
    unsafe {
        if !varatt_is_1b_e(v) || vartag_external(v) as u32 != pg_sys::vartag_external::VARTAG_ONDISK
        {
            return None;
        }
        let external = (v as *const u8).add(2);
        let value_id = std::ptr::read_unaligned(external.add(8) as *const u32);
        let toast_relid = std::ptr::read_unaligned(external.add(12) as *const u32);
        Some((pg_sys::Oid::from(toast_relid), pg_sys::Oid::from(value_id)))
    }
}

//! Catalog lookups through the syscache (never SQL on pg_class: extensions such as Citus hide
//! relations there), for names in messages and for a tracked table's columns.

use pgrx::{ereport, pg_sys, PgSqlErrorCode};

/// `schema.table`, quoted, for a relation (42P01 for one that does not exist).
pub fn qualified_name(relid: pg_sys::Oid) -> String {
    // SAFETY: syscache lookups by OID; the names are palloc'd NUL-terminated strings, the
    // relation's checked for NULL (missing) before use.
    unsafe {
        let name = pg_sys::get_rel_name(relid);
        if name.is_null() {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
                format!("relation with OID {} does not exist", relid.to_u32())
            );
        }
        let schema = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid));
        let quoted = pg_sys::quote_qualified_identifier(schema, name);
        std::ffi::CStr::from_ptr(quoted)
            .to_string_lossy()
            .into_owned()
    }
}

/// Whether relation `schema.name` exists.
pub fn relation_exists(schema: &std::ffi::CStr, name: &std::ffi::CStr) -> bool {
    // SAFETY: syscache lookups by NUL-terminated names; a missing schema gives InvalidOid
    // (missing_ok), and so does a missing relation.
    unsafe {
        let namespace = pg_sys::get_namespace_oid(schema.as_ptr(), true);
        namespace != pg_sys::InvalidOid
            && pg_sys::get_relname_relid(name.as_ptr(), namespace) != pg_sys::InvalidOid
    }
}

/// The attribute number and type of `relid`'s column `name`, or None when it has none.
pub fn column(relid: pg_sys::Oid, name: &str) -> Option<(i16, pg_sys::Oid)> {
    let c_name = std::ffi::CString::new(name).ok()?;
    // SAFETY: syscache lookups by relation OID and a NUL-terminated name; a missing column
    // gives InvalidAttrNumber.
    unsafe {
        let attnum = pg_sys::get_attnum(relid, c_name.as_ptr());
        (attnum > 0).then(|| (attnum, pg_sys::get_atttype(relid, attnum)))
    }
}

/// The name of `relid`'s column `attnum` (which must exist).
pub fn column_name(relid: pg_sys::Oid, attnum: i16) -> String {
    // SAFETY: missing_ok = false raises rather than returning NULL; the name is palloc'd.
    unsafe {
        std::ffi::CStr::from_ptr(pg_sys::get_attname(relid, attnum, false))
            .to_string_lossy()
            .into_owned()
    }
}

/// The type of `relid`'s column `attnum`, InvalidOid for none (or a dropped column).
pub fn column_type(relid: pg_sys::Oid, attnum: i16) -> pg_sys::Oid {
    // SAFETY: a syscache lookup by relation OID and attribute number.
    unsafe { pg_sys::get_atttype(relid, attnum) }
}

/// The owner of relation `relid` (42P01 when it does not exist).
pub fn owner(relid: pg_sys::Oid) -> pg_sys::Oid {
    // SAFETY: a syscache lookup by OID; the tuple is checked for validity, read as the
    // pg_class row it is, and released.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::RELOID as i32,
            pg_sys::Datum::from(relid),
        );
        if tuple.is_null() {
            qualified_name(relid); // raises 42P01
            unreachable!("qualified_name raises for a missing relation");
        }
        let form = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_class>(tuple);
        let owner = (*form).relowner;
        pg_sys::ReleaseSysCache(tuple);
        owner
    }
}

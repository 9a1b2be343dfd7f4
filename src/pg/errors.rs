//! Turns engine errors into PostgreSQL errors with specific SQLSTATEs (DESIGN section 5).

use bloom_core::Error;
use pgrx::pg_sys;
use pgrx::{ereport, PgSqlErrorCode};

/// The SQLSTATE for an engine error.
pub fn sqlstate(e: &Error) -> PgSqlErrorCode {
    match e {
        Error::Malformed(_) => PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        Error::BadParameter(_) => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        Error::Full { .. } | Error::TooLarge { .. } => {
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED
        }
        Error::ShapeMismatch { .. } => PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
        Error::FamilyMismatch { .. } => PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
    }
}

/// Raises `e` as an ERROR; never returns.
pub fn raise(e: Error) -> ! {
    ereport!(ERROR, sqlstate(&e), e.to_string());
}

/// Unwraps an engine result or raises its error.
pub trait OrRaise<T> {
    fn or_raise(self) -> T;
}

impl<T> OrRaise<T> for Result<T, Error> {
    fn or_raise(self) -> T {
        match self {
            Ok(v) => v,
            Err(e) => raise(e),
        }
    }
}

/// Raises 42501, as the executor would, unless the current user holds any of `mode` on the
/// table `relid` (code that reads or writes a table directly checks this itself).
pub fn require_table_privilege(relid: pg_sys::Oid, mode: u32) {
    // SAFETY: an ACL check by relation OID for the current user; aclcheck_error raises.
    unsafe {
        let result = pg_sys::pg_class_aclcheck(relid, pg_sys::GetUserId(), mode as pg_sys::AclMode);
        if result != pg_sys::AclResult::ACLCHECK_OK {
            pg_sys::aclcheck_error(
                result,
                pg_sys::ObjectType::OBJECT_TABLE,
                pg_sys::get_rel_name(relid),
            );
        }
    }
}

/// Raises 22004 for a NULL where a value is needed.
pub fn null_argument(message: &'static str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
        message
    );
    #[allow(unreachable_code)]
    {
        unreachable!()
    }
}

/// Raises 22023 for a bad argument that the engine does not see (array shape, element type).
pub fn bad_argument(message: String) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        message
    );
}

/// Raises 42804 for an element type the filter cannot hash.
pub fn unsupported_type(function: &str, type_name: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
        format!(
            "{function} does not support items of type {type_name}; use bigint, integer, smallint, text, varchar, uuid or bytea"
        )
    );
}

/// Raises 55000: a table is not (or no longer) a filter table the library can use (its
/// shape, indexes or rows are not what track made), with the hint that remakes it.
pub fn unusable_filter_table(message: String) -> ! {
    raise_with_hint(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        message,
        "Untrack and track the table again to recreate its filter table.".into(),
    )
}

/// Raises `code` with a message and a hint saying what to do instead.
pub fn raise_with_hint(code: PgSqlErrorCode, message: String, hint: String) -> ! {
    pgrx::pg_sys::panic::ErrorReport::new(code, message, "seen_bloom")
        .set_hint(hint)
        .report(pgrx::PgLogLevel::ERROR);
    unreachable!("an ERROR does not return")
}

/// Sends the client a NOTICE with a hint saying what to do.
pub fn notice_with_hint(message: String, hint: String) {
    pgrx::pg_sys::panic::ErrorReport::new(
        PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
        message,
        "seen_bloom",
    )
    .set_hint(hint)
    .report(pgrx::PgLogLevel::NOTICE);
}

/// The SQL name a C symbol serves, for messages: `seen_bloom_x` is `seen_bloom.x`, and an
/// item type suffix (`_int8`, `_bytes`, `_uuid`, `_array`) names an overload.
pub fn sql_name(symbol: &str) -> String {
    let name = ["_int8", "_bytes", "_uuid", "_array"]
        .iter()
        .find_map(|suffix| symbol.strip_suffix(suffix))
        .unwrap_or(symbol);
    match name.strip_prefix("seen_bloom_") {
        Some(rest) => format!("seen_bloom.{rest}"),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::sql_name;

    #[test]
    fn symbols_name_their_sql_functions() {
        assert_eq!(sql_name("seen_bloom_unseen"), "seen_bloom.unseen");
        assert_eq!(sql_name("seen_bloom__fold"), "seen_bloom._fold");
        assert_eq!(
            sql_name("seen_bloom_item_hash_uuid"),
            "seen_bloom.item_hash"
        );
        assert_eq!(sql_name("bloom_add_array"), "bloom_add");
        assert_eq!(sql_name("bloom_unseen"), "bloom_unseen");
        assert_eq!(sql_name("bloom_agg_add_int8"), "bloom_agg_add");
    }
}

//! The rule of the procedures that commit after each batch of users (`rebuild`, `compact`,
//! `relayout` through `seen_bloom._each_user_batch`): they refuse to start inside a
//! transaction block, where their first COMMIT would fail with PostgreSQL's bare "invalid
//! transaction termination" and a PL/pgSQL context that names none of their arguments.

use crate::pg::v1::v1_function;
use pgrx::{pg_sys, PgSqlErrorCode};

// seen_bloom._require_own_transaction(procedure text) -> void: 2D000 inside a transaction
// block (BEGIN, or several statements sent as one query string), where CALL runs a procedure
// in an atomic context.
v1_function!(
    seen_bloom__require_own_transaction,
    pg_finfo_seen_bloom__require_own_transaction,
    |args| {
        // SAFETY: reads the backend's transaction state.
        if unsafe { pg_sys::IsTransactionBlock() } {
            let procedure = String::from_utf8_lossy(args.bytes(0).unwrap_or_default()).into_owned();
            crate::pg::errors::raise_with_hint(
                PgSqlErrorCode::ERRCODE_INVALID_TRANSACTION_TERMINATION,
                format!(
                    "{procedure} commits after each batch of users and cannot run inside a transaction block"
                ),
                format!(
                    "Run CALL {procedure} as a statement of its own, with autocommit on: not after BEGIN, \
                     nor with other statements in one query string."
                ),
            );
        }
        pg_sys::Datum::from(0)
    }
);

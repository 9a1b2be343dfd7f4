//! Whether Citus is installed and whether a table is distributed by it (docs/SCALING.md):
//! a distributed table's own relation on a node (the "shell") holds no rows, so it is never
//! read or written. Where a user's rows are is read::citus's.
//!
//! Catalogs are read through Citus' own tables (`pg_dist_*`): Citus hides shards from SQL
//! over pg_class in client backends on workers.

use crate::pg::spi::{plan, Connection};
use pgrx::pg_sys;

/// Whether the Citus extension is installed in this database (a catalog lookup; callers
/// keep the answer in their cached configuration).
pub fn installed() -> bool {
    // SAFETY: a catalog lookup by a NUL-terminated name; missing_ok gives InvalidOid.
    unsafe { pg_sys::get_extension_oid(c"citus".as_ptr(), true) != pg_sys::InvalidOid }
}

/// Whether `relid` is a Citus distributed table (its relation on this node holds no rows).
pub fn is_distributed(relid: pg_sys::Oid) -> bool {
    if !installed() {
        return false;
    }
    let conn = Connection::open();
    let plan = plan(
        &conn,
        pg_sys::InvalidOid,
        "citus-distributed",
        &[pg_sys::OIDOID],
        || {
            "SELECT 1 FROM pg_catalog.pg_dist_partition p
          WHERE p.logicalrelid::pg_catalog.oid OPERATOR(pg_catalog.=) $1"
                .into()
        },
    );
    let rows = conn.execute(plan, &[pg_sys::Datum::from(relid)], true);
    rows.len() == 1
}

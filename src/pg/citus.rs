//! Tracked tables distributed by Citus (docs/SCALING.md): where a user's filter rows are on
//! this node. An impressions table hash-distributed by its user column has its filter table
//! co-located with it, so a user's impressions and filter rows share one worker. A shard's
//! configuration is resolved in SQL (`seen_bloom._citus_config`, sql/citus.sql); this module
//! routes a read of a distributed filter table to the user's shard: read in place when its
//! placement is on this node (a delegated call), else fetched through Citus with one router
//! query. A distributed table's own relation on a node (the "shell") holds no rows, so it is
//! never read or written.
//!
//! Catalogs are read through Citus' own tables (`pg_dist_*`) and the syscache: Citus hides
//! shards from SQL over pg_class in client backends on workers.

use crate::pg::item_type::Item;
use crate::pg::spi::Connection;
use crate::storage::filter_reader::UserRows;
use crate::tracking::caches::plan;
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

/// Where a user's filter rows are, seen from this node.
pub enum Placement {
    /// In this shard relation on this node.
    Local(pg_sys::Oid),
    /// On another node.
    Remote,
}

/// The shard of the distributed `filter_table` that holds `user`, and whether it is placed
/// on this node. Asked anew on every call: a shard move or split changes the answer, and a
/// moved shard's old relation lingers until Citus' deferred cleanup drops it.
pub fn placement_of(filter_table: pg_sys::Oid, user: &Item) -> Placement {
    let conn = Connection::open();
    let plan = plan(
        &conn,
        user.oid,
        "citus-placement",
        &[pg_sys::OIDOID, user.oid],
        || {
            "SELECT seen_bloom._citus_local_shard($1::pg_catalog.regclass,
                        pg_catalog.get_shard_id_for_distribution_column($1::pg_catalog.regclass, $2))::pg_catalog.oid"
                .into()
        },
    );
    let rows = conn.execute(
        plan,
        &[pg_sys::Datum::from(filter_table), user.datum()],
        true,
    );
    match rows.datum(0, 1) {
        Some(oid) => Placement::Local(pg_sys::Oid::from(oid.value() as u32)),
        None => Placement::Remote,
    }
}

/// The user's rows from generation `oldest` on, fetched through Citus (a router query to
/// the worker that holds them: one round trip).
pub fn fetch_user_rows(filter_table: pg_sys::Oid, user: &Item, oldest: i32) -> UserRows {
    let conn = Connection::open();
    let plan = plan(
        &conn,
        filter_table,
        "citus-fetch",
        &[user.oid, pg_sys::INT4OID],
        || {
            format!(
                "SELECT generation, layer, segment, bits FROM {}
                  WHERE user_key OPERATOR(pg_catalog.=) $1 AND generation OPERATOR(pg_catalog.>=) $2",
                crate::pg::catalog::qualified_name(filter_table)
            )
        },
    );
    let rows = conn.execute(plan, &[user.datum(), pg_sys::Datum::from(oldest)], true);
    let value = |row, col| rows.datum(row, col).expect("filter columns are NOT NULL");
    let fetched = (0..rows.len()).map(|row| {
        // SAFETY: column 4 is the row's non-null bytea, detoasted by the accessor.
        let bits = unsafe { crate::pg::varlena::varlena_bytes(value(row, 4)) };
        (
            value(row, 1).value() as i32,
            value(row, 2).value() as i16,
            value(row, 3).value() as i32 as u32,
            Box::<[u8]>::from(bits),
        )
    });
    UserRows::owned(fetched.collect())
}

//! Reads of a filter table distributed by Citus (docs/SCALING.md). An impressions table
//! hash-distributed by its user column has its filter table co-located with it, so a user's
//! impressions and filter rows share one worker. A shard's configuration is resolved in SQL
//! (`seen_bloom._citus_config`, sql/citus.sql); this module routes a read to the user's shard:
//! read in place when its placement is on this node (a delegated call), else fetched through
//! Citus with one router query.

use crate::pg::item_type::Item;
use crate::pg::spi::{plan, Connection};
use crate::storage::filter_reader::UserRows;
use pgrx::pg_sys;

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

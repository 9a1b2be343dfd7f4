//! seen_bloom: per-user seen-item Bloom filters inside PostgreSQL.
//!
//! The SQL objects are declared by hand in `sql/seen_bloom.sql` (names, overloads,
//! volatility and comments are part of the product); this crate supplies the C-callable
//! functions behind them, each a thin layer over the `bloom-core` engine.
//!
//! The modules are layers, each using only those before it (scripts/check_modules.py checks
//! the order given here):
//!
//! layers: pg, bloom, tracking, storage, fold, read, ops, compat
//!
//! PostgreSQL plumbing (fmgr arguments, SPI, catalogs, errors, settings, roles); the `bloom`
//! value type and its functions; a tracked table's configuration and rules (generations,
//! layouts, caches); filter-table storage (rows, pages, in-place writes); the folds that write
//! it; the reads (`unseen`, `has_seen`); maintenance (`compact`, `stats`, `relayout`); the
//! names older catalogues call.

use pgrx::prelude::*;

mod bloom;
mod compat;
mod fold;
mod ops;
mod pg;
mod read;
mod storage;
mod tracking;

::pgrx::pg_module_magic!();

extension_sql_file!(
    "../sql/seen_bloom.sql",
    name = "seen_bloom_objects",
    bootstrap
);
extension_sql_file!(
    "../sql/tracking.sql",
    name = "tracking_objects",
    requires = ["seen_bloom_objects"]
);
extension_sql_file!(
    "../sql/citus.sql",
    name = "citus_objects",
    requires = ["tracking_objects"]
);
extension_sql_file!("../sql/activity.sql", name = "activity_objects", finalize);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // pgrx attaches std::backtrace::Backtrace::capture() to every error raised through Rust
    // code, and capture() is on whenever RUST_BACKTRACE=1 is in the server's environment: a
    // 23-frame backtrace then reached clients in DETAIL. RUST_LIB_BACKTRACE decides for
    // capture() alone (panics still print theirs to the log). Set before any capture, as the
    // answer is cached per process; a backend is single-threaded here.
    // (set_var races with other threads' reads of the environment: a backend has no others.)
    std::env::set_var("RUST_LIB_BACKTRACE", "0");
    pg::gucs::register();
    pg::activity::init();
    storage::wal_record::init();
    ops::maintenance_worker::init();
    ops::maintenance_lock::register_callback();
    tracking::caches::register_invalidation();
    fold::xact::register_callbacks();
}

#[cfg(any(test, feature = "pg_test"))]
mod tests;

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}

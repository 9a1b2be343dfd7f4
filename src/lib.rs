//! seen_bloom: per-user seen-item Bloom filters inside PostgreSQL.
//!
//! The SQL objects are declared by hand in `sql/seen_bloom.sql` (names, overloads,
//! volatility and comments are part of the product); this crate supplies the C-callable
//! functions behind them, each a thin layer over the `bloom-core` engine.

use pgrx::prelude::*;

mod activity;
mod aggregates;
mod args;
mod caches;
mod candidates;
mod catalog;
mod citus;
mod commit_fold;
mod compact;
mod compat;
mod errors;
mod filter_reader;
mod filter_table;
mod filter_writer;
mod fold;
mod fold_trigger;
mod functions;
mod generations;
mod gucs;
mod heap_prefetch;
mod in_place;
mod item_array;
mod item_hash;
mod item_type;
mod owner;
mod predicate;
mod relayout;
mod segments;
mod spi;
mod tracked_config;
mod type_io;
mod unseen;
mod user_locks;
mod v1;
mod varlena;

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
    gucs::register();
    activity::init();
    caches::register_invalidation();
    in_place::register_callbacks();
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

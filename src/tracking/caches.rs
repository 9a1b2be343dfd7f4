//! Every backend-local cache of the library, and the relcache invalidation that clears them.
//!
//! - configs: a tracked table's configuration (one SPI read per table per backend);
//! - layouts: generation layouts by (error rate per generation, layout number, user cap);
//! - user caps: a filter table's tracked table and per-user cap, for `seen_bloom._fold`;
//! - generations: where a fold left a (user, generation)'s rows, to fetch them by TID;
//! - fold targets: filter tables checked to be registered for a fold's error rate;
//! - checked shapes: filter tables whose columns were checked;
//!
//! Any DDL on a relation sends a relcache invalidation for it: the entries of that relation
//! (as impressions or as filter table) go, and all go on a full reset. SPI plans kept for the
//! backend's life (spi::plan) need no invalidation: PostgreSQL's plan cache replans them after
//! DDL. Other per-backend state is a transaction's, emptied at its end, not a cache: bits held
//! for in-place writes (storage::in_place), deferred folds (fold::commit_fold); and the
//! buffers folds at commit last pinned (storage::unlocked_write) are hints checked at use.

use crate::pg::errors::OrRaise;
use crate::tracking::tracked_config::{TrackedConfig, UserCap};
use bloom_core::GenerationLayout;
use pgrx::pg_sys;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// (filter table, user's canonical bytes, generation).
pub type GenerationKey = (pg_sys::Oid, Vec<u8>, i32);

/// What a backend remembers of a generation after its last fold of it: hints, checked
/// where they are used, that save index lookups.
#[derive(Default)]
pub struct KnownGeneration {
    /// Its top layer (None: an exact row only).
    pub top: Option<usize>,
    /// Where the rows it read or wrote were left: (layer, segment, the start of the row's
    /// HOT chain, as its index entry points).
    pub tids: Vec<(i16, u32, pg_sys::ItemPointerData)>,
}

/// (error rate per generation's bits, layout number, per-user cap).
type LayoutKey = (u64, i32, Option<u64>);

/// Most (filter table, user, generation) a backend remembers (about 150 bytes each).
const KNOWN_GENERATIONS_LIMIT: usize = 1 << 16;

thread_local! {
    static CONFIGS: RefCell<HashMap<pg_sys::Oid, Rc<TrackedConfig>>> = RefCell::new(HashMap::new());
    static LAYOUTS: RefCell<HashMap<LayoutKey, Rc<GenerationLayout>>> = RefCell::new(HashMap::new());
    static USER_CAPS: RefCell<HashMap<pg_sys::Oid, Option<UserCap>>> = RefCell::new(HashMap::new());
    static KNOWN_GENERATIONS: RefCell<foldhash::HashMap<GenerationKey, KnownGeneration>> = RefCell::new(Default::default());
    /// (filter table, per-generation error rate) pairs checked by fold's check_fold_target.
    static FOLD_TARGETS: RefCell<HashSet<(pg_sys::Oid, u64)>> = RefCell::new(HashSet::new());
    /// (filter table, user type) pairs whose columns were checked.
    static CHECKED_SHAPES: RefCell<HashSet<(pg_sys::Oid, pg_sys::Oid)>> = RefCell::new(HashSet::new());
}

/// The tracking configuration of `impressions` (a tracked table or a partition of one).
pub fn config(impressions: pg_sys::Oid) -> Rc<TrackedConfig> {
    // Commits since this transaction last took a lock (a layout that `relayout` changed) are
    // read first: a configuration is then never older than the statement's snapshot (a
    // flag's read when nothing is pending).
    // SAFETY: processes pending invalidations, as taking any new lock does.
    unsafe { pg_sys::AcceptInvalidationMessages() };
    if let Some(c) = CONFIGS.with(|c| c.borrow().get(&impressions).cloned()) {
        return c;
    }
    let config = Rc::new(TrackedConfig::load(impressions, layout));
    CONFIGS.with(|c| c.borrow_mut().insert(impressions, config.clone()));
    config
}

/// The generation layout of a tracked table: its per-generation error budget, its layout
/// number (`seen_bloom.tracked.layout`; 22023 for a number this build does not know) and its
/// per-user cap (`seen_bloom.tracked.user_cap`).
pub fn layout(
    error_rate_per_generation: f64,
    layout_number: i32,
    cap: Option<u64>,
) -> Rc<GenerationLayout> {
    let key = (error_rate_per_generation.to_bits(), layout_number, cap);
    if let Some(layout) = LAYOUTS.with(|l| l.borrow().get(&key).cloned()) {
        return layout;
    }
    let layout = Rc::new(
        crate::tracking::layout::generation_layout(error_rate_per_generation, layout_number)
            .with_cap(cap)
            .or_raise(),
    );
    LAYOUTS.with(|l| l.borrow_mut().insert(key, layout.clone()));
    layout
}

/// The per-user cap of the tracked table whose filter table is `filter_table` (None: no cap,
/// or no tracked table names it here, as on a Citus worker), for the folds that know only
/// the filter table (`seen_bloom._fold`: backfill, rebuild, a `where` table's trigger).
/// Forgotten on the filter table's invalidation, which a change of the cap sends.
pub fn user_cap(filter_table: pg_sys::Oid) -> Option<UserCap> {
    if let Some(cap) = USER_CAPS.with(|c| c.borrow().get(&filter_table).copied()) {
        return cap;
    }
    let conn = crate::pg::spi::Connection::open();
    let plan = conn.prepare(
        "SELECT t.impressions::pg_catalog.oid,
                (pg_catalog.to_jsonb(t) OPERATOR(pg_catalog.->>) 'user_cap')::pg_catalog.int8
         FROM seen_bloom.tracked t WHERE t.filter_table::pg_catalog.oid OPERATOR(pg_catalog.=) $1",
        &[pg_sys::OIDOID],
        false,
    );
    let rows = conn.execute(plan, &[pg_sys::Datum::from(filter_table)], true);
    let cap = (rows.len() > 0)
        .then(|| {
            let items = rows.datum(0, 2)?.value() as u64;
            let counted_for = pg_sys::Oid::from(rows.datum(0, 1)?.value() as u32);
            Some(UserCap { items, counted_for })
        })
        .flatten();
    USER_CAPS.with(|c| c.borrow_mut().insert(filter_table, cap));
    cap
}

/// Takes out what is remembered of a generation (put back with `remember_generation`).
pub fn take_generation(key: &GenerationKey) -> Option<KnownGeneration> {
    KNOWN_GENERATIONS.with(|t| t.borrow_mut().remove(key))
}

/// `f` of what is remembered of a generation, if anything, where it is kept (a fold at
/// commit reads it without taking it out: taking it out and putting it back cost 4% of a
/// 20-row insert's added CPU in hashing and moving).
pub fn with_generation<T>(key: &GenerationKey, f: impl FnOnce(&KnownGeneration) -> T) -> Option<T> {
    KNOWN_GENERATIONS.with(|t| t.borrow().get(key).map(f))
}

pub fn remember_generation(key: GenerationKey, known: KnownGeneration) {
    KNOWN_GENERATIONS.with(|t| {
        let mut generations = t.borrow_mut();
        if generations.len() >= KNOWN_GENERATIONS_LIMIT {
            generations.clear();
        }
        generations.insert(key, known);
    });
}

/// Whether `check` passed for (filter table, error rate) since the table's last
/// invalidation; runs it (it raises on failure) and remembers the pass otherwise.
pub fn fold_target_checked(filter_table: pg_sys::Oid, error_rate: f64, check: impl FnOnce()) {
    let key = (filter_table, error_rate.to_bits());
    if !FOLD_TARGETS.with(|t| t.borrow().contains(&key)) {
        check();
        FOLD_TARGETS.with(|t| t.borrow_mut().insert(key));
    }
}

/// Whether a filter table's columns were checked for `user_type`.
pub fn shape_checked(filter_table: pg_sys::Oid, user_type: pg_sys::Oid) -> bool {
    CHECKED_SHAPES.with(|c| c.borrow().contains(&(filter_table, user_type)))
}

pub fn remember_shape(filter_table: pg_sys::Oid, user_type: pg_sys::Oid) {
    CHECKED_SHAPES.with(|c| c.borrow_mut().insert((filter_table, user_type)));
}

/// Drops every entry of `relid`, as impressions or filter table (everything for InvalidOid).
fn forget(relid: pg_sys::Oid) {
    let keep = |table: pg_sys::Oid| relid != pg_sys::InvalidOid && table != relid;
    CONFIGS.with(|c| {
        c.borrow_mut()
            .retain(|&impressions, config| keep(impressions) && keep(config.filter_table))
    });
    KNOWN_GENERATIONS.with(|t| t.borrow_mut().retain(|(table, _, _), _| keep(*table)));
    FOLD_TARGETS.with(|t| t.borrow_mut().retain(|&(table, _)| keep(table)));
    USER_CAPS.with(|c| c.borrow_mut().retain(|&table, _| keep(table)));
    CHECKED_SHAPES.with(|c| c.borrow_mut().retain(|&(table, _)| keep(table)));
}

/// Called by PostgreSQL for each relcache invalidation this backend processes.
unsafe extern "C-unwind" fn on_relcache_invalidation(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    forget(relid);
}

/// Registers the invalidation callback (once, from _PG_init).
pub fn register_invalidation() {
    // SAFETY: the callback is a plain function that only touches this backend's maps.
    unsafe {
        pg_sys::CacheRegisterRelcacheCallback(
            Some(on_relcache_invalidation),
            pg_sys::Datum::from(0usize),
        )
    };
}

// seen_bloom._forget_config(impressions regclass) -> void: every backend reads the table's
// tracking configuration again once this transaction commits (a relcache invalidation of
// the table, which `register_invalidation`'s callback turns into dropping its entries).
crate::pg::v1::v1_function!(
    seen_bloom__forget_config,
    pg_finfo_seen_bloom__forget_config,
    |args| {
        if let Some(impressions) = args.regclass(0) {
            // SAFETY: queues an invalidation message for the relation's OID, sent at commit.
            unsafe { pg_sys::CacheInvalidateRelcacheByRelid(impressions) };
        }
        pg_sys::Datum::from(0usize)
    }
);

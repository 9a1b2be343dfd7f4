//! `seen_bloom.activity`: what the read path and the fold did for each tracked table,
//! cumulative since a reset (`seen_bloom.activity_reset`). The counters live in shared
//! memory, which a library can only reserve when it is loaded at server start
//! (`shared_preload_libraries`); loaded later, nothing is counted and the view says how to
//! turn it on. `seen_bloom.track_activity = off` stops counting (the A/B of its cost).
//!
//! One slot per (database, table), found by open addressing and claimed with a
//! compare-and-swap, its counters plain atomic additions: no lock on the read path. A slot
//! stays claimed once taken (releasing one under concurrent additions could hand another
//! table's counts to it), so SLOTS bounds the tables counted since the server started.

use pgrx::atomics::PgAtomic;
use pgrx::shmem::PGRXSharedMemory;
use pgrx::{pg_guard, pg_shmem_init, pg_sys, GucContext, GucFlags, GucRegistry, GucSetting};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// What is counted, in the order of the view's columns.
#[derive(Clone, Copy)]
pub enum Counter {
    UnseenCalls,
    HasSeenCalls,
    CandidatesIn,
    CandidatesSeen,
    CandidatesReturned,
    Folds,
    ImpressionsFolded,
    RowsSkipped,
    FoldMicros,
    ReadMicros,
    ImpressionsCapped,
    CappedFolds,
}
const COUNTERS: usize = 12;

/// Tables counted at most (about 90 bytes each: 92 KB of shared memory).
const SLOTS: usize = 1024;

#[repr(C)]
#[derive(Default)]
struct Slot {
    /// (database OID << 32) | table OID; 0 while free.
    key: AtomicU64,
    counters: [AtomicU64; COUNTERS],
}

#[repr(C)]
pub struct Slots([Slot; SLOTS]);

// SAFETY: plain atomics with no pointers, valid at any address and in any process.
unsafe impl PGRXSharedMemory for Slots {}

impl Default for Slots {
    fn default() -> Self {
        Slots(std::array::from_fn(|_| Slot::default()))
    }
}

// SAFETY: one name, used by this library only.
static ACTIVITY: PgAtomic<Slots> = unsafe { PgAtomic::new(c"seen_bloom activity") };
/// Whether ACTIVITY was reserved (set in the postmaster, inherited by every backend).
static RESERVED: AtomicBool = AtomicBool::new(false);
pub static TRACK_ACTIVITY: GucSetting<bool> = GucSetting::<bool>::new(true);

/// From _PG_init: reserves the shared memory when the library is preloaded.
pub fn init() {
    GucRegistry::define_bool_guc(
        c"seen_bloom.track_activity",
        c"Counts calls, candidates and folds per tracked table in seen_bloom.activity.",
        c"Needs seen_bloom in shared_preload_libraries.",
        &TRACK_ACTIVITY,
        GucContext::Userset,
        GucFlags::default(),
    );
    if crate::pg::gucs::preloading() {
        pg_shmem_init!(ACTIVITY);
        RESERVED.store(true, Ordering::Relaxed);
    }
}

/// Whether counters are kept (the library was preloaded).
pub fn available() -> bool {
    RESERVED.load(Ordering::Relaxed)
}

fn key_of(table: pg_sys::Oid) -> u64 {
    // SAFETY: the backend's database, set before any query runs.
    let database = unsafe { pg_sys::MyDatabaseId };
    (u64::from(database.to_u32()) << 32) | u64::from(table.to_u32())
}

/// The slot of `table` in this database, claimed when it has none (None when counting is
/// off, or every slot is taken).
fn slot(table: pg_sys::Oid) -> Option<&'static Slot> {
    if !available() || !TRACK_ACTIVITY.get() {
        return None;
    }
    let key = key_of(table);
    let slots = &ACTIVITY.get().0;
    let start = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize % SLOTS;
    for probe in 0..SLOTS {
        let slot = &slots[(start + probe) % SLOTS];
        match slot
            .key
            .compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return Some(slot),
            Err(found) if found == key => return Some(slot),
            Err(_) => {}
        }
    }
    None
}

/// Adds `n` to one counter of `table` now (the folds' refusals by the per-user cap, which
/// happen where a fold runs: at the statement, or at its commit).
pub fn add(table: pg_sys::Oid, counter: Counter, n: u64) {
    if let Some(slot) = slot(table) {
        slot.counters[counter as usize].fetch_add(n, Ordering::Relaxed);
    }
}

/// Counts for one table, added to its slot when dropped (nothing when counting is off).
pub struct Tally {
    slot: Option<&'static Slot>,
    started: Option<Instant>,
    time: Counter,
    counts: [(Counter, u64); 4],
    used: usize,
}

impl Tally {
    /// Starts counting for `table`; the time until drop goes to `time`.
    pub fn start(table: pg_sys::Oid, time: Counter) -> Tally {
        let slot = slot(table);
        Tally {
            started: slot.map(|_| Instant::now()),
            slot,
            time,
            counts: [(Counter::Folds, 0); 4],
            used: 0,
        }
    }

    /// Adds `n` to `counter` (at most four counters per tally).
    pub fn add(&mut self, counter: Counter, n: u64) {
        if self.slot.is_some() {
            self.counts[self.used] = (counter, n);
            self.used += 1;
        }
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        let (Some(slot), Some(started)) = (self.slot, self.started) else {
            return;
        };
        if std::thread::panicking() {
            return;
        }
        for &(counter, n) in &self.counts[..self.used] {
            slot.counters[counter as usize].fetch_add(n, Ordering::Relaxed);
        }
        let micros = started.elapsed().as_micros() as u64;
        slot.counters[self.time as usize].fetch_add(micros, Ordering::Relaxed);
    }
}

/// The counters of this database's tables: (table, counters) each.
pub fn snapshot() -> Vec<(pg_sys::Oid, [u64; COUNTERS])> {
    if !available() {
        return vec![];
    }
    // SAFETY: the backend's database.
    let database = u64::from(unsafe { pg_sys::MyDatabaseId }.to_u32());
    ACTIVITY
        .get()
        .0
        .iter()
        .filter_map(|slot| {
            let key = slot.key.load(Ordering::Acquire);
            (key != 0 && key >> 32 == database).then(|| {
                (
                    pg_sys::Oid::from(key as u32),
                    std::array::from_fn(|i| slot.counters[i].load(Ordering::Relaxed)),
                )
            })
        })
        .collect()
}

/// Zeroes the counters of `table` (every table of this database when None).
pub fn reset(table: Option<pg_sys::Oid>) {
    if !available() {
        return;
    }
    // SAFETY: the backend's database.
    let database = u64::from(unsafe { pg_sys::MyDatabaseId }.to_u32());
    for slot in &ACTIVITY.get().0 {
        let key = slot.key.load(Ordering::Acquire);
        let ours = match table {
            Some(t) => key == key_of(t),
            None => key != 0 && key >> 32 == database,
        };
        if ours {
            for counter in &slot.counters {
                counter.store(0, Ordering::Relaxed);
            }
        }
    }
}

/// The counters a database not yet updated from 0.4.0 reads: its view takes 11 values per
/// table from `seen_bloom._activity()` (the table, then these).
const COUNTERS_0_4: usize = 10;

// seen_bloom._activity(counters int) -> bigint[]: per table of this database, the table and
// the first `counters` counters (all of them at most; 0.4.0's `_activity()`: its 10).
crate::pg::v1::v1_function!(
    seen_bloom__activity,
    pg_finfo_seen_bloom__activity,
    |args| {
        let wanted = match args.nargs() {
            0 => COUNTERS_0_4,
            _ => (args.int4(0).unwrap_or(0).max(0) as usize).min(COUNTERS),
        };
        if !available() {
            crate::pg::errors::notice_with_hint(
            "seen_bloom.activity is empty: its counters need seen_bloom in shared_preload_libraries".into(),
            "Add seen_bloom to shared_preload_libraries in postgresql.conf and restart the server.".into(),
        );
        }
        let mut values = Vec::new();
        // Only the tables the caller has a right on (as seen_bloom.tracked shows them): the
        // counters tell how a table is used.
        let visible = |table: pg_sys::Oid| {
            let any = pg_sys::ACL_SELECT
                | pg_sys::ACL_INSERT
                | pg_sys::ACL_UPDATE
                | pg_sys::ACL_DELETE
                | pg_sys::ACL_TRUNCATE
                | pg_sys::ACL_REFERENCES
                | pg_sys::ACL_TRIGGER;
            // SAFETY: a syscache lookup by OID (0 for a dropped table, which is skipped),
            // then an ACL check of an existing relation (true when any of the bits is held).
            unsafe {
                pg_sys::get_rel_relkind(table) != 0
                    && pg_sys::pg_class_aclcheck(table, pg_sys::GetUserId(), any as pg_sys::AclMode)
                        == pg_sys::AclResult::ACLCHECK_OK
            }
        };
        for (table, counters) in snapshot().into_iter().filter(|(t, _)| visible(*t)) {
            values.push(pg_sys::Datum::from(i64::from(table.to_u32())));
            values.extend(
                counters[..wanted]
                    .iter()
                    .map(|&c| pg_sys::Datum::from(c as i64)),
            );
        }
        debug_assert_eq!(values.len() % (1 + wanted), 0);
        // SAFETY: `values` holds int8 datums (by value, 8 bytes, double-aligned), copied into a
        // new array in the current memory context.
        let array = unsafe {
            pg_sys::construct_array(
                values.as_mut_ptr(),
                values.len() as i32,
                pg_sys::INT8OID,
                8,
                true,
                pg_sys::TYPALIGN_DOUBLE as std::ffi::c_char,
            )
        };
        pg_sys::Datum::from(array)
    }
);

// seen_bloom.activity_reset(impressions regclass DEFAULT NULL) -> void
crate::pg::v1::v1_function!(
    seen_bloom_activity_reset,
    pg_finfo_seen_bloom_activity_reset,
    |args| {
        // A table's counters are its owner's to reset; all of them, a superuser's. (EXECUTE
        // is revoked from PUBLIC too: a grant of it still reaches no other role's table.)
        match args.regclass(0) {
            Some(table) => crate::pg::owner::require_owner(table),
            // SAFETY: a catalog check of the current user.
            None if !unsafe { pg_sys::superuser() } => {
                pgrx::ereport!(
                    ERROR,
                    pgrx::PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    "seen_bloom.activity_reset() of every table needs a superuser; give a table to reset its counters"
                );
            }
            None => {}
        }
        reset(args.regclass(0));
        pg_sys::Datum::from(0usize)
    }
);

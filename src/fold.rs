//! The fold: a batch of (user, generation, item hash) written into a filter table, for the
//! tracked table's trigger (see fold_trigger), for backfill and rebuild (`seen_bloom._fold`).
//!
//! Per user of the batch: an advisory lock, so writers of one user take turns (a batch of
//! many users locks the filter table instead, see lock_users); the rows the
//! user's new items fall in, read by primary key; the items folded in by the engine
//! (bloom_core::GenerationRows); the changed rows written back (see filter_rows).

use crate::errors::OrRaise;
use crate::filter_rows::{FilterRows, StoredRow};
use crate::items::{ItemArray, ItemType};
use crate::spi::Connection;
use crate::tracking::{layout_for, qualified_name};
use crate::v1::{arg, v1_function};
use bloom_core::{hash_bytes, GenerationLayout, GenerationRows, EXACT_LAYER};
use pgrx::pg_sys;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};

/// (filter table, user's canonical bytes, generation).
type GenerationKey = (pg_sys::Oid, Vec<u8>, i32);

/// What a backend remembers of a generation after its last fold of it: hints, checked
/// where they are used, that save index lookups.
#[derive(Default)]
struct KnownGeneration {
    /// Its top layer (None: an exact row only).
    top: Option<usize>,
    /// Where the rows it read or wrote were left: (layer, segment, the start of the row's
    /// HOT chain, as its index entry points).
    tids: Vec<(i16, u32, pg_sys::ItemPointerData)>,
}

thread_local! {
    static KNOWN_GENERATIONS: RefCell<HashMap<GenerationKey, KnownGeneration>> = RefCell::new(HashMap::new());
    /// (filter table, per-generation error rate) pairs checked by check_fold_target.
    static FOLD_TARGETS: RefCell<HashSet<(pg_sys::Oid, u64)>> = RefCell::new(HashSet::new());
}

/// Drops what this backend remembers of `relid` (everything for InvalidOid).
pub fn forget(relid: pg_sys::Oid) {
    let keep = |table: pg_sys::Oid| relid != pg_sys::InvalidOid && table != relid;
    FOLD_TARGETS.with(|t| t.borrow_mut().retain(|&(table, _)| keep(table)));
    KNOWN_GENERATIONS.with(|t| t.borrow_mut().retain(|(table, _, _), _| keep(*table)));
}

unsafe extern "C-unwind" {
    /// The C function behind pg_advisory_xact_lock(int4, int4), called without SPI.
    #[link_name = "pg_advisory_xact_lock_int4"]
    fn advisory_xact_lock_int4(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum;
}

/// One (user, generation) of a batch.
struct Group {
    user: pg_sys::Datum,
    /// The user's canonical bytes (lock key, cache key, the check of a row fetched by TID).
    user_bytes: Vec<u8>,
    generation: i32,
    hashes: Vec<u64>,
}

/// The advisory lock key of a user's filter rows: writers of one user take turns (the
/// trigger's fold and rebuild alike). Two users may share a key; they then just take turns.
fn lock_key(user_bytes: &[u8]) -> i32 {
    hash_bytes(user_bytes) as i32
}

/// Most distinct lock keys a fold or rebuild takes one advisory lock each for. Each lock takes
/// a slot of the shared lock table until commit (max_locks_per_transaction, 64 by default,
/// times the connections), so a statement of 100,000 users failed with 53200; past this a
/// batch locks the whole filter table instead (see lock_users).
const MAX_USER_LOCKS: usize = 256;

/// Takes the transaction-level advisory locks of `keys` on `filter_table`, in sorted order,
/// so that any two lockers wait for each other instead of deadlocking. A batch of more than
/// [`MAX_USER_LOCKS`] keys takes one ShareRowExclusiveLock on the filter table instead: it
/// conflicts with itself and with the RowExclusiveLock that every other fold (and rebuild's
/// DELETE) holds on the table until commit, so writers still take turns, one big batch at a
/// time against everyone, while the lock table holds one entry.
fn lock_users(filter_table: pg_sys::Oid, mut keys: Vec<i32>) {
    // Writers only: a read-only transaction (a hot standby's included) gets 25006 here, before
    // any lock a standby could not take.
    unsafe { pg_sys::PreventCommandIfReadOnly(c"seen_bloom fold or rebuild".as_ptr()) };
    keys.sort_unstable();
    keys.dedup();
    if keys.len() > MAX_USER_LOCKS {
        // As LOCK TABLE would ask: seen_bloom._lock_users is executable by everyone, and a
        // table lock must not be a way to stall writers of a table one may not write.
        crate::errors::require_table_privilege(
            filter_table,
            pg_sys::ACL_UPDATE | pg_sys::ACL_DELETE | pg_sys::ACL_TRUNCATE,
        );
        unsafe {
            pg_sys::LockRelationOid(
                filter_table,
                pg_sys::ShareRowExclusiveLock as pg_sys::LOCKMODE,
            )
        };
        return;
    }
    for key in keys {
        unsafe {
            pg_sys::DirectFunctionCall2Coll(
                Some(advisory_xact_lock_int4),
                pg_sys::InvalidOid,
                pg_sys::Datum::from(filter_table.to_u32() as i32),
                pg_sys::Datum::from(key),
            );
        }
    }
}

// seen_bloom._lock_users(filter_table regclass, users anyarray) -> void: what rebuild takes
// before it deletes a user's rows, so no fold of those users runs in between.
v1_function!(tracked_lock_users, pg_finfo_tracked_lock_users, |fcinfo| {
    let (Some(filter_table), Some(users)) = (arg(fcinfo, 0), arg(fcinfo, 1)) else {
        return pg_sys::Datum::from(0usize);
    };
    let users = ItemArray::from_datum(users, "seen_bloom._lock_users");
    let keys = users
        .elements()
        .flatten()
        .map(|u| lock_key(&users.item_type.canonical_bytes(u)))
        .collect();
    lock_users(pg_sys::Oid::from(filter_table.value() as u32), keys);
    pg_sys::Datum::from(0usize)
});

/// A copy of a non-null datum in the current memory context (varlenas detoasted).
unsafe fn copy_datum(datum: pg_sys::Datum, byval: bool, len: i16) -> pg_sys::Datum {
    unsafe {
        if byval {
            datum
        } else if len == -1 {
            pg_sys::Datum::from(pg_sys::pg_detoast_datum_copy(datum.cast_mut_ptr()))
        } else {
            let copy = pg_sys::palloc(len as usize);
            std::ptr::copy_nonoverlapping(
                datum.cast_mut_ptr::<u8>(),
                copy as *mut u8,
                len as usize,
            );
            pg_sys::Datum::from(copy)
        }
    }
}

/// Folds a batch of impressions, (user, generation, item hash) each, into `filter_table`,
/// whose users are of type `user_type`. Rows may come in any order and repeat.
pub fn fold_batch(
    filter_table: pg_sys::Oid,
    layout: &GenerationLayout,
    user_type: pg_sys::Oid,
    impressions: impl Iterator<Item = (pg_sys::Datum, i32, u64)>,
) {
    let user_kind = ItemType::require(user_type, "seen_bloom fold");
    let (mut user_len, mut user_byval) = (0i16, false);
    unsafe { pg_sys::get_typlenbyval(user_type, &mut user_len, &mut user_byval) };
    // Group the batch by (user, generation), users compared by their canonical bytes; a
    // group keeps its own copy of the user (the caller's datum may not outlive the loop).
    let mut groups: BTreeMap<(Vec<u8>, i32), Group> = BTreeMap::new();
    for (user, generation, hash) in impressions {
        let bytes = unsafe { user_kind.canonical_bytes(user) }.into_owned();
        groups
            .entry((bytes.clone(), generation))
            .or_insert_with(|| Group {
                user: unsafe { copy_datum(user, user_byval, user_len) },
                user_bytes: bytes,
                generation,
                hashes: Vec::new(),
            })
            .hashes
            .push(hash);
    }
    if groups.is_empty() {
        return;
    }
    check_fold_target(filter_table, layout.error_rate());

    // Writers of the same user take turns (see lock_users); the rows are read after.
    lock_users(
        filter_table,
        groups.keys().map(|(bytes, _)| lock_key(bytes)).collect(),
    );
    let mut rows = FilterRows::open(filter_table, user_type);
    for ((user_bytes, _), group) in groups {
        let cache_key = (filter_table, user_bytes, group.generation);
        // Taken out while the group is folded (an error leaves it out: it is only a hint).
        let known = KNOWN_GENERATIONS.with(|t| t.borrow_mut().remove(&cache_key));
        let known = fold_group(&mut rows, layout, &group, known);
        KNOWN_GENERATIONS.with(|t| {
            let mut generations = t.borrow_mut();
            if generations.len() >= KNOWN_GENERATIONS_LIMIT {
                generations.clear();
            }
            generations.insert(cache_key, known);
        });
    }
}

// seen_bloom._fold(filter_table regclass, error_rate_per_generation float8, layout int,
//                  users anyarray, generations int4[], hashes int8[]) -> void
// and the form without `layout` that tables tracked before layout 2 generated (layout 1).
v1_function!(tracked_fold, pg_finfo_tracked_fold, |fcinfo| {
    let nargs = (*fcinfo).nargs as usize;
    let args: Option<Vec<_>> = (0..nargs).map(|i| arg(fcinfo, i)).collect();
    let Some(args) = args else {
        return pg_sys::Datum::from(0usize);
    };
    let (layout_number, arrays) = match nargs {
        6 => (args[2].value() as i32, &args[3..]),
        _ => (1, &args[2..]),
    };
    let filter_table = pg_sys::Oid::from(args[0].value() as u32);
    let layout = layout_for(f64::from_bits(args[1].value() as u64), layout_number);
    let users = ItemArray::from_datum(arrays[0], "seen_bloom._fold");
    let generations = ItemArray::from_datum(arrays[1], "seen_bloom._fold");
    let hashes = ItemArray::from_datum(arrays[2], "seen_bloom._fold");
    if users.len != generations.len || users.len != hashes.len {
        crate::errors::bad_argument("seen_bloom._fold: arrays of different lengths".into());
    }
    let impressions = users
        .elements()
        .zip(generations.elements())
        .zip(hashes.elements())
        .filter_map(|((user, generation), hash)| {
            Some((user?, generation?.value() as i32, hash?.value() as u64))
        });
    fold_batch(filter_table, &layout, users.element_type, impressions);
    pg_sys::Datum::from(0usize)
});

/// Most (filter table, user, generation) a backend remembers (about 150 bytes each).
const KNOWN_GENERATIONS_LIMIT: usize = 1 << 16;

/// The rows of one group as loaded: the generation's state and where its rows are.
struct LoadedGroup {
    state: GenerationRows,
    /// Stored rows: (layer, segment, the version read, its HOT chain's start).
    stored: Vec<(i16, u32, pg_sys::ItemPointerData, pg_sys::ItemPointerData)>,
    /// Keys looked up and not found.
    absent: Vec<(i16, u32)>,
    /// Whether the state's top is the generation's real top (else rows above it may exist).
    top_verified: bool,
}

impl LoadedGroup {
    fn new() -> LoadedGroup {
        LoadedGroup {
            state: GenerationRows::default(),
            stored: vec![],
            absent: vec![],
            top_verified: false,
        }
    }

    fn load(&mut self, layout: &GenerationLayout, row: StoredRow) {
        self.state
            .load(layout, row.layer, row.segment, &row.bits)
            .or_raise();
        self.stored
            .push((row.layer, row.segment, row.tid, row.root));
    }

    fn known(&self, key: (i16, u32)) -> bool {
        self.absent.contains(&key) || self.stored.iter().any(|&(l, s, _, _)| (l, s) == key)
    }

    /// The version read of row `key` and its chain's start.
    fn tid(&self, key: (i16, u32)) -> Option<(pg_sys::ItemPointerData, pg_sys::ItemPointerData)> {
        self.stored
            .iter()
            .find(|&&(l, s, _, _)| (l, s) == key)
            .map(|&(_, _, tid, root)| (tid, root))
    }

    /// Looks up `key`, loading the row if it exists; true if it did. `hint`: where this
    /// backend last left the row (fetched directly; looked up by key if that is stale).
    fn fetch(
        &mut self,
        rows: &mut FilterRows,
        layout: &GenerationLayout,
        group: &Group,
        key: (i16, u32),
        hint: Option<pg_sys::ItemPointerData>,
    ) -> bool {
        let hinted = hint
            .and_then(|tid| rows.row_at(tid, &group.user_bytes, group.generation, key.0, key.1));
        match hinted.or_else(|| rows.row(group.user, group.generation, key.0, key.1)) {
            Some(row) => {
                self.load(layout, row);
                true
            }
            None => {
                self.absent.push(key);
                false
            }
        }
    }
}

/// Loads the rows a group's items fall in. With the generation remembered from an earlier
/// fold in this backend, that is one heap fetch per row at the TID it was left at (an index
/// lookup when that version is gone); the top is then only a hint (another backend may have
/// started a layer above it since, see fold_group).
/// Otherwise the generation's highest row, (layer, segment) descending, tells its top (the
/// exact row alone: no layers yet; none: an empty generation) and is the row needed whenever
/// the top layer is one segment; other top-layer segments are looked up by key.
fn load_group(
    rows: &mut FilterRows,
    layout: &GenerationLayout,
    group: &Group,
    known: Option<&KnownGeneration>,
) -> LoadedGroup {
    if let Some(known) = known {
        let top = known.top;
        let mut loaded = LoadedGroup::new();
        let needed = GenerationRows::needed(layout, top, &group.hashes);
        let all_found = needed.iter().all(|&key| {
            let hint = known
                .tids
                .iter()
                .find(|&&(l, s, _)| (l, s) == key)
                .map(|&(_, _, tid)| tid);
            loaded.fetch(rows, layout, group, key, hint)
        });
        if all_found {
            loaded.state.top = top;
            // An exact row exists only while a generation has no layers.
            loaded.top_verified = top.is_none();
            return loaded;
        }
    }
    let mut loaded = LoadedGroup::new();
    loaded.top_verified = true;
    if let Some(row) = rows.top_row(group.user, group.generation) {
        loaded.load(layout, row);
    }
    if loaded.state.top.is_some() {
        for key in GenerationRows::needed(layout, loaded.state.top, &group.hashes) {
            if !loaded.known(key) {
                loaded.fetch(rows, layout, group, key, None);
            }
        }
    }
    loaded
}

/// Folds one (user, generation) group and writes its changed rows; returns what to remember
/// of the generation (its top layer, where its rows were left).
///
/// Rows that exist are updated in place (no other writer of this user can move them while
/// we hold its lock), new rows inserted, a promoted exact row deleted. When the top was
/// only a hint, an item whose segment is full moves up to a layer we have not read: such
/// rows are looked up first and, if another backend wrote them, the fold starts again with
/// them loaded. Putting an item in a lower layer whose segment is not full keeps every
/// bound, since each segment's fill is checked on its own.
fn fold_group(
    rows: &mut FilterRows,
    layout: &GenerationLayout,
    group: &Group,
    known: Option<KnownGeneration>,
) -> KnownGeneration {
    let mut loaded = load_group(rows, layout, group, known.as_ref());
    let state = loop {
        let mut state = if loaded.top_verified {
            std::mem::take(&mut loaded.state)
        } else {
            loaded.state.clone()
        };
        for &h in &group.hashes {
            state.insert(layout, h).or_raise();
        }
        if loaded.top_verified {
            break state;
        }
        let unread: Vec<(i16, u32)> = state
            .dirty
            .iter()
            .copied()
            .filter(|&key| !loaded.known(key))
            .collect();
        let mut found = false;
        for key in unread {
            found |= loaded.fetch(rows, layout, group, key, None);
        }
        if !found {
            break state;
        }
    };
    // Where rows were left: what was remembered, updated by what this fold read and wrote
    // (a fold touches a few of a generation's rows; the others keep their hints).
    let mut tids = known.map(|k| k.tids).unwrap_or_default();
    tids.retain(|&(l, s, _)| !loaded.absent.contains(&(l, s)));
    for &(layer, segment, _, root) in &loaded.stored {
        tids.retain(|&(l, s, _)| (l, s) != (layer, segment));
        tids.push((layer, segment, root));
    }
    for &(layer, segment) in &state.dirty {
        let bits = state.row_bytes(layer, segment);
        let root = match loaded.tid((layer, segment)) {
            Some((tid, root)) => rows.update(
                &tid,
                &root,
                group.user,
                group.generation,
                layer,
                segment,
                &bits,
            ),
            None => rows.insert(group.user, group.generation, layer, segment, &bits),
        };
        tids.retain(|&(l, s, _)| (l, s) != (layer, segment));
        tids.push((layer, segment, root));
    }
    if state.exact_deleted {
        if let Some((tid, _)) = loaded.tid((EXACT_LAYER, 0)) {
            rows.delete(&tid);
        }
        tids.retain(|&(l, _, _)| l != EXACT_LAYER);
    }
    KnownGeneration {
        top: state.top,
        tids,
    }
}

/// Refuses a fold into anything but a registered filter table the current user may write:
/// the fold writes rows directly (see filter_rows), so the executor's checks are ours.
fn check_fold_target(filter_table: pg_sys::Oid, error_rate_per_generation: f64) {
    let key = (filter_table, error_rate_per_generation.to_bits());
    if !FOLD_TARGETS.with(|t| t.borrow().contains(&key)) {
        let conn = Connection::open();
        let plan = conn.plan(
            pg_sys::InvalidOid,
            "fold-target",
            &[pg_sys::OIDOID, pg_sys::FLOAT8OID],
            || {
                "SELECT 1 FROM seen_bloom.tracked
             WHERE filter_table::pg_catalog.oid OPERATOR(pg_catalog.=) $1
               AND error_rate_per_generation OPERATOR(pg_catalog.=) $2"
                    .into()
            },
        );
        let args = [
            pg_sys::Datum::from(filter_table),
            pg_sys::Datum::from(error_rate_per_generation.to_bits()),
        ];
        let registered = conn.execute(plan, &args, true).len() == 1;
        drop(conn);
        if !registered {
            crate::errors::bad_argument(format!(
                "seen_bloom._fold: {} is not the filter table of a tracked table with that error rate",
                qualified_name(filter_table)
            ));
        }
        FOLD_TARGETS.with(|t| t.borrow_mut().insert(key));
    }
    crate::errors::require_table_privilege(
        filter_table,
        pg_sys::ACL_INSERT | pg_sys::ACL_UPDATE | pg_sys::ACL_DELETE,
    );
}

//! The fold: a batch of (user, generation, item hash) written into a filter table, for the
//! tracked table's trigger (see fold_trigger), for backfill and rebuild (`seen_bloom._fold`).
//!
//! Per user of the batch: an advisory lock, so writers of one user take turns (see
//! user_locks); the rows the user's new items fall in, read by primary key; the items folded
//! in by the engine (bloom_core::GenerationRows); the changed rows written back (see
//! filter_writer).

use crate::fold::user_locks::{lock_key, lock_users};
use crate::ops::relayout::{is_moving, user_layout};
use crate::pg::catalog::qualified_name;
use crate::pg::errors::OrRaise;
use crate::pg::item_type::Item;
use crate::pg::spi::Connection;
use crate::pg::v1::v1_function;
use crate::storage::filter_writer::{FilterWriter, StoredRow};
use crate::tracking::caches::{
    fold_target_checked, layout, plan, remember_generation, take_generation, KnownGeneration,
};
use bloom_core::{GenerationLayout, GenerationRows, EXACT_LAYER, MOVED_GENERATION, MOVED_LAYER};
use pgrx::pg_sys;
use std::collections::BTreeMap;

/// How a fold writes the rows it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Layouts 1 and 2: every changed row as a new row version.
    Versions,
    /// Layout 3: a layer row's new bits written over it when the transaction commits (see
    /// in_place); exact rows and new rows as row versions.
    InPlace,
    /// Layout 3 on a logical replication subscriber that also receives the filter table:
    /// the publisher's row versions (exact rows, new rows) arrive as changes, its in-place
    /// writes do not (logical decoding reads only row versions). So only the in-place writes
    /// are made here, into rows that exist; the same impressions against the same rows
    /// place every item as the publisher did.
    InPlaceOnly,
}

impl WriteMode {
    /// The mode of layout `number`; `seen_bloom._fold` takes a negative number for
    /// `InPlaceOnly` (the replica trigger of a subscriber that receives the filter table).
    pub fn of_layout(number: i32) -> WriteMode {
        match number {
            3.. => WriteMode::InPlace,
            ..0 => WriteMode::InPlaceOnly,
            _ => WriteMode::Versions,
        }
    }
}

/// One (user, generation) of a batch.
pub struct Group {
    /// The user, copied into the fold's memory context.
    pub user: pg_sys::Datum,
    /// The user's canonical bytes (lock key, cache key, the check of a row fetched by TID).
    pub user_bytes: Vec<u8>,
    pub generation: i32,
    pub hashes: Vec<u64>,
}

/// A batch grouped by (generation, user's canonical bytes).
pub type Groups = BTreeMap<(i32, Vec<u8>), Group>;

/// Folds a batch of impressions, (user, generation, item hash) each, into `filter_table`,
/// whose users are of type `user_type`, tracked at `error_rate_per_generation` in layout
/// `layout_number` (negative: `WriteMode::InPlaceOnly`). Rows may come in any order and
/// repeat. With `defer` (the tracked table's trigger), layout 3 folds at commit (see
/// commit_fold).
pub fn fold_batch(
    filter_table: pg_sys::Oid,
    error_rate_per_generation: f64,
    layout_number: i32,
    user_type: pg_sys::Oid,
    impressions: impl Iterator<Item = (Item, i32, u64)>,
    defer: bool,
) {
    let fold = |groups| {
        fold_groups(
            filter_table,
            error_rate_per_generation,
            layout_number,
            user_type,
            groups,
        )
    };
    if defer
        && WriteMode::of_layout(layout_number) == WriteMode::InPlace
        && !is_moving(layout_number)
    {
        check_fold_target(filter_table, error_rate_per_generation);
        let rest = crate::fold::commit_fold::defer(
            filter_table,
            error_rate_per_generation,
            layout_number,
            user_type,
            impressions,
        );
        if let Some(groups) = rest {
            fold(groups);
        }
        return;
    }
    // Group the batch by (generation, user), users compared by their canonical bytes; a
    // group keeps its own copy of the user (the caller's datum may not outlive the loop).
    // Generation first: the rows a backfill inserts then lie together by generation, so the
    // current generation's rows, which every later fold writes, fill few pages (after a
    // checkpoint each page's first write logs it whole: 1,000 users' rows scattered over
    // 1,000 pages added 1.5 KB of WAL per impression in the first batches).
    let mut groups = Groups::new();
    for (user, generation, hash) in impressions {
        let bytes = user.canonical_bytes().into_owned();
        groups
            .entry((generation, bytes.clone()))
            .or_insert_with(|| Group {
                user: user.copied_datum(),
                user_bytes: bytes,
                generation,
                hashes: Vec::new(),
            })
            .hashes
            .push(hash);
    }
    fold(groups);
}

/// `fold_batch` of a grouped batch, folded now.
pub fn fold_groups(
    filter_table: pg_sys::Oid,
    error_rate_per_generation: f64,
    layout_number: i32,
    user_type: pg_sys::Oid,
    groups: Groups,
) {
    if groups.is_empty() {
        return;
    }
    check_fold_target(filter_table, error_rate_per_generation);
    let mode = WriteMode::of_layout(layout_number);
    let moving = is_moving(layout_number);
    // Past the transaction's memory, layer rows are written as row versions, which a fold at
    // commit (no user lock, see commit_fold) must not meet: those wait, the tag taken before
    // any user lock of this batch.
    let dirty_bound: usize = groups.values().map(|g| g.hashes.len() + 1).sum();
    let in_place_room = mode == WriteMode::InPlaceOnly
        || mode == WriteMode::InPlace
            && crate::storage::in_place::has_room(
                dirty_bound * bloom_core::SEGMENT_BLOCKS as usize * 32,
            );
    if mode == WriteMode::InPlace && !in_place_room {
        crate::fold::user_locks::exclude_commit_folds(filter_table, false);
    }
    let layout_of = |marked| {
        layout(
            error_rate_per_generation,
            user_layout(layout_number, marked),
        )
    };
    let moved_layout = layout_of(true);
    let unmoved_layout = moving.then(|| layout_of(false));
    // While the table moves from layout 1 (see relayout): each user's, once per batch.
    let mut marked: BTreeMap<Vec<u8>, bool> = BTreeMap::new();

    // Writers of the same user take turns (see lock_users); the rows are read after.
    lock_users(
        filter_table,
        groups.keys().map(|(_, bytes)| lock_key(bytes)).collect(),
    );
    let mut rows = FilterWriter::open(filter_table, user_type);
    for ((_, user_bytes), group) in groups {
        if moving {
            let user_marked = *marked
                .entry(user_bytes)
                .or_insert_with(|| mark_new_user(&mut rows, group.user, mode));
            // Layout 1 wrote row versions only: the publisher's bring them.
            if !user_marked && mode == WriteMode::InPlaceOnly {
                continue;
            }
            let (layout, mode) = match user_marked {
                true => (&*moved_layout, mode),
                false => (unmoved_layout.as_deref().unwrap(), WriteMode::Versions),
            };
            // No hints: what a backend remembers of a generation may be of either layout.
            fold_group(&mut rows, layout, mode, in_place_room, &group, None);
            continue;
        }
        let cache_key = (filter_table, user_bytes, group.generation);
        // Taken out while the group is folded (an error leaves it out: it is only a hint).
        let known = take_generation(&cache_key);
        let top_before = known.as_ref().map(|k| k.top);
        let mut known = fold_group(&mut rows, &moved_layout, mode, in_place_room, &group, known);
        // Layout 3 folds at commit only into rows whose place this backend knows (see
        // commit_fold): when a generation is new to it or has a new top layer, all its rows'
        // places are learnt at once, not a segment per fold (a layer of 5 segments made 8%
        // of a 20-row insert run's groups fold under locks).
        if mode == WriteMode::InPlace && top_before != Some(known.top) {
            for (layer, segment, root) in rows.generation_rows(group.user, group.generation) {
                if !known
                    .tids
                    .iter()
                    .any(|&(l, s, _)| (l, s) == (layer, segment))
                {
                    known.tids.push((layer, segment, root));
                }
            }
        }
        // Rows this mode did not write may not exist: nothing to remember.
        if mode != WriteMode::InPlaceOnly {
            remember_generation(cache_key, known);
        }
    }
}

/// While a table moves from layout 1 (see relayout), whether `user`'s rows are layout 3's:
/// those of a user with a marker row are, and so are those of a user with no row yet, whose
/// marker is written here (a subscriber's `InPlaceOnly` fold leaves it to the publisher's
/// row version). The caller holds the user's lock.
fn mark_new_user(rows: &mut FilterWriter, user: pg_sys::Datum, mode: WriteMode) -> bool {
    if rows.row(user, MOVED_GENERATION, MOVED_LAYER, 0).is_some() {
        return true;
    }
    if rows.has_rows(user) {
        return false;
    }
    if mode != WriteMode::InPlaceOnly {
        rows.insert(user, MOVED_GENERATION, MOVED_LAYER, 0, &[]);
    }
    true
}

// seen_bloom._fold(filter_table regclass, error_rate_per_generation float8, layout int,
//                  users anyarray, generations int4[], hashes int8[]) -> void
// and the form without `layout` that tables tracked before layout 2 generated (layout 1).
v1_function!(seen_bloom__fold, pg_finfo_seen_bloom__fold, |args| {
    if (0..args.nargs()).any(|i| args.is_null(i)) {
        return pg_sys::Datum::from(0usize);
    }
    let (layout_number, arrays) = match args.nargs() {
        6 => (args.int4(2).unwrap(), 3),
        _ => (1, 2),
    };
    let filter_table = args.regclass(0).unwrap();
    let users = args.items(arrays).unwrap();
    let generations = args.items(arrays + 1).unwrap();
    let hashes = args.items(arrays + 2).unwrap();
    if users.len != generations.len || users.len != hashes.len {
        crate::pg::errors::bad_argument("seen_bloom._fold: arrays of different lengths".into());
    }
    let impressions = users
        .items()
        .zip(generations.items())
        .zip(hashes.items())
        .filter_map(|((user, generation), hash)| {
            Some((user?, generation?.as_i64()? as i32, hash?.as_i64()? as u64))
        });
    fold_batch(
        filter_table,
        args.float8(1).unwrap(),
        layout_number,
        users.element_type,
        impressions,
        false,
    );
    pg_sys::Datum::from(0usize)
});

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
            .load_owned(layout, row.layer, row.segment, row.bits)
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
        rows: &mut FilterWriter,
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
    rows: &mut FilterWriter,
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
    // A compacted row (seen_bloom.compact) sorts below every layered row: the top only
    // when the generation has no layered rows, which it then starts afresh.
    // A relayout's marker row (MOVED_LAYER), in a generation of its own, sorts below both.
    if let Some(row) = rows
        .top_row(group.user, group.generation)
        .filter(|row| row.layer >= EXACT_LAYER)
    {
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
/// rows are looked up first and, if another backend wrote them, the fold starts again from
/// the generation's highest row. Putting an item in a lower layer whose segment is not full
/// keeps every bound, since each segment's fill is checked on its own.
fn fold_group(
    rows: &mut FilterWriter,
    layout: &GenerationLayout,
    mode: WriteMode,
    in_place_room: bool,
    group: &Group,
    known: Option<KnownGeneration>,
) -> KnownGeneration {
    let fold = |loaded: &mut LoadedGroup| {
        let mut state = std::mem::take(&mut loaded.state);
        for &h in &group.hashes {
            state.insert(layout, h).or_raise();
        }
        state
    };
    let mut loaded = load_group(rows, layout, group, known.as_ref());
    let mut state = fold(&mut loaded);
    if !loaded.top_verified {
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
        // Rare (another backend started a layer since): the generation is loaded again
        // from its highest row and folded anew, not from a copy of every row kept for it.
        if found {
            loaded = load_group(rows, layout, group, None);
            state = fold(&mut loaded);
        }
    }
    // Where rows were left: what was remembered, updated by what this fold read and wrote
    // (a fold touches a few of a generation's rows; the others keep their hints).
    let mut tids = known.map(|k| k.tids).unwrap_or_default();
    tids.retain(|&(l, s, _)| !loaded.absent.contains(&(l, s)));
    for &(layer, segment, _, root) in &loaded.stored {
        tids.retain(|&(l, s, _)| (l, s) != (layer, segment));
        tids.push((layer, segment, root));
    }
    for (layer, segment) in std::mem::take(&mut state.dirty) {
        let bits = state.take_row_bytes(layer, segment);
        let stored = loaded.tid((layer, segment));
        // A row short enough for a one-byte varlena header (a layer's last segment of at
        // most 3 blocks) cannot be written in place: it is written as a new version.
        let in_place = mode != WriteMode::Versions
            && layer != EXACT_LAYER
            && bits.len() > 122
            && stored.is_some()
            && in_place_room;
        let root = match stored {
            Some((tid, root)) if in_place => {
                crate::storage::in_place::hold(rows.place(&tid), bits);
                root
            }
            // The publisher's row version brings it (see WriteMode::InPlaceOnly).
            _ if mode == WriteMode::InPlaceOnly => continue,
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
    if state.exact_deleted && mode != WriteMode::InPlaceOnly {
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

/// Refuses a fold into anything but a registered filter table whose owner the current user
/// acts for:
/// the fold writes rows directly (see filter_writer), so the executor's checks are ours. On
/// Citus a filter table's shard counts as registered (a worker keeps no row of its own), and
/// the distributed table itself never does: its relation on a node holds no rows.
fn check_fold_target(filter_table: pg_sys::Oid, error_rate_per_generation: f64) {
    fold_target_checked(filter_table, error_rate_per_generation, || {
        let conn = Connection::open();
        let args = [
            pg_sys::Datum::from(filter_table),
            pg_sys::Datum::from(error_rate_per_generation.to_bits()),
        ];
        let registered = |purpose, sql: &'static str| {
            let plan = plan(
                &conn,
                pg_sys::InvalidOid,
                purpose,
                &[pg_sys::OIDOID, pg_sys::FLOAT8OID],
                || sql.into(),
            );
            conn.execute(plan, &args, true).len() == 1
        };
        let mut ok = registered(
            "fold-target",
            "SELECT 1 FROM seen_bloom.tracked
              WHERE filter_table::pg_catalog.oid OPERATOR(pg_catalog.=) $1
                AND error_rate_per_generation OPERATOR(pg_catalog.=) $2",
        );
        let citus = crate::pg::citus::installed();
        if !ok && citus {
            ok = registered(
                "fold-target-citus",
                "SELECT 1 WHERE seen_bloom._citus_filter_registered($1, $2)",
            );
        }
        drop(conn);
        if !ok || citus && crate::pg::citus::is_distributed(filter_table) {
            crate::pg::errors::bad_argument(format!(
                "seen_bloom._fold: {} is not the filter table of a tracked table with that error rate (on Citus: a shard of one)",
                qualified_name(filter_table)
            ));
        }
    });
    // The fold writes rows directly, past rules, triggers and policies: only as the filter
    // table's owner (the tracked table's, see owner), never with a grant of INSERT.
    crate::pg::owner::require_owner(filter_table);
}

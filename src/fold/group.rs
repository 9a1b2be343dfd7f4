//! The fold of one (user, generation) group: its rows loaded (by TID from what this backend
//! remembers, else by key), the items inserted by the engine (bloom_core::GenerationRows),
//! the changed rows written (filter_writer, or held for an in-place write, see
//! storage::in_place).

use crate::pg::errors::OrRaise;
use crate::storage::filter_writer::{FilterWriter, StoredRow};
use crate::tracking::caches::KnownGeneration;
use crate::tracking::layout::WriteMode;
use bloom_core::{GenerationLayout, GenerationRows, EXACT_LAYER};
use pgrx::pg_sys;
use std::collections::BTreeMap;

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
/// of the generation (its top layer, where its rows were left) and the items the per-user cap
/// refused.
///
/// Rows that exist are updated in place (no other writer of this user can move them while
/// we hold its lock), new rows inserted, a promoted exact row deleted. When the top was
/// only a hint, an item whose segment is full moves up to a layer we have not read: such
/// rows are looked up first and, if another backend wrote them, the fold starts again from
/// the generation's highest row. Putting an item in a lower layer whose segment is not full
/// keeps every bound, since each segment's fill is checked on its own.
pub fn fold_group(
    rows: &mut FilterWriter,
    layout: &GenerationLayout,
    mode: WriteMode,
    in_place_room: bool,
    group: &Group,
    known: Option<KnownGeneration>,
) -> (KnownGeneration, u64) {
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
        let Some(root) = write_row(
            rows,
            mode,
            in_place_room,
            group,
            (layer, segment),
            bits,
            stored,
        ) else {
            continue;
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
    let known = KnownGeneration {
        top: state.top,
        tids,
    };
    (known, state.capped)
}

/// Writes one changed row of a group: held for an in-place write, or as a new version of
/// the row `stored` (the version read and its chain's start), or inserted; returns where the
/// row's chain starts, None for a row this mode leaves to the publisher.
fn write_row(
    rows: &mut FilterWriter,
    mode: WriteMode,
    in_place_room: bool,
    group: &Group,
    (layer, segment): (i16, u32),
    bits: Vec<u8>,
    stored: Option<(pg_sys::ItemPointerData, pg_sys::ItemPointerData)>,
) -> Option<pg_sys::ItemPointerData> {
    // A row short enough for a one-byte varlena header (a layer's last segment of at most 3
    // blocks) cannot be written in place: it is written as a new version.
    let in_place = mode != WriteMode::Versions
        && layer != EXACT_LAYER
        && bits.len() > 122
        && stored.is_some()
        && in_place_room;
    Some(match stored {
        Some((tid, root)) if in_place => {
            crate::storage::in_place::hold(rows.place(&tid), bits);
            root
        }
        // The publisher's row version brings it (see WriteMode::InPlaceOnly).
        _ if mode == WriteMode::InPlaceOnly => return None,
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
    })
}

//! Impression tracking: folding a batch of impressions into the per-user filter rows (called
//! once per INSERT statement by the tracked table's trigger) and the read path
//! (`seen_bloom.unseen`, `seen_bloom.has_seen`). The SQL side (track, untrack, expire,
//! rebuild, stats, the per-table triggers) is in sql/tracking.sql.
//!
//! Every SPI statement names its operators and functions with their schema, so a caller's
//! search_path cannot redirect them.

use crate::errors::OrRaise;
use crate::filter_rows::{FilterRows, StoredRow};
use crate::items::{keep_unseen, ItemArray, ItemType};
use crate::spi::Connection;
use crate::v1::{arg, return_null, v1_function};
use bloom_core::{hash_bytes, GenerationLayout, GenerationRows, WindowView, EXACT_LAYER};
use pgrx::{ereport, pg_sys, PgSqlErrorCode};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

/// What the read path needs to know of a tracked table.
struct TrackedConfig {
    filter_table: pg_sys::Oid,
    filter_table_name: String,
    user_type: pg_sys::Oid,
    layout: Rc<GenerationLayout>,
    window_seconds: f64,
    generation_seconds: f64,
}

thread_local! {
    static CONFIGS: RefCell<HashMap<pg_sys::Oid, Rc<TrackedConfig>>> = RefCell::new(HashMap::new());
    static LAYOUTS: RefCell<HashMap<u64, Rc<GenerationLayout>>> = RefCell::new(HashMap::new());
    /// Top layer of (filter table, user's canonical bytes, generation) after this backend's
    /// last fold of it (None: an exact row only): a hint that saves an index lookup.
    static KNOWN_TOPS: RefCell<HashMap<(pg_sys::Oid, Vec<u8>, i32), Option<usize>>> = RefCell::new(HashMap::new());
    /// (filter table, per-generation error rate) pairs checked by check_fold_target.
    static FOLD_TARGETS: RefCell<HashSet<(pg_sys::Oid, u64)>> = RefCell::new(HashSet::new());
}

/// Drops cached configurations of `relid` (impressions or filter table; all for InvalidOid).
pub fn forget_config(relid: pg_sys::Oid) {
    FOLD_TARGETS.with(|t| {
        t.borrow_mut()
            .retain(|&(table, _)| relid != pg_sys::InvalidOid && table != relid)
    });
    CONFIGS.with(|c| {
        c.borrow_mut().retain(|impressions, config| {
            relid != pg_sys::InvalidOid && *impressions != relid && config.filter_table != relid
        })
    });
}

fn layout_for(error_rate_per_generation: f64) -> Rc<GenerationLayout> {
    LAYOUTS.with(|l| {
        l.borrow_mut()
            .entry(error_rate_per_generation.to_bits())
            .or_insert_with(|| Rc::new(GenerationLayout::new(error_rate_per_generation).or_raise()))
            .clone()
    })
}

/// `schema.table`, quoted, for a relation.
fn qualified_name(relid: pg_sys::Oid) -> String {
    unsafe {
        let name = pg_sys::get_rel_name(relid);
        if name.is_null() {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
                format!("relation with OID {} does not exist", relid.to_u32())
            );
        }
        let schema = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid));
        let quoted = pg_sys::quote_qualified_identifier(schema, name);
        std::ffi::CStr::from_ptr(quoted)
            .to_string_lossy()
            .into_owned()
    }
}

fn config(conn: &Connection, impressions: pg_sys::Oid) -> Rc<TrackedConfig> {
    if let Some(c) = CONFIGS.with(|c| c.borrow().get(&impressions).cloned()) {
        return c;
    }
    let plan = conn.plan(pg_sys::InvalidOid, "config", &[pg_sys::OIDOID], || {
        "SELECT filter_table::pg_catalog.oid, user_type::pg_catalog.oid, error_rate_per_generation,
                pg_catalog.date_part('epoch', \"window\"), generation_seconds::pg_catalog.float8
         FROM seen_bloom.tracked WHERE impressions::pg_catalog.oid OPERATOR(pg_catalog.=) $1"
            .into()
    });
    let rows = conn.execute(plan, &[pg_sys::Datum::from(impressions)], true);
    if rows.len() == 0 {
        let name = qualified_name(impressions);
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("table {name} is not tracked by seen_bloom; call seen_bloom.track('{name}', ...) first")
        );
    }
    let float = |col| f64::from_bits(rows.datum(0, col).unwrap().value() as u64);
    let filter_table = pg_sys::Oid::from(rows.datum(0, 1).unwrap().value() as u32);
    let config = Rc::new(TrackedConfig {
        filter_table,
        filter_table_name: qualified_name(filter_table),
        user_type: pg_sys::Oid::from(rows.datum(0, 2).unwrap().value() as u32),
        layout: layout_for(float(3)),
        window_seconds: float(4),
        generation_seconds: float(5),
    });
    CONFIGS.with(|c| c.borrow_mut().insert(impressions, config.clone()));
    config
}

/// Seconds since the Unix epoch at the start of the transaction (what now() returns).
fn now_epoch_seconds() -> f64 {
    let since_2000 = unsafe { pg_sys::GetCurrentTransactionStartTimestamp() } as f64 / 1e6;
    since_2000 + 946_684_800.0
}

/// For each hash, whether the user has (probably) seen it within the live window.
///
/// # Safety
/// `user` must be a datum of the tracked table's user type.
unsafe fn seen_in_window(
    impressions: pg_sys::Oid,
    user: pg_sys::Datum,
    hashes: &[Option<u64>],
) -> Vec<bool> {
    let conn = Connection::open();
    let config = config(&conn, impressions);
    let plan = conn.plan(
        config.filter_table,
        "read",
        &[config.user_type, pg_sys::INT4OID],
        || {
            format!(
                "SELECT generation, layer, segment, bits FROM {}
             WHERE user_key OPERATOR(pg_catalog.=) $1 AND generation OPERATOR(pg_catalog.>=) $2",
                config.filter_table_name
            )
        },
    );
    let oldest_live =
        ((now_epoch_seconds() - config.window_seconds) / config.generation_seconds).floor() as i32;
    let rows = conn.execute(plan, &[user, pg_sys::Datum::from(oldest_live)], true);
    let mut view = WindowView::default();
    for r in 0..rows.len() {
        let field = |c| rows.datum(r, c).unwrap();
        let bits = unsafe { crate::filter_arg::varlena_bytes(field(4)) };
        view.add_row(
            &config.layout,
            field(1).value() as i32,
            field(2).value() as i16,
            field(3).value() as u32,
            bits,
        )
        .or_raise();
    }
    view.seal(&config.layout);
    hashes
        .iter()
        .map(|h| h.is_some_and(|h| view.contains(&config.layout, h)))
        .collect()
}

// seen_bloom.unseen(impressions regclass, user, candidates anyarray) -> anyarray
v1_function!(tracked_unseen, pg_finfo_tracked_unseen, |fcinfo| {
    let (Some(impressions), Some(candidates)) = (arg(fcinfo, 0), arg(fcinfo, 2)) else {
        return return_null(fcinfo);
    };
    let candidates = ItemArray::from_datum(candidates, "seen_bloom.unseen");
    let hashes: Vec<Option<u64>> = candidates
        .elements()
        .map(|d| d.map(|d| candidates.item_type.hash(d)))
        .collect();
    let seen = match arg(fcinfo, 1) {
        // An anonymous user has seen nothing.
        None => vec![false; hashes.len()],
        Some(user) => seen_in_window(pg_sys::Oid::from(impressions.value() as u32), user, &hashes),
    };
    keep_unseen(&candidates, &hashes, |i| seen[i])
});

// seen_bloom.has_seen(impressions regclass, user, item anyelement) -> boolean
v1_function!(tracked_has_seen, pg_finfo_tracked_has_seen, |fcinfo| {
    let item_type = ItemType::require(crate::v1::arg_type(fcinfo, 2), "seen_bloom.has_seen");
    let hash = item_type.hash(arg(fcinfo, 2).unwrap());
    let impressions = pg_sys::Oid::from(arg(fcinfo, 0).unwrap().value() as u32);
    let seen = seen_in_window(impressions, arg(fcinfo, 1).unwrap(), &[Some(hash)]);
    pg_sys::Datum::from(seen[0])
});

unsafe extern "C-unwind" {
    /// The C function behind pg_advisory_xact_lock(int4, int4), called without SPI.
    #[link_name = "pg_advisory_xact_lock_int4"]
    fn advisory_xact_lock_int4(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum;
}

/// One (user, generation) of a batch.
struct Group {
    user: pg_sys::Datum,
    generation: i32,
    hashes: Vec<u64>,
}

/// The advisory lock key of a user's filter rows: writers of one user take turns (the
/// trigger's fold and rebuild alike). Two users may share a key; they then just take turns.
fn lock_key(user_bytes: &[u8]) -> i32 {
    hash_bytes(user_bytes) as i32
}

/// Takes the transaction-level advisory locks of `keys` on `filter_table`, in sorted order,
/// so that any two lockers wait for each other instead of deadlocking.
fn lock_users(filter_table: pg_sys::Oid, mut keys: Vec<i32>) {
    keys.sort_unstable();
    keys.dedup();
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

// seen_bloom._fold(filter_table regclass, error_rate_per_generation float8,
//                  users anyarray, generations int4[], hashes int8[]) -> void
v1_function!(tracked_fold, pg_finfo_tracked_fold, |fcinfo| {
    let args: Option<Vec<_>> = (0..5).map(|i| arg(fcinfo, i)).collect();
    let Some(args) = args else {
        return pg_sys::Datum::from(0usize);
    };
    let filter_table = pg_sys::Oid::from(args[0].value() as u32);
    let layout = layout_for(f64::from_bits(args[1].value() as u64));
    let users = ItemArray::from_datum(args[2], "seen_bloom._fold");
    let generations = ItemArray::from_datum(args[3], "seen_bloom._fold");
    let hashes = ItemArray::from_datum(args[4], "seen_bloom._fold");
    if users.len != generations.len || users.len != hashes.len {
        crate::errors::bad_argument("seen_bloom._fold: arrays of different lengths".into());
    }

    // Group the batch by (user, generation), users compared by their canonical bytes.
    let mut groups: BTreeMap<(Vec<u8>, i32), Group> = BTreeMap::new();
    let rows = users
        .elements()
        .zip(generations.elements())
        .zip(hashes.elements());
    for ((user, generation), hash) in rows {
        let (Some(user), Some(generation), Some(hash)) = (user, generation, hash) else {
            continue;
        };
        let generation = generation.value() as i32;
        let key = (
            users.item_type.canonical_bytes(user).into_owned(),
            generation,
        );
        groups
            .entry(key)
            .or_insert_with(|| Group {
                user,
                generation,
                hashes: Vec::new(),
            })
            .hashes
            .push(hash.value() as u64);
    }
    if groups.is_empty() {
        return pg_sys::Datum::from(0usize);
    }
    let groups: Vec<(Vec<u8>, Group)> = groups
        .into_iter()
        .map(|((bytes, _), group)| (bytes, group))
        .collect();
    check_fold_target(filter_table, layout.error_rate());

    // Writers of the same user take turns (see lock_users); the rows are read after.
    lock_users(
        filter_table,
        groups.iter().map(|(bytes, _)| lock_key(bytes)).collect(),
    );
    let mut rows = FilterRows::open(filter_table, users.element_type);
    for (user_bytes, group) in &groups {
        let cache_key = (filter_table, user_bytes.clone(), group.generation);
        let cached = KNOWN_TOPS.with(|t| t.borrow().get(&cache_key).copied());
        let top = fold_group(&mut rows, &layout, group, cached);
        KNOWN_TOPS.with(|t| {
            let mut tops = t.borrow_mut();
            if tops.len() >= KNOWN_TOPS_LIMIT {
                tops.clear();
            }
            tops.insert(cache_key, top);
        });
    }
    drop(rows);
    pg_sys::Datum::from(0usize)
});

/// Most (filter table, user, generation) tops a backend remembers (about 100 bytes each).
const KNOWN_TOPS_LIMIT: usize = 1 << 16;

/// The rows of one group as loaded: the generation's state and where its rows are.
struct LoadedGroup {
    state: GenerationRows,
    /// Stored rows: (layer, segment, where).
    stored: Vec<(i16, u32, pg_sys::ItemPointerData)>,
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
        self.stored.push((row.layer, row.segment, row.tid));
    }

    fn known(&self, key: (i16, u32)) -> bool {
        self.absent.contains(&key) || self.stored.iter().any(|&(l, s, _)| (l, s) == key)
    }

    fn tid(&self, key: (i16, u32)) -> Option<pg_sys::ItemPointerData> {
        self.stored
            .iter()
            .find(|&&(l, s, _)| (l, s) == key)
            .map(|&(_, _, tid)| tid)
    }

    /// Looks up `key`, loading the row if it exists; true if it did.
    fn fetch(
        &mut self,
        rows: &mut FilterRows,
        layout: &GenerationLayout,
        group: &Group,
        key: (i16, u32),
    ) -> bool {
        match rows.row(group.user, group.generation, key.0, key.1) {
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

/// Loads the rows a group's items fall in. With the generation's top layer remembered from
/// an earlier fold in this backend, that is one index lookup per row; the top is then only
/// a hint (another backend may have started a layer above it since, see fold_group).
/// Otherwise the generation's highest row, (layer, segment) descending, tells its top (the
/// exact row alone: no layers yet; none: an empty generation) and is the row needed whenever
/// the top layer is one segment; other top-layer segments are looked up by key.
fn load_group(
    rows: &mut FilterRows,
    layout: &GenerationLayout,
    group: &Group,
    known_top: Option<Option<usize>>,
) -> LoadedGroup {
    if let Some(top) = known_top {
        let mut loaded = LoadedGroup::new();
        let needed = GenerationRows::needed(layout, top, &group.hashes);
        let all_found = needed
            .iter()
            .all(|&key| loaded.fetch(rows, layout, group, key));
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
                loaded.fetch(rows, layout, group, key);
            }
        }
    }
    loaded
}

/// Folds one (user, generation) group and writes its changed rows; returns the top layer.
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
    known_top: Option<Option<usize>>,
) -> Option<usize> {
    let mut loaded = load_group(rows, layout, group, known_top);
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
            found |= loaded.fetch(rows, layout, group, key);
        }
        if !found {
            break state;
        }
    };
    for &(layer, segment) in &state.dirty {
        let bits = state.row_bytes(layer, segment);
        match loaded.tid((layer, segment)) {
            Some(tid) => rows.update(&tid, group.user, group.generation, layer, segment, &bits),
            None => rows.insert(group.user, group.generation, layer, segment, &bits),
        }
    }
    if state.exact_deleted {
        if let Some(tid) = loaded.tid((EXACT_LAYER, 0)) {
            rows.delete(&tid);
        }
    }
    state.top
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
    unsafe {
        let mode =
            (pg_sys::ACL_INSERT | pg_sys::ACL_UPDATE | pg_sys::ACL_DELETE) as pg_sys::AclMode;
        let result = pg_sys::pg_class_aclcheck(filter_table, pg_sys::GetUserId(), mode);
        if result != pg_sys::AclResult::ACLCHECK_OK {
            pg_sys::aclcheck_error(
                result,
                pg_sys::ObjectType::OBJECT_TABLE,
                pg_sys::get_rel_name(filter_table),
            );
        }
    }
}

// seen_bloom.item_hash(item): the 64-bit hash an item is stored under, as a bigint.
unsafe fn item_hash(fcinfo: pg_sys::FunctionCallInfo, item_type: ItemType) -> pg_sys::Datum {
    unsafe { pg_sys::Datum::from(item_type.hash(arg(fcinfo, 0).unwrap()) as i64) }
}
v1_function!(item_hash_int8, pg_finfo_item_hash_int8, |fcinfo| {
    item_hash(fcinfo, ItemType::Int8)
});
v1_function!(item_hash_bytes, pg_finfo_item_hash_bytes, |fcinfo| {
    item_hash(fcinfo, ItemType::Bytes)
});
v1_function!(item_hash_uuid, pg_finfo_item_hash_uuid, |fcinfo| {
    item_hash(fcinfo, ItemType::Uuid)
});

// seen_bloom._check_predicate(predicate text): refuses anything but one expression, so a
// `where` argument cannot smuggle a second statement into the generated trigger.
v1_function!(check_predicate, pg_finfo_check_predicate, |fcinfo| {
    let text = crate::filter_arg::varlena_bytes(arg(fcinfo, 0).unwrap());
    let predicate = String::from_utf8_lossy(text);
    let probe =
        std::ffi::CString::new(format!("SELECT 1 WHERE ({predicate})")).unwrap_or_else(|_| {
            crate::errors::bad_argument("the where predicate contains a NUL byte".into())
        });
    // PostgreSQL 13's raw_parser has no mode argument (14 added RawParseMode).
    #[cfg(feature = "pg13")]
    let statements = pg_sys::raw_parser(probe.as_ptr());
    #[cfg(not(feature = "pg13"))]
    let statements = pg_sys::raw_parser(probe.as_ptr(), pg_sys::RawParseMode::RAW_PARSE_DEFAULT);
    let count = if statements.is_null() {
        0
    } else {
        (*statements).length
    };
    let balanced = predicate.matches('(').count() == predicate.matches(')').count();
    if count != 1 || !balanced || predicate.contains(';') {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_SYNTAX_ERROR,
            format!("the where predicate must be a single boolean expression, got: {predicate}")
        );
    }
    pg_sys::Datum::from(true)
});

// seen_bloom._layer_blocks(error_rate_per_generation float8, layer int) -> bigint
v1_function!(layer_blocks, pg_finfo_layer_blocks, |fcinfo| {
    let layout = layout_for(f64::from_bits(arg(fcinfo, 0).unwrap().value() as u64));
    let layer =
        (arg(fcinfo, 1).unwrap().value() as i32).clamp(0, bloom_core::MAX_LAYERS as i32 - 1);
    pg_sys::Datum::from(layout.layer_blocks(layer as usize) as i64)
});

// seen_bloom._segment_fpr(bits bytea) -> float8: the chance a fresh item finds its bits set,
// averaged over the segment's blocks (0 for an exact row, whose false positives are nil).
v1_function!(segment_fpr, pg_finfo_segment_fpr, |fcinfo| {
    let bits = crate::filter_arg::varlena_bytes(arg(fcinfo, 0).unwrap());
    pg_sys::Datum::from(bloom_core::blocks_fpr(bits).to_bits())
});

// seen_bloom._segment_fill(bits bytea) -> float8: fraction of bits set.
v1_function!(segment_fill, pg_finfo_segment_fill, |fcinfo| {
    let bits = crate::filter_arg::varlena_bytes(arg(fcinfo, 0).unwrap());
    pg_sys::Datum::from(bloom_core::blocks_fill(bits).to_bits())
});

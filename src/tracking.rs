//! Impression tracking: folding a batch of impressions into the per-user filter rows (called
//! once per INSERT statement by the tracked table's trigger) and the read path
//! (`seen_bloom.unseen`, `seen_bloom.has_seen`). The SQL side (track, untrack, expire,
//! rebuild, stats, the per-table triggers) is in sql/tracking.sql.
//!
//! Every SPI statement names its operators and functions with their schema, so a caller's
//! search_path cannot redirect them.

use crate::errors::OrRaise;
use crate::filter_rows::{FilterRows, UserRows};
use crate::heap_prefetch::LinePrefetcher;
use crate::items::{keep_unseen, type_name, CandidateHashes, ItemArray, ItemFamily, ItemType};
use crate::spi::Connection;
use crate::v1::{arg, return_null, v1_function};
use bloom_core::{FirstLayer, GenerationLayout, WindowView};
use pgrx::{ereport, pg_sys, PgSqlErrorCode};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// What the read path and the trigger need to know of a tracked table.
pub struct TrackedConfig {
    pub filter_table: pg_sys::Oid,
    /// Who owns the filter table: the trigger writes it as this role.
    pub filter_owner: pg_sys::Oid,
    pub user_type: pg_sys::Oid,
    pub item_type: pg_sys::Oid,
    /// The family of `item_type`: candidates of another family are refused.
    pub item_family: ItemFamily,
    /// Attribute numbers in the impressions table (time: None when now() is the time).
    pub user_attnum: i16,
    pub item_attnum: i16,
    pub time_attnum: Option<i16>,
    /// Whether a `where` predicate filters impressions (the SQL trigger evaluates it).
    pub has_predicate: bool,
    pub window: pg_sys::Interval,
    pub layout: Rc<GenerationLayout>,
    window_seconds: f64,
    pub generation_seconds: f64,
}

thread_local! {
    static CONFIGS: RefCell<HashMap<pg_sys::Oid, Rc<TrackedConfig>>> = RefCell::new(HashMap::new());
    static LAYOUTS: RefCell<HashMap<(u64, i32), Rc<GenerationLayout>>> = RefCell::new(HashMap::new());
}

/// Drops cached configurations of `relid` (impressions or filter table; all for InvalidOid).
pub fn forget_config(relid: pg_sys::Oid) {
    crate::fold::forget(relid);
    crate::filter_rows::forget_checked_shape(relid);
    CONFIGS.with(|c| {
        c.borrow_mut().retain(|impressions, config| {
            relid != pg_sys::InvalidOid && *impressions != relid && config.filter_table != relid
        })
    });
}

/// The generation layout of a tracked table: its per-generation error budget and its layout
/// number (`seen_bloom.tracked.layout`; 22023 for a number this build does not know).
pub fn layout_for(error_rate_per_generation: f64, layout_number: i32) -> Rc<GenerationLayout> {
    let key = (error_rate_per_generation.to_bits(), layout_number);
    if let Some(layout) = LAYOUTS.with(|l| l.borrow().get(&key).cloned()) {
        return layout;
    }
    let Some(first) = FirstLayer::from_number(layout_number) else {
        crate::errors::bad_argument(format!(
            "unknown tracking layout {layout_number} (this build knows layouts 1 and 2)"
        ));
    };
    let layout = Rc::new(GenerationLayout::new(error_rate_per_generation, first).or_raise());
    LAYOUTS.with(|l| l.borrow_mut().insert(key, layout.clone()));
    layout
}

/// `schema.table`, quoted, for a relation.
pub fn qualified_name(relid: pg_sys::Oid) -> String {
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

/// The tracking configuration of `impressions` (a tracked table, or a partition of one, whose
/// columns are found by name), cached per backend (SPI only on a miss). The
/// layout is read by name from the row as JSON: a database not yet updated from 0.1.0 or 0.2.0
/// (this library serves it too) has no layout column, and its tables are all layout 1.
pub fn config(impressions: pg_sys::Oid) -> Rc<TrackedConfig> {
    if let Some(c) = CONFIGS.with(|c| c.borrow().get(&impressions).cloned()) {
        return c;
    }
    let conn = Connection::open();
    let plan = conn.plan(pg_sys::InvalidOid, "config", &[pg_sys::OIDOID], || {
        "SELECT t.filter_table::pg_catalog.oid, t.user_type::pg_catalog.oid, t.error_rate_per_generation,
                pg_catalog.date_part('epoch', t.\"window\"), t.generation_seconds::pg_catalog.float8,
                t.item_type::pg_catalog.oid, t.user_column::pg_catalog.text, t.item_column::pg_catalog.text,
                t.time_column::pg_catalog.text, t.\"where\" IS NOT NULL, t.\"window\", c.relowner,
                COALESCE((pg_catalog.to_jsonb(t) OPERATOR(pg_catalog.->>) 'layout')::pg_catalog.int4, 1)
         FROM seen_bloom.tracked t JOIN pg_catalog.pg_class c
           ON c.oid OPERATOR(pg_catalog.=) t.filter_table::pg_catalog.oid
         WHERE t.impressions::pg_catalog.oid OPERATOR(pg_catalog.=) $1
            OR t.impressions::pg_catalog.oid OPERATOR(pg_catalog.=) ANY (
               SELECT a.relid::pg_catalog.oid FROM pg_catalog.pg_partition_ancestors($1) a)"
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
    let oid = |col| pg_sys::Oid::from(rows.datum(0, col).unwrap().value() as u32);
    // A column by its name (the DDL event trigger keeps the names current through renames,
    // and refuses dropping or retyping a tracked column); one that is gone or of another type
    // is an error, never a silent skip of every row or a datum read as the wrong type.
    let attnum = |name_col, type_col: Option<i32>| {
        let name = rows.datum(0, name_col)?;
        // SAFETY: columns 7 to 9 of the statement above are text (`::pg_catalog.text`).
        let column = unsafe { crate::filter_arg::varlena_bytes(name) };
        let c_name = std::ffi::CString::new(column).expect("column names have no NUL bytes");
        // SAFETY: syscache lookups by relation OID and a NUL-terminated name; a missing
        // column gives InvalidAttrNumber, and its type InvalidOid.
        let (attnum, actual_type) = unsafe {
            let attnum = pg_sys::get_attnum(impressions, c_name.as_ptr());
            (attnum, pg_sys::get_atttype(impressions, attnum))
        };
        let recorded_type = match type_col {
            Some(col) => oid(col),
            None => pg_sys::TIMESTAMPTZOID,
        };
        // The item column may be int4 or int8 whatever was recorded (integers hash alike).
        let integer = [pg_sys::INT4OID, pg_sys::INT8OID];
        let same_family = type_col == Some(6)
            && integer.contains(&actual_type)
            && integer.contains(&recorded_type);
        if attnum <= 0 || (actual_type != recorded_type && !same_family) {
            crate::errors::raise_with_hint(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "the tracked column \"{}\" of {} no longer exists or changed its type",
                    String::from_utf8_lossy(column),
                    qualified_name(impressions)
                ),
                "Call seen_bloom.untrack and seen_bloom.track again with the table's columns."
                    .into(),
            );
        }
        Some((attnum, actual_type))
    };
    let (user_attnum, _) = attnum(7, Some(2)).expect("the user column is NOT NULL");
    // The item column's own type, which the trigger hashes its datums as (an int4 column
    // retyped to bigint stays tracked: integers hash alike).
    let (item_attnum, item_type) = attnum(8, Some(6)).expect("the item column is NOT NULL");
    let config = Rc::new(TrackedConfig {
        filter_table,
        filter_owner: oid(12),
        user_type: oid(2),
        item_type,
        item_family: ItemType::require(item_type, "seen_bloom tracking").family(),
        user_attnum,
        item_attnum,
        time_attnum: attnum(9, None).map(|(attnum, _)| attnum),
        has_predicate: rows.datum(0, 10).unwrap().value() != 0,
        window: unsafe {
            *rows
                .datum(0, 11)
                .unwrap()
                .cast_mut_ptr::<pg_sys::Interval>()
        },
        layout: layout_for(float(3), rows.datum(0, 13).unwrap().value() as i32),
        window_seconds: float(4),
        generation_seconds: float(5),
    });
    CONFIGS.with(|c| c.borrow_mut().insert(impressions, config.clone()));
    config
}

impl TrackedConfig {
    /// Raises 42804 unless argument `n` of the call has the type of the tracked user column.
    /// The read path builds its scan key from the datum as that type: a bigint read as a
    /// text pointer crashed the backend, and a text '1' for a bigint column matched nothing.
    ///
    /// # Safety
    /// `fcinfo` must be the live call's.
    pub unsafe fn require_user_argument(
        &self,
        fcinfo: pg_sys::FunctionCallInfo,
        n: usize,
        impressions: pg_sys::Oid,
        function: &str,
    ) {
        // SAFETY: the caller's fcinfo is the live call's (this fn's contract).
        let given = unsafe { crate::v1::arg_type(fcinfo, n) };
        if given != self.user_type {
            let expected = type_name(self.user_type);
            crate::errors::raise_with_hint(
                PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                format!(
                    "{function}: the user argument is {}, but the users of {} are {expected}",
                    type_name(given),
                    qualified_name(impressions)
                ),
                format!("Cast the user to {expected}, e.g. $2::{expected}."),
            );
        }
    }

    /// Raises 42804 unless items of `given` hash like the tracked item column's (integer
    /// widths are one family; text, integers and uuid are three).
    pub fn require_item_family(
        &self,
        given: ItemType,
        given_oid: pg_sys::Oid,
        impressions: pg_sys::Oid,
        function: &str,
    ) {
        if given.family() != self.item_family {
            let expected = self.item_family.cast_to();
            crate::errors::raise_with_hint(
                PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
                format!(
                    "{function}: the items are {}, but the items of {} are {}; they would never match",
                    type_name(given_oid),
                    qualified_name(impressions),
                    type_name(self.item_type)
                ),
                format!("Cast the items to {expected} (an array to {expected}[])."),
            );
        }
    }
}

/// Seconds since the Unix epoch at the start of the transaction (what now() returns).
fn now_epoch_seconds() -> f64 {
    let since_2000 = unsafe { pg_sys::GetCurrentTransactionStartTimestamp() } as f64 / 1e6;
    since_2000 + 946_684_800.0
}

/// The user's filter rows in the live window, in pinned pages.
///
/// # Safety
/// `user` must be a datum of the tracked table's user type.
unsafe fn live_rows(config: &TrackedConfig, user: pg_sys::Datum) -> UserRows {
    let oldest_live =
        ((now_epoch_seconds() - config.window_seconds) / config.generation_seconds).floor() as i32;
    FilterRows::open_for_read(config.filter_table, config.user_type)
        .user_rows_from(user, oldest_live)
}

/// For each hash, whether `rows` (probably) hold it (answers for NULL candidates are the
/// caller's to discard).
fn seen_in_rows(config: &TrackedConfig, rows: &UserRows, hashes: &[u64]) -> Vec<bool> {
    let mut view = WindowView::default();
    for (generation, layer, segment, bits) in rows.iter() {
        view.add_row(&config.layout, generation, layer, segment, bits)
            .or_raise();
    }
    view.seal(&config.layout);
    let mut seen = vec![false; hashes.len()];
    view.contains_each(&config.layout, hashes, &mut seen);
    seen
}

// seen_bloom.unseen(impressions regclass, user, candidates anyarray) -> anyarray
v1_function!(tracked_unseen, pg_finfo_tracked_unseen, |fcinfo| {
    let (Some(impressions), Some(candidates)) = (arg(fcinfo, 0), arg(fcinfo, 2)) else {
        return return_null(fcinfo);
    };
    let candidates = ItemArray::from_datum(candidates, "seen_bloom.unseen");
    let Some(user) = arg(fcinfo, 1) else {
        // An anonymous user has seen nothing.
        let hashes = CandidateHashes::of(&candidates);
        return keep_unseen(&candidates, &hashes, |_| false);
    };
    let impressions = pg_sys::Oid::from(impressions.value() as u32);
    let config = config(impressions);
    config.require_user_argument(fcinfo, 1, impressions, "seen_bloom.unseen");
    config.require_item_family(
        candidates.item_type,
        candidates.element_type,
        impressions,
        "seen_bloom.unseen",
    );
    // The rows first, then the candidates' hashes, with the lines of the rows' bits (which
    // the window copies next) prefetched a share at a time between pieces of hashing.
    let rows = live_rows(&config, user);
    let ranges = rows.bit_ranges();
    let mut lines = LinePrefetcher::over(&ranges);
    let total_lines = lines.lines();
    let hashes = CandidateHashes::of_with(&candidates, |pieces| {
        lines.issue(total_lines.div_ceil(pieces));
    });
    let seen = seen_in_rows(&config, &rows, hashes.all());
    keep_unseen(&candidates, &hashes, |i| seen[i])
});

// seen_bloom.has_seen(impressions regclass, user, item anyelement) -> boolean
v1_function!(tracked_has_seen, pg_finfo_tracked_has_seen, |fcinfo| {
    let item_oid = crate::v1::arg_type(fcinfo, 2);
    let item_type = ItemType::require(item_oid, "seen_bloom.has_seen");
    let impressions = pg_sys::Oid::from(arg(fcinfo, 0).unwrap().value() as u32);
    let config = config(impressions);
    config.require_user_argument(fcinfo, 1, impressions, "seen_bloom.has_seen");
    config.require_item_family(item_type, item_oid, impressions, "seen_bloom.has_seen");
    let hash = item_type.hash(arg(fcinfo, 2).unwrap());
    let rows = live_rows(&config, arg(fcinfo, 1).unwrap());
    let seen = seen_in_rows(&config, &rows, &[hash]);
    pg_sys::Datum::from(seen[0])
});

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

// seen_bloom._layer_blocks(error_rate_per_generation float8, layer int, layout int) -> bigint,
// and the form without `layout` (layout 1) that databases not yet updated from 0.2.0 call.
v1_function!(layer_blocks, pg_finfo_layer_blocks, |fcinfo| {
    let layout_number = match (*fcinfo).nargs {
        3 => arg(fcinfo, 2).unwrap().value() as i32,
        _ => 1,
    };
    let layout = layout_for(
        f64::from_bits(arg(fcinfo, 0).unwrap().value() as u64),
        layout_number,
    );
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

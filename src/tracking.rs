//! Impression tracking: folding a batch of impressions into the per-user filter rows (called
//! once per INSERT statement by the tracked table's trigger) and the read path
//! (`seen_bloom.unseen`, `seen_bloom.has_seen`). The SQL side (track, untrack, expire,
//! rebuild, stats, the per-table triggers) is in sql/tracking.sql.
//!
//! Every SPI statement names its operators and functions with their schema, so a caller's
//! search_path cannot redirect them.

use crate::errors::OrRaise;
use crate::filter_arg::varlena_datum;
use crate::items::{keep_unseen, ItemArray, ItemType};
use crate::spi::{array_of, Connection};
use crate::v1::{arg, return_null, v1_function};
use bloom_core::{hash_bytes, GenerationLayout, GenerationRows, WindowView, EXACT_LAYER};
use pgrx::{ereport, pg_sys, PgSqlErrorCode};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
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
}

/// Drops cached configurations of `relid` (impressions or filter table; all for InvalidOid).
pub fn forget_config(relid: pg_sys::Oid) {
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
    let groups: Vec<(i32, Group)> = groups
        .into_iter()
        .map(|((bytes, _), group)| (lock_key(&bytes), group))
        .collect();
    let conn = Connection::open();
    let name = qualified_name(filter_table);
    let user_type = users.element_type;
    let user_array_type = pg_sys::get_array_type(user_type);

    // Writers of the same user take turns (see lock_users); the rows are read after.
    lock_users(filter_table, groups.iter().map(|(k, _)| *k).collect());

    // Read the groups' rows after the locks, so they include every earlier writer's commit.
    let group_users = array_of(
        user_type,
        &groups.iter().map(|(_, g)| g.user).collect::<Vec<_>>(),
    );
    let group_generations = array_of(
        pg_sys::INT4OID,
        &groups
            .iter()
            .map(|(_, g)| pg_sys::Datum::from(g.generation))
            .collect::<Vec<_>>(),
    );
    // Each group's top stored layer, then only the rows the batch's items fall in.
    let tops_plan = conn.plan(filter_table, "fold-tops", &[user_array_type, pg_sys::INT4ARRAYOID], || {
        format!(
            "SELECT g.ord::pg_catalog.int4,
                    (SELECT f.layer FROM {name} f
                     WHERE f.user_key OPERATOR(pg_catalog.=) g.u AND f.generation OPERATOR(pg_catalog.=) g.gen
                     ORDER BY f.layer DESC LIMIT 1)
             FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) WITH ORDINALITY AS g(u, gen, ord)"
        )
    });
    let mut tops: Vec<Option<usize>> = vec![None; groups.len()];
    // Not read-only: a fresh snapshot, taken after the locks, sees every earlier writer.
    let tops_rows = conn.execute(tops_plan, &[group_users, group_generations], false);
    for r in 0..tops_rows.len() {
        let group = tops_rows.datum(r, 1).unwrap().value() as i32 as usize - 1;
        tops[group] = tops_rows
            .datum(r, 2)
            .map(|d| d.value() as i16)
            .filter(|&l| l >= 0)
            .map(|l| l as usize);
    }
    let (mut n_ord, mut n_layer, mut n_segment) = (vec![], vec![], vec![]);
    for (i, (_, group)) in groups.iter().enumerate() {
        for (layer, segment) in GenerationRows::needed(&layout, tops[i], &group.hashes) {
            n_ord.push(pg_sys::Datum::from(i as i32 + 1));
            n_layer.push(pg_sys::Datum::from(layer));
            n_segment.push(pg_sys::Datum::from(segment as i32));
        }
    }
    let read = conn.plan(
        filter_table,
        "fold-read",
        &[user_array_type, pg_sys::INT4ARRAYOID, pg_sys::INT4ARRAYOID, pg_sys::INT2ARRAYOID, pg_sys::INT4ARRAYOID],
        || {
            format!(
                "SELECT w.ord, f.layer, f.segment, f.bits, f.ctid
                 FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($4), pg_catalog.unnest($5))
                   AS w(ord, layer, segment)
                 JOIN ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) WITH ORDINALITY AS g(u, gen, ord)
                   ON g.ord OPERATOR(pg_catalog.=) w.ord
                 JOIN {name} f
                   ON f.user_key OPERATOR(pg_catalog.=) g.u AND f.generation OPERATOR(pg_catalog.=) g.gen
                  AND f.layer OPERATOR(pg_catalog.=) w.layer AND f.segment OPERATOR(pg_catalog.=) w.segment"
            )
        },
    );
    // Stored rows by (group, layer, segment): their ctids, to update them in place.
    let mut stored: HashMap<(usize, i16, u32), pg_sys::Datum> = HashMap::new();
    let mut state: Vec<GenerationRows> = tops
        .iter()
        .map(|&top| GenerationRows {
            top,
            ..GenerationRows::default()
        })
        .collect();
    let needed = [
        group_users,
        group_generations,
        array_of(pg_sys::INT4OID, &n_ord),
        array_of(pg_sys::INT2OID, &n_layer),
        array_of(pg_sys::INT4OID, &n_segment),
    ];
    let read_rows = conn.execute(read, &needed, false);
    for r in 0..read_rows.len() {
        let field = |c| read_rows.datum(r, c).unwrap();
        let group = field(1).value() as i32 as usize - 1;
        let (layer, segment) = (field(2).value() as i16, field(3).value() as u32);
        let bits = crate::filter_arg::varlena_bytes(field(4));
        state[group].load(&layout, layer, segment, bits).or_raise();
        stored.insert((group, layer, segment), field(5));
    }

    // Fold. Rows that exist are updated in place by ctid (no other writer of the group can
    // move them while we hold its lock), new rows inserted, promoted exact rows deleted.
    let (mut u_tid, mut u_bits) = (vec![], vec![]);
    let (mut i_ord, mut i_layer, mut i_segment, mut i_bits) = (vec![], vec![], vec![], vec![]);
    let mut deleted = vec![];
    for (i, (_, group)) in groups.iter().enumerate() {
        let rows = &mut state[i];
        for &h in &group.hashes {
            rows.insert(&layout, h).or_raise();
        }
        for &(layer, segment) in &rows.dirty {
            let bits = varlena_datum(&rows.row_bytes(layer, segment));
            match stored.get(&(i, layer, segment)) {
                Some(&tid) => {
                    u_tid.push(tid);
                    u_bits.push(bits);
                }
                None => {
                    i_ord.push(pg_sys::Datum::from(i as i32 + 1));
                    i_layer.push(pg_sys::Datum::from(layer));
                    i_segment.push(pg_sys::Datum::from(segment as i32));
                    i_bits.push(bits);
                }
            }
        }
        if rows.exact_deleted {
            if let Some(&tid) = stored.get(&(i, EXACT_LAYER, 0)) {
                deleted.push(tid);
            }
        }
    }
    if !u_tid.is_empty() {
        let update = conn.plan(
            filter_table,
            "fold-update",
            &[pg_sys::TIDARRAYOID, pg_sys::BYTEAARRAYOID],
            || {
                format!(
                    "UPDATE {name} f SET bits = $2[pg_catalog.array_position($1, f.ctid)]
                 WHERE f.ctid OPERATOR(pg_catalog.=) ANY ($1)"
                )
            },
        );
        conn.execute(
            update,
            &[
                array_of(pg_sys::TIDOID, &u_tid),
                array_of(pg_sys::BYTEAOID, &u_bits),
            ],
            false,
        );
    }
    if !i_ord.is_empty() {
        let insert = conn.plan(
            filter_table,
            "fold-insert",
            &[user_array_type, pg_sys::INT4ARRAYOID, pg_sys::INT4ARRAYOID, pg_sys::INT2ARRAYOID, pg_sys::INT4ARRAYOID, pg_sys::BYTEAARRAYOID],
            || {
                format!(
                    "INSERT INTO {name} (user_key, generation, layer, segment, bits)
                     SELECT g.u, g.gen, w.layer, w.segment, w.bits
                     FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($4), pg_catalog.unnest($5), pg_catalog.unnest($6))
                       AS w(ord, layer, segment, bits)
                     JOIN ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) WITH ORDINALITY AS g(u, gen, ord)
                       ON g.ord OPERATOR(pg_catalog.=) w.ord"
                )
            },
        );
        conn.execute(
            insert,
            &[
                group_users,
                group_generations,
                array_of(pg_sys::INT4OID, &i_ord),
                array_of(pg_sys::INT2OID, &i_layer),
                array_of(pg_sys::INT4OID, &i_segment),
                array_of(pg_sys::BYTEAOID, &i_bits),
            ],
            false,
        );
    }
    if !deleted.is_empty() {
        let delete = conn.plan(filter_table, "fold-delete", &[pg_sys::TIDARRAYOID], || {
            format!("DELETE FROM {name} WHERE ctid OPERATOR(pg_catalog.=) ANY ($1)")
        });
        conn.execute(delete, &[array_of(pg_sys::TIDOID, &deleted)], false);
    }
    drop(conn);
    pg_sys::Datum::from(0usize)
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

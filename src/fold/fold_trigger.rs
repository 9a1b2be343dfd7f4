//! The tracked table's trigger, `seen_bloom._fold_trigger()`: AFTER INSERT or UPDATE, FOR
//! EACH STATEMENT, REFERENCING NEW TABLE. It reads the statement's new rows straight from the
//! transition table and folds them (see fold_batch) as the tracked table's owner, the way a
//! SECURITY DEFINER function would run, without a PL/pgSQL frame and an aggregate query per
//! statement. A table tracked with a `where` predicate keeps the SQL trigger that
//! sql/tracking.sql generates, since the predicate is SQL.
//!
//! Rows are kept exactly as `seen_bloom._fold_query` keeps them: user and item not NULL, a
//! NULL time refused (23502), the generation and the window's edge those of tracking::generations.

use crate::fold::fold_batch::fold_batch;
use crate::pg::activity::{Counter, Tally};
use crate::pg::item_type::{Item, ItemType};
use crate::pg::v1::v1_function;
use crate::tracking::caches::config;
use crate::tracking::generations::{transaction_start, LiveWindow};
use crate::tracking::tracked_config::TrackedConfig;
use pgrx::{ereport, pg_sys, PgSqlErrorCode};

fn protocol_violation(message: &'static str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
        message
    );
    #[allow(unreachable_code)]
    {
        unreachable!()
    }
}

/// An impression without a time is refused, not dropped (seen_bloom._null_time's 23502).
fn null_time(relid: pg_sys::Oid, attnum: i16) -> ! {
    let column = crate::pg::catalog::column_name(relid, attnum);
    let table = crate::pg::catalog::qualified_name(relid);
    crate::pg::errors::raise_with_hint(
        PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION,
        format!("seen_bloom: an impression of {table} has a NULL {column} (its time column)"),
        format!("Give the column a time: ALTER TABLE {table} ALTER COLUMN {column} SET DEFAULT now(), SET NOT NULL."),
    );
}

/// The trigger's relation and the statement's transition table of new rows, checking how
/// the trigger was fired.
fn new_rows(context: *mut pg_sys::Node) -> (pg_sys::Relation, *mut pg_sys::Tuplestorestate) {
    // SAFETY: a non-null call context is a Node; one tagged T_TriggerData is the
    // TriggerData of the firing trigger, valid for the call.
    unsafe {
        if context.is_null() || (*context).type_ != pg_sys::NodeTag::T_TriggerData {
            protocol_violation("seen_bloom._fold_trigger() must be called as a trigger");
        }
        let trigger = context as *mut pg_sys::TriggerData;
        let event = (*trigger).tg_event;
        let after = event & pg_sys::TRIGGER_EVENT_TIMINGMASK == pg_sys::TRIGGER_EVENT_AFTER;
        let per_statement = event & pg_sys::TRIGGER_EVENT_ROW == 0;
        let new_table = (*trigger).tg_newtable;
        if !after || !per_statement || new_table.is_null() {
            protocol_violation(
                "seen_bloom._fold_trigger() must fire AFTER INSERT or UPDATE FOR EACH STATEMENT with REFERENCING NEW TABLE",
            );
        }
        ((*trigger).tg_relation, new_table)
    }
}

/// The statement's transition table, read through a read pointer and a slot of our own
/// (other triggers may be reading the same table); both given back on drop.
struct TransitionRows {
    table: *mut pg_sys::Tuplestorestate,
    slot: *mut pg_sys::TupleTableSlot,
    /// The highest column read: each row is deformed up to it at once.
    last_attnum: i16,
}

impl TransitionRows {
    /// Reads `table`, rows of `desc`, for the columns `config` tracks.
    fn open(
        table: *mut pg_sys::Tuplestorestate,
        desc: pg_sys::TupleDesc,
        config: &TrackedConfig,
    ) -> TransitionRows {
        let last_attnum = config
            .user_attnum
            .max(config.item_attnum)
            .max(config.time_attnum.unwrap_or(0));
        // SAFETY: `table` is the statement's transition table, alive for the call; the slot
        // is made for the relation's row type, which the transition table's rows have.
        let slot = unsafe {
            let reader =
                pg_sys::tuplestore_alloc_read_pointer(table, pg_sys::EXEC_FLAG_REWIND as i32);
            pg_sys::tuplestore_select_read_pointer(table, reader);
            pg_sys::tuplestore_rescan(table);
            pg_sys::MakeSingleTupleTableSlot(desc, &pg_sys::TTSOpsMinimalTuple)
        };
        TransitionRows {
            table,
            slot,
            last_attnum,
        }
    }

    /// Reads the next row into the slot, deformed up to `last_attnum`; false at the end.
    /// One call into PostgreSQL deforms the row for every column read: a call per column
    /// (each behind pgrx's guard) was a third of the trigger's samples at 20 rows.
    fn next(&mut self) -> bool {
        // SAFETY: reads the next row of the transition table into our slot, then deforms
        // it up to a column of the relation's row type (the configuration's attnums, checked
        // against the relation when the configuration was loaded).
        unsafe {
            if !pg_sys::tuplestore_gettupleslot(self.table, true, false, self.slot) {
                return false;
            }
            pg_sys::slot_getsomeattrs(self.slot, self.last_attnum as i32);
        }
        true
    }

    /// Column `attnum` (at most `last_attnum`) of the current row, None when NULL.
    fn column(&self, attnum: i16) -> Option<pg_sys::Datum> {
        assert!(
            (1..=self.last_attnum).contains(&attnum),
            "a column read was deformed"
        );
        let at = attnum as usize - 1;
        // SAFETY: next() deformed the current row up to last_attnum, so the slot's value and
        // null arrays hold at least that many entries.
        unsafe {
            let slot = &*self.slot;
            (!*slot.tts_isnull.add(at)).then(|| *slot.tts_values.add(at))
        }
    }
}

impl Drop for TransitionRows {
    fn drop(&mut self) {
        // On an error, the transaction's abort releases the slot (resource owners).
        if std::thread::panicking() {
            return;
        }
        // SAFETY: releases our slot and gives the transition table's reading back to its
        // first read pointer.
        unsafe {
            pg_sys::ExecDropSingleTupleTableSlot(self.slot);
            pg_sys::tuplestore_select_read_pointer(self.table, 0);
        }
    }
}

v1_function!(
    seen_bloom__fold_trigger,
    pg_finfo_seen_bloom__fold_trigger,
    |args| {
        let (relation, new_table) = new_rows(args.context());
        // SAFETY: the trigger's relation is open for the call.
        let (relid, tuple_desc) = unsafe { ((*relation).rd_id, (*relation).rd_att) };
        let config = config(relid);
        if config.has_predicate {
            protocol_violation(
                "a table tracked with a where predicate is folded by its own SQL trigger, not seen_bloom._fold_trigger()",
            );
        }
        let mut tally = Tally::start(config.tracked, Counter::FoldMicros);
        let (mut rows, mut folded) = (0u64, 0u64);
        let item_type = ItemType::require(config.item_type, "seen_bloom._fold_trigger");
        let user_type = ItemType::require(config.user_type, "seen_bloom._fold_trigger");
        // An impression without a time column counts at now(), the window's end.
        let now = transaction_start();
        let window = LiveWindow::ending_at(now, &config.window, config.generation_seconds);

        let mut transition = TransitionRows::open(new_table, tuple_desc, &config);
        let impressions = std::iter::from_fn(|| loop {
            if !transition.next() {
                return None;
            }
            rows += 1;
            let (Some(user), Some(item)) = (
                transition.column(config.user_attnum),
                transition.column(config.item_attnum),
            ) else {
                continue;
            };
            let at = match config.time_attnum {
                None => now,
                Some(attnum) => match transition.column(attnum) {
                    Some(time) => time.value() as i64,
                    None => null_time(relid, attnum),
                },
            };
            let Some(generation) = window.generation_of_impression(at) else {
                continue;
            };
            // An int4 user is kept as the equal bigint (a by-value datum either way).
            let user = match config.user_is_int4 {
                true => pg_sys::Datum::from(user.value() as i32 as i64),
                false => user,
            };
            // SAFETY: non-null datums of the user and item columns, whose types are the
            // configuration's (resolved by name and type in TrackedConfig::load); valid until
            // the slot's next row, and the fold copies the user it keeps.
            let (user, item) = unsafe {
                (
                    Item::new(config.user_type, user_type, user),
                    Item::new(config.item_type, item_type, item),
                )
            };
            folded += 1;
            return Some((user, generation, item.hash()));
        });

        // As the tracked table's owner, as the SQL trigger's SECURITY DEFINER would (see pg::owner).
        crate::pg::owner::as_role(config.owner, || {
            fold_batch(
                config.filter_table,
                config.layout.error_rate(),
                config.layout_number,
                config.user_type,
                config.user_cap,
                impressions,
                true,
            )
        });

        tally.add(Counter::Folds, 1);
        tally.add(Counter::ImpressionsFolded, folded);
        tally.add(Counter::RowsSkipped, rows - folded);
        pg_sys::Datum::from(0usize)
    }
);

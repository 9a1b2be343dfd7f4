//! The tracked table's trigger, `seen_bloom._fold_trigger()`: AFTER INSERT or UPDATE, FOR
//! EACH STATEMENT, REFERENCING NEW TABLE. It reads the statement's new rows straight from the
//! transition table and folds them (see fold) as the filter table's owner, the way a
//! SECURITY DEFINER function would run, without a PL/pgSQL frame and an aggregate query per
//! statement. A table tracked with a `where` predicate keeps the SQL trigger that
//! sql/tracking.sql generates, since the predicate is SQL.
//!
//! Rows are kept exactly as `seen_bloom._fold_query` keeps them: user and item not NULL,
//! time (the time column, or now()) not older than now() - window, a NULL time refused
//! (23502); the
//! generation is `seen_bloom.generation_of` computed the same way in floating point.

use crate::fold::fold_batch;
use crate::items::ItemType;
use crate::tracking::config;
use crate::v1::v1_function;
use pgrx::{ereport, pg_sys, PgSqlErrorCode};

unsafe extern "C-unwind" {
    /// The C function behind timestamptz - interval, called directly.
    #[link_name = "timestamptz_mi_interval"]
    fn timestamptz_minus_interval(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum;
}

/// Microseconds from 1970-01-01 to 2000-01-01, PostgreSQL's timestamp origin.
const UNIX_EPOCH_TO_2000_US: i64 = 946_684_800_000_000;

/// `seen_bloom.generation_of(t, generation_seconds)`: floor(date_part('epoch', t) /
/// generation_seconds), with date_part's float arithmetic; None where the SQL fold skips the
/// row: +infinity, or a time so far ahead that its generation would pass int4 (-infinity is
/// older than any window and never gets here).
fn generation_of(timestamp_us: i64, generation_seconds: f64) -> Option<i32> {
    if timestamp_us == i64::MAX || timestamp_us == i64::MIN {
        return None; // TIMESTAMP_NOEND, TIMESTAMP_NOBEGIN
    }
    let epoch_seconds = (timestamp_us as f64 + UNIX_EPOCH_TO_2000_US as f64) / 1_000_000.0;
    let generation = (epoch_seconds / generation_seconds).floor();
    (-2_147_483_648.0..2_147_483_648.0)
        .contains(&generation)
        .then_some(generation as i32)
}

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
    // SAFETY: `attnum` is a column of `relid` the slot was just read with; missing_ok = false
    // raises rather than returning NULL.
    let column = unsafe {
        std::ffi::CStr::from_ptr(pg_sys::get_attname(relid, attnum, false))
            .to_string_lossy()
            .into_owned()
    };
    let table = crate::tracking::qualified_name(relid);
    crate::errors::raise_with_hint(
        PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION,
        format!("seen_bloom: an impression of {table} has a NULL {column} (its time column)"),
        format!("Give the column a time: ALTER TABLE {table} ALTER COLUMN {column} SET DEFAULT now(), SET NOT NULL."),
    );
}

/// The statement's transition table of new rows, checking how the trigger was fired.
unsafe fn new_rows(
    fcinfo: pg_sys::FunctionCallInfo,
) -> (*mut pg_sys::TriggerData, *mut pg_sys::Tuplestorestate) {
    unsafe {
        let context = (*fcinfo).context;
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
        (trigger, new_table)
    }
}

v1_function!(
    tracked_fold_trigger,
    pg_finfo_tracked_fold_trigger,
    |fcinfo| {
        let (trigger, new_table) = new_rows(fcinfo);
        let relation = (*trigger).tg_relation;
        let config = config((*relation).rd_id);
        if config.has_predicate {
            protocol_violation(
            "a table tracked with a where predicate is folded by its own SQL trigger, not seen_bloom._fold_trigger()",
        );
        }
        let item_type = ItemType::require(config.item_type, "seen_bloom._fold_trigger");

        let now = pg_sys::GetCurrentTransactionStartTimestamp();
        let oldest = pg_sys::DirectFunctionCall2Coll(
            Some(timestamptz_minus_interval),
            pg_sys::InvalidOid,
            pg_sys::Datum::from(now),
            pg_sys::Datum::from(&config.window as *const pg_sys::Interval),
        )
        .value() as i64;

        // Our own read pointer, from the start: other triggers may be reading the same table.
        let reader =
            pg_sys::tuplestore_alloc_read_pointer(new_table, pg_sys::EXEC_FLAG_REWIND as i32);
        pg_sys::tuplestore_select_read_pointer(new_table, reader);
        pg_sys::tuplestore_rescan(new_table);
        let slot =
            pg_sys::MakeSingleTupleTableSlot((*relation).rd_att, &pg_sys::TTSOpsMinimalTuple);
        let column = |attnum: i16| {
            let mut isnull = false;
            let value = pg_sys::slot_getattr(slot, attnum as i32, &mut isnull);
            (!isnull).then_some(value)
        };
        let impressions = std::iter::from_fn(|| loop {
            if !pg_sys::tuplestore_gettupleslot(new_table, true, false, slot) {
                return None;
            }
            let (Some(user), Some(item)) = (column(config.user_attnum), column(config.item_attnum))
            else {
                continue;
            };
            let at = match config.time_attnum {
                None => now,
                Some(attnum) => match column(attnum) {
                    Some(time) => time.value() as i64,
                    None => null_time((*relation).rd_id, attnum),
                },
            };
            if at < oldest {
                continue;
            }
            let Some(generation) = generation_of(at, config.generation_seconds) else {
                continue;
            };
            return Some((user, generation, item_type.hash(item)));
        });

        // As the filter table's owner, as the SQL trigger's SECURITY DEFINER would; the
        // transaction's abort restores the caller on an error.
        let (mut caller, mut context) = (pg_sys::InvalidOid, 0);
        pg_sys::GetUserIdAndSecContext(&mut caller, &mut context);
        pg_sys::SetUserIdAndSecContext(
            config.filter_owner,
            context | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32,
        );
        fold_batch(
            config.filter_table,
            &config.layout,
            config.user_type,
            impressions,
        );
        pg_sys::SetUserIdAndSecContext(caller, context);

        pg_sys::ExecDropSingleTupleTableSlot(slot);
        pg_sys::tuplestore_select_read_pointer(new_table, 0);
        pg_sys::Datum::from(0usize)
    }
);

#[cfg(test)]
mod tests {
    use super::generation_of;

    #[test]
    fn generations_split_at_whole_multiples_since_1970() {
        let day = 86_400.0;
        // 2000-01-01 00:00:00 UTC is day 10,957 since 1970.
        assert_eq!(generation_of(0, day), Some(10_957));
        assert_eq!(generation_of(-1, day), Some(10_956));
        assert_eq!(generation_of(86_400_000_000 - 1, day), Some(10_957));
        assert_eq!(generation_of(86_400_000_000, day), Some(10_958));
    }

    #[test]
    fn infinite_times_and_generations_past_int4_are_skipped() {
        assert_eq!(generation_of(i64::MAX, 86_400.0), None);
        assert_eq!(generation_of(i64::MIN, 86_400.0), None);
        // 2040-01-01 with one-second generations: past 2^31 seconds since 1970.
        let y2040_us = (2_208_988_800 - 946_684_800) * 1_000_000;
        assert_eq!(generation_of(y2040_us, 1.0), None);
        assert_eq!(generation_of(y2040_us, 2.0), Some(1_104_494_400));
    }
}

//! What the library needs to know of a tracked table (a row of `seen_bloom.tracked`, its
//! columns resolved in the table or partition at hand), and the checks of a read's arguments
//! against it. Cached per backend in caches::config.

use crate::pg::catalog::{column, qualified_name};
use crate::pg::item_type::{type_name, ItemFamily, ItemType};
use crate::pg::spi::Connection;
use crate::tracking::layout::{is_moving, user_layout};
use bloom_core::GenerationLayout;
use pgrx::{ereport, pg_sys, PgSqlErrorCode};
use std::rc::Rc;

/// What the read path and the trigger need to know of a tracked table.
pub struct TrackedConfig {
    /// The tracked table (the root of a partition tree; on a Citus worker, the shard).
    pub tracked: pg_sys::Oid,
    pub filter_table: pg_sys::Oid,
    /// Who owns the tracked table (on a Citus worker, the shard): the trigger folds as this
    /// role, which must hold the filter table owner's privileges (see pg::owner).
    pub owner: pg_sys::Oid,
    /// Whether the filter table is distributed by Citus: a read then goes to the user's
    /// shard (see read::citus), never to this node's empty relation.
    pub distributed: bool,
    pub user_type: pg_sys::Oid,
    pub item_type: pg_sys::Oid,
    /// The family of `item_type`: candidates of another family are refused.
    pub item_family: ItemFamily,
    /// Attribute numbers in the impressions table (time: None when now() is the time).
    pub user_attnum: i16,
    /// Whether the user column is an int4 (its users are kept as bigint, `user_type`).
    pub user_is_int4: bool,
    pub item_attnum: i16,
    pub time_attnum: Option<i16>,
    /// Whether a `where` predicate filters impressions (the SQL trigger evaluates it).
    pub has_predicate: bool,
    pub window: pg_sys::Interval,
    pub generation_seconds: f64,
    /// The layout of the rows: of a moved user's while the table is being moved (see
    /// relayout).
    pub layout: Rc<GenerationLayout>,
    /// While the table is being moved from layout 1, the layout of users without a marker.
    pub unmoved: Option<Rc<GenerationLayout>>,
    /// `seen_bloom.tracked.layout`.
    pub layout_number: i32,
    /// `seen_bloom.tracked.user_cap` (seen_bloom.set_user_cap), with this table as the one
    /// its refusals are counted for.
    pub user_cap: Option<UserCap>,
}

/// A tracked table's per-user cap: the most items a user's generation takes in (see
/// bloom_core::GenerationLayout::with_cap), and the tracked table whose `seen_bloom.activity`
/// counts the impressions it refuses.
#[derive(Clone, Copy, Debug)]
pub struct UserCap {
    pub items: u64,
    pub counted_for: pg_sys::Oid,
}

impl UserCap {
    /// The items of an optional cap, as layouts take it.
    pub fn items_of(cap: Option<UserCap>) -> Option<u64> {
        cap.map(|c| c.items)
    }
}

/// The columns read of a configuration row `t`. The layout is read by name from the row as
/// JSON: a database not yet updated from 0.1.0 or 0.2.0 (this library serves it too, see
/// the compat module) has no layout column, and its tables are all layout 1.
const CONFIG_COLUMNS: &str =
    "t.filter_table::pg_catalog.oid, t.user_type::pg_catalog.oid, t.error_rate_per_generation,
        t.generation_seconds::pg_catalog.float8,
        t.item_type::pg_catalog.oid, t.user_column::pg_catalog.text, t.item_column::pg_catalog.text,
        t.time_column::pg_catalog.text, t.\"where\" IS NOT NULL, t.\"window\",
        COALESCE((pg_catalog.to_jsonb(t) OPERATOR(pg_catalog.->>) 'layout')::pg_catalog.int4, 1),
        t.impressions::pg_catalog.oid,
        (pg_catalog.to_jsonb(t) OPERATOR(pg_catalog.->>) 'user_cap')::pg_catalog.int8";

/// The row of `seen_bloom.tracked` for a table or any of its partition ancestors.
const TRACKED_ROW: &str = "FROM seen_bloom.tracked t
 WHERE t.impressions::pg_catalog.oid OPERATOR(pg_catalog.=) $1
    OR t.impressions::pg_catalog.oid OPERATOR(pg_catalog.=) ANY (
       SELECT a.relid::pg_catalog.oid FROM pg_catalog.pg_partition_ancestors($1) a)";

/// On a Citus worker, which keeps no row: the configuration of a shard (its filter table the
/// co-located filter shard) or of a distributed table's shell, from the shell's trigger.
const CITUS_ROW: &str = "FROM seen_bloom._citus_config($1) t WHERE t.impressions IS NOT NULL";

/// The configuration row of `impressions`, read by SPI into `read`.
fn with_config_row<T>(
    impressions: pg_sys::Oid,
    read: impl FnOnce(&crate::pg::spi::Rows) -> T,
) -> T {
    let conn = Connection::open();
    let query = |from: &str| {
        let plan = conn.prepare(
            &format!("SELECT {CONFIG_COLUMNS} {from}"),
            &[pg_sys::OIDOID],
            false,
        );
        conn.execute(plan, &[pg_sys::Datum::from(impressions)], true)
    };
    let rows = query(TRACKED_ROW);
    if rows.len() > 0 || !crate::pg::citus::installed() {
        return read(&rows);
    }
    read(&query(CITUS_ROW))
}

/// The attribute number and type of the column named in column `name_col` of the
/// configuration row (None when that is NULL). A column is found by its name (the DDL event
/// trigger keeps the names current through renames, and refuses dropping or retyping a
/// tracked column); one that is gone or of another type is an error, never a silent skip of
/// every row or a datum read as the wrong type.
fn tracked_column(
    impressions: pg_sys::Oid,
    rows: &crate::pg::spi::Rows,
    name_col: i32,
    recorded_type: pg_sys::Oid,
    is_item: bool,
) -> Option<(i16, pg_sys::Oid)> {
    let name = rows.text(0, name_col)?;
    let found = column(impressions, &name);
    // The item column may be int4 or int8 whatever was recorded (integers hash alike), text
    // or varchar (the same bytes); a bigint user may be an int4 column (kept as bigint); a
    // time may be a timestamp (read as UTC: its value is a timestamptz's).
    let integer = [pg_sys::INT4OID, pg_sys::INT8OID];
    let text = [pg_sys::TEXTOID, pg_sys::VARCHAROID];
    let fits = |actual: pg_sys::Oid| {
        actual == recorded_type
            || is_item && integer.contains(&actual) && integer.contains(&recorded_type)
            || is_item && text.contains(&actual) && text.contains(&recorded_type)
            || !is_item && actual == pg_sys::INT4OID && recorded_type == pg_sys::INT8OID
            || actual == pg_sys::TIMESTAMPOID && recorded_type == pg_sys::TIMESTAMPTZOID
    };
    match found {
        Some((attnum, actual)) if fits(actual) => Some((attnum, actual)),
        _ => crate::pg::errors::raise_with_hint(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "the tracked column \"{name}\" of {} no longer exists or changed its type",
                qualified_name(impressions)
            ),
            "Call seen_bloom.untrack and seen_bloom.track again with the table's columns.".into(),
        ),
    }
}

/// Whether the filter table is distributed by Citus; raises 55000 if the impressions table
/// is and the filter table is not.
fn distributed_together(impressions: pg_sys::Oid, filter_table: pg_sys::Oid) -> bool {
    let distributed = crate::pg::citus::is_distributed(filter_table);
    if !distributed && crate::pg::citus::is_distributed(impressions) {
        crate::pg::errors::raise_with_hint(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "{} was distributed by Citus after seen_bloom.track, and its filter table was not",
                qualified_name(impressions)
            ),
            "Call seen_bloom.untrack and seen_bloom.track again: track distributes the filter table with it."
                .into(),
        );
    }
    distributed
}

impl TrackedConfig {
    /// Reads the configuration of `impressions` (a tracked table, or a partition of one,
    /// whose columns are found by name); 55000 when it is not tracked. `layout` gives the
    /// generation layout of (error rate per generation, layout number).
    pub fn load(
        impressions: pg_sys::Oid,
        layout: impl Fn(f64, i32, Option<u64>) -> Rc<GenerationLayout>,
    ) -> TrackedConfig {
        with_config_row(impressions, |rows| {
            Self::from_row(impressions, rows, layout)
        })
    }

    fn from_row(
        impressions: pg_sys::Oid,
        rows: &crate::pg::spi::Rows,
        layout: impl Fn(f64, i32, Option<u64>) -> Rc<GenerationLayout>,
    ) -> TrackedConfig {
        if rows.len() == 0 {
            let name = qualified_name(impressions);
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("table {name} is not tracked by seen_bloom; call seen_bloom.track('{name}', ...) first")
            );
        }
        let value = |col| rows.datum(0, col).unwrap().value();
        let float = |col| f64::from_bits(value(col) as u64);
        let oid = |col| pg_sys::Oid::from(value(col) as u32);
        let user_type = oid(2);
        let recorded_item_type = oid(5);
        let attnum =
            |col, recorded, is_item| tracked_column(impressions, rows, col, recorded, is_item);
        let (user_attnum, user_column_type) =
            attnum(6, user_type, false).expect("the user column is NOT NULL");
        // The item column's own type, which the trigger hashes its datums as (an int4 column
        // retyped to bigint stays tracked: integers hash alike).
        let (item_attnum, item_type) =
            attnum(7, recorded_item_type, true).expect("the item column is NOT NULL");
        let time_attnum = attnum(8, pg_sys::TIMESTAMPTZOID, false).map(|(attnum, _)| attnum);
        let filter_table = oid(1);
        let distributed = distributed_together(impressions, filter_table);
        let user_cap = rows.datum(0, 13).map(|cap| UserCap {
            items: cap.value() as u64,
            counted_for: oid(12),
        });
        let cap = UserCap::items_of(user_cap);
        TrackedConfig {
            tracked: oid(12),
            filter_table,
            owner: crate::pg::catalog::owner(oid(12)),
            distributed,
            user_type,
            user_is_int4: user_column_type == pg_sys::INT4OID,
            item_type,
            item_family: ItemType::require(item_type, "seen_bloom tracking").family(),
            user_attnum,
            item_attnum,
            time_attnum,
            has_predicate: value(9) != 0,
            // SAFETY: column 10 is the row's interval, non-null (NOT NULL in the table).
            window: unsafe {
                *rows
                    .datum(0, 10)
                    .unwrap()
                    .cast_mut_ptr::<pg_sys::Interval>()
            },
            generation_seconds: float(4),
            layout: layout(float(3), user_layout(value(11) as i32, true), cap),
            unmoved: is_moving(value(11) as i32)
                .then(|| layout(float(3), user_layout(value(11) as i32, false), cap)),
            layout_number: value(11) as i32,
            user_cap,
        }
    }

    /// The layout of a user's rows, given whether they include a marker row (see tracking::layout).
    pub fn layout_of(&self, marked: bool) -> &GenerationLayout {
        match &self.unmoved {
            Some(unmoved) if !marked => unmoved,
            _ => &self.layout,
        }
    }

    /// Raises 42804 unless a user argument of type `given` has the type of the tracked user
    /// column. The read path builds its scan key from the datum as that type: a bigint read
    /// as a text pointer crashed the backend, and a text '1' for a bigint column matched
    /// nothing.
    pub fn require_user_type(&self, given: pg_sys::Oid, impressions: pg_sys::Oid, function: &str) {
        if given != self.user_type {
            let expected = type_name(self.user_type);
            crate::pg::errors::raise_with_hint(
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
            crate::pg::errors::raise_with_hint(
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

//! What a tracked table's layout number means, in one place: how its generations' layers are
//! sized (from 1000 on, for the table's capacity), how a fold writes them, and, while `seen_bloom.relayout` moves a table from layout 1
//! to layout 3, which layout each user's rows are in.
//!
//! A moving table's layout number is [`MOVING`] while users are rebuilt in batches. Layout 1
//! sizes its rows unlike layout 3, and rows do not record their sizes, so each user's layout
//! is told by a marker row (bloom_core's `MOVED_LAYER`): with it, the user's rows are layout
//! 3's; without it, layout 1's, unless the user has no row at all, when its first fold writes
//! the marker and layout 3's rows. The rule is [`user_layout`], used by the folds, the reads
//! and (as `seen_bloom._user_layout`) `stats`.

use crate::pg::errors::OrRaise;
use crate::pg::v1::v1_function;
use bloom_core::{FirstLayer, GenerationLayout};
use pgrx::pg_sys;

/// The layout number of a table being moved from layout 1 to layout 3.
pub const MOVING: i32 = 13;

/// Layout numbers from this one on (since 0.5.0, tables tracked with a capacity): layout 3
/// with a generation's first layer sized for `number - SIZED_BASE` items (bloom_core's
/// `FirstLayer::Holds`), the capacity's share of one generation. The number carries the size
/// because rows do not record theirs, and every path already passes the number.
pub const SIZED_BASE: i32 = 1000;

/// The layout number of a table tracked with `capacity` items per user per window over
/// `generations` generations.
pub fn sized_layout(capacity: i64, generations: i32) -> i32 {
    let generations = i64::from(generations.max(1));
    let per_generation = (capacity.max(1) + generations - 1) / generations;
    SIZED_BASE.saturating_add(i32::try_from(per_generation).unwrap_or(i32::MAX))
}

/// The layout a user's rows are in, for a table of layout `number` (a fold's negative
/// number counts as its absolute value) and whether the user has a marker row.
pub fn user_layout(number: i32, marked: bool) -> i32 {
    match number.abs() {
        MOVING if marked => 3,
        MOVING => 1,
        n => n,
    }
}

/// Whether a table of layout `number` is being moved (some users in each layout).
pub fn is_moving(number: i32) -> bool {
    number.abs() == MOVING
}

/// The generation layout of layout `layout_number` at a per-generation error rate (22023 for
/// a number this build does not know). Cached by caches::layout.
pub fn generation_layout(error_rate_per_generation: f64, layout_number: i32) -> GenerationLayout {
    let first = match layout_number {
        // Layout 3 sizes its layers as layout 2 does; what differs is how the fold writes them.
        3 => FirstLayer::from_number(2),
        n if n >= SIZED_BASE => Some(FirstLayer::Holds((n - SIZED_BASE) as u64)),
        n => FirstLayer::from_number(n),
    };
    let Some(first) = first else {
        crate::pg::errors::bad_argument(format!(
            "unknown tracking layout {layout_number} (this build knows layouts 1, 2, 3 and {SIZED_BASE} on)"
        ));
    };
    GenerationLayout::new(error_rate_per_generation, first).or_raise()
}

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

// seen_bloom._sized_layout(capacity bigint, generations int) -> int
v1_function!(
    seen_bloom__sized_layout,
    pg_finfo_seen_bloom__sized_layout,
    |args| { pg_sys::Datum::from(sized_layout(args.int8(0).unwrap(), args.int4(1).unwrap())) }
);

// seen_bloom._user_layout(layout int, marked boolean) -> int
v1_function!(
    seen_bloom__user_layout,
    pg_finfo_seen_bloom__user_layout,
    |args| { pg_sys::Datum::from(user_layout(args.int4(0).unwrap(), args.bool(1).unwrap(),)) }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moving_users_take_their_marks_layout() {
        assert_eq!(user_layout(MOVING, true), 3);
        assert_eq!(user_layout(MOVING, false), 1);
        assert_eq!(user_layout(-MOVING, true), 3);
        for n in [1, 2, 3] {
            assert_eq!(user_layout(n, true), n);
            assert_eq!(user_layout(n, false), n);
        }
        assert!(is_moving(-MOVING) && !is_moving(3));
    }

    #[test]
    fn sized_layouts_carry_the_capacity_share_of_a_generation() {
        assert_eq!(sized_layout(3000, 5), SIZED_BASE + 600);
        assert_eq!(sized_layout(3001, 5), SIZED_BASE + 601);
        assert_eq!(sized_layout(1_000_000_000, 1), SIZED_BASE + 1_000_000_000);
        let n = sized_layout(3000, 5);
        assert_eq!(user_layout(n, false), n);
        assert!(!is_moving(n) && WriteMode::of_layout(n) == WriteMode::InPlace);
        assert_eq!(WriteMode::of_layout(-n), WriteMode::InPlaceOnly);
    }
}

//! What a tracked table's layout number means, in one place: how its generations' layers are
//! sized, how a fold writes them, and, while `seen_bloom.relayout` moves a table from layout 1
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
    // Layout 3 sizes its layers as layout 2 does; what differs is how the fold writes them.
    let sizes = if layout_number == 3 { 2 } else { layout_number };
    let Some(first) = FirstLayer::from_number(sizes) else {
        crate::pg::errors::bad_argument(format!(
            "unknown tracking layout {layout_number} (this build knows layouts 1, 2 and 3)"
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
}

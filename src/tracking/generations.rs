//! Which generation an impression falls in and which generations are live: the one
//! definition that the C trigger, the SQL folds (backfill, rebuild, the `where` trigger and
//! the replica row trigger), the reads, `expire` and `stats` all use.
//!
//! A generation is a whole number of `generation_seconds` since the Unix epoch. The window
//! starts at `now() - window`, computed as PostgreSQL computes `timestamptz - interval`: in
//! the session's time zone, so a '1 month' window reaches back a calendar month and a
//! '1 day' window across a DST change 23 or 25 hours. An impression counts if its time is at
//! or after the window's start; the live generations are those from the start's generation
//! on. Reads and expire once used the interval's length in seconds instead (30 days for
//! '1 month'), which disagreed with the fold for up to a day each month.

use crate::pg::args::Args;
use crate::pg::v1::v1_function;
use pgrx::pg_sys;

/// Microseconds from 1970-01-01 to 2000-01-01, PostgreSQL's timestamp origin.
const UNIX_EPOCH_TO_2000_US: i64 = 946_684_800_000_000;

/// The generation of a moment (microseconds since 2000-01-01): floor(epoch seconds /
/// generation_seconds), in floating point as `date_part('epoch', t)` computes it. None for
/// +-infinity and where the generation would pass int4.
pub fn generation_of(timestamp_us: i64, generation_seconds: f64) -> Option<i32> {
    if timestamp_us == i64::MAX || timestamp_us == i64::MIN {
        return None; // TIMESTAMP_NOEND, TIMESTAMP_NOBEGIN
    }
    let epoch_seconds = (timestamp_us as f64 + UNIX_EPOCH_TO_2000_US as f64) / 1_000_000.0;
    let generation = (epoch_seconds / generation_seconds).floor();
    (-2_147_483_648.0..2_147_483_648.0)
        .contains(&generation)
        .then_some(generation as i32)
}

/// A tracked table's window as of one moment.
#[derive(Clone, Copy, Debug)]
pub struct LiveWindow {
    /// The window's start, `at - window` (microseconds since 2000-01-01).
    start_us: i64,
    generation_seconds: f64,
}

impl LiveWindow {
    /// The window of length `window` that ends at `at_us`; the start is computed by the
    /// server's own `timestamptz - interval` (calendar months, the session's time zone).
    pub fn ending_at(at_us: i64, window: &pg_sys::Interval, generation_seconds: f64) -> LiveWindow {
        LiveWindow::from_start(timestamptz_minus(at_us, window), generation_seconds)
    }

    /// The window that ends at the start of the current transaction (what now() returns).
    pub fn now(window: &pg_sys::Interval, generation_seconds: f64) -> LiveWindow {
        LiveWindow::ending_at(transaction_start(), window, generation_seconds)
    }

    /// The window whose start is `start_us` (the pure part, tested without a server).
    pub fn from_start(start_us: i64, generation_seconds: f64) -> LiveWindow {
        LiveWindow {
            start_us,
            generation_seconds,
        }
    }

    /// The generation an impression at `timestamp_us` is folded into, or None when it is not
    /// kept: before the window's start, +infinity, or past int4's generations.
    pub fn generation_of_impression(&self, timestamp_us: i64) -> Option<i32> {
        if timestamp_us < self.start_us {
            return None;
        }
        generation_of(timestamp_us, self.generation_seconds)
    }

    /// The oldest live generation: the start's. Rows of older generations are ignored by
    /// reads and deleted by expire.
    pub fn oldest_live(&self) -> i32 {
        match generation_of(self.start_us, self.generation_seconds) {
            Some(g) => g,
            // A start of -infinity or before int4's generations: everything is live.
            None if self.start_us < 0 => i32::MIN,
            // A start past them: nothing is.
            None => i32::MAX,
        }
    }
}

/// The start of the current transaction (what now() returns), in microseconds since 2000.
pub fn transaction_start() -> i64 {
    // SAFETY: reads the transaction's start time; no arguments.
    unsafe { pg_sys::GetCurrentTransactionStartTimestamp() }
}

unsafe extern "C-unwind" {
    /// The C function behind timestamptz - interval, called directly.
    #[link_name = "timestamptz_mi_interval"]
    fn timestamptz_minus_interval(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum;
}

/// `at - window` as PostgreSQL computes `timestamptz - interval`.
fn timestamptz_minus(at_us: i64, window: &pg_sys::Interval) -> i64 {
    // SAFETY: timestamptz_mi_interval takes a by-value timestamptz and a pointer to an
    // Interval, which lives across the call; it raises 22008 on overflow.
    unsafe {
        pg_sys::DirectFunctionCall2Coll(
            Some(timestamptz_minus_interval),
            pg_sys::InvalidOid,
            pg_sys::Datum::from(at_us),
            pg_sys::Datum::from(window as *const pg_sys::Interval),
        )
        .value() as i64
    }
}

// seen_bloom.generation_of(t timestamptz, generation_seconds bigint) -> int
v1_function!(
    seen_bloom_generation_of,
    pg_finfo_seen_bloom_generation_of,
    |args| {
        match generation_of(args.timestamptz(0).unwrap(), args.int8(1).unwrap() as f64) {
            Some(g) => pg_sys::Datum::from(g),
            None => args.return_null(),
        }
    }
);

/// The window of arguments (at timestamptz, window interval, generation_seconds bigint)
/// starting at argument `first`.
fn window_arguments(args: &Args, first: usize) -> LiveWindow {
    LiveWindow::ending_at(
        args.timestamptz(first).unwrap(),
        &args.interval(first + 1).unwrap(),
        args.int8(first + 2).unwrap() as f64,
    )
}

// seen_bloom._live_generation(t timestamptz, at timestamptz, window interval,
//                             generation_seconds bigint) -> int: t's generation when an
// impression at t is kept in the window ending at `at`, else NULL.
v1_function!(
    seen_bloom__live_generation,
    pg_finfo_seen_bloom__live_generation,
    |args| {
        let window = window_arguments(args, 1);
        match window.generation_of_impression(args.timestamptz(0).unwrap()) {
            Some(g) => pg_sys::Datum::from(g),
            None => args.return_null(),
        }
    }
);

// seen_bloom._oldest_live_generation(at timestamptz, window interval,
//                                    generation_seconds bigint) -> int
v1_function!(
    seen_bloom__oldest_live_generation,
    pg_finfo_seen_bloom__oldest_live_generation,
    |args| { pg_sys::Datum::from(window_arguments(args, 0).oldest_live()) }
);

#[cfg(test)]
mod tests {
    use super::{generation_of, LiveWindow};

    const DAY_US: i64 = 86_400_000_000;

    #[test]
    fn generations_split_at_whole_multiples_since_1970() {
        let day = 86_400.0;
        // 2000-01-01 00:00:00 UTC is day 10,957 since 1970.
        assert_eq!(generation_of(0, day), Some(10_957));
        assert_eq!(generation_of(-1, day), Some(10_956));
        assert_eq!(generation_of(DAY_US - 1, day), Some(10_957));
        assert_eq!(generation_of(DAY_US, day), Some(10_958));
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

    #[test]
    fn the_window_start_is_kept_and_the_moment_before_it_is_not() {
        // A window starting at noon of day 10 (6-hour generations).
        let start = 10 * DAY_US + DAY_US / 2;
        let window = LiveWindow::from_start(start, 21_600.0);
        assert!(window.generation_of_impression(start - 1).is_none());
        let first = window.generation_of_impression(start).unwrap();
        assert_eq!(first, window.oldest_live());
        // An impression at the start is in the oldest live generation, so reads see it.
        assert_eq!(generation_of(start, 21_600.0), Some(first));
        assert_eq!(window.generation_of_impression(i64::MAX), None);
    }

    #[test]
    fn the_oldest_live_generation_covers_the_start_mid_generation() {
        // Start one microsecond before a generation boundary: that generation is live.
        let boundary = 20 * DAY_US;
        let window = LiveWindow::from_start(boundary - 1, 86_400.0);
        assert_eq!(
            window.oldest_live(),
            generation_of(boundary, 86_400.0).unwrap() - 1
        );
        assert_eq!(
            window.generation_of_impression(boundary - 1),
            Some(window.oldest_live())
        );
    }

    #[test]
    fn starts_outside_int4_generations_make_all_or_nothing_live() {
        assert_eq!(
            LiveWindow::from_start(i64::MIN, 1.0).oldest_live(),
            i32::MIN
        );
        let y2040_us = (2_208_988_800 - 946_684_800) * 1_000_000;
        assert_eq!(
            LiveWindow::from_start(y2040_us, 1.0).oldest_live(),
            i32::MAX
        );
    }
}

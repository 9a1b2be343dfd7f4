//! The read path of tracked tables: `seen_bloom.unseen` and `seen_bloom.has_seen` answer from
//! the user's filter rows in the live window (see generations), read in place in pinned
//! pages (see filter_reader).

use crate::bloom::candidates::{keep_unseen, keep_unseen_counted, CandidateHashes};
use crate::pg::activity::{Counter, Tally};
use crate::pg::args::Args;
use crate::pg::errors::OrRaise;
use crate::pg::item_type::Item;
use crate::pg::v1::v1_function;
use crate::read::citus::{fetch_user_rows, placement_of, Placement};
use crate::storage::filter_reader::{FilterReader, UserRows};
use crate::storage::heap_prefetch::LinePrefetcher;
use crate::tracking::caches::config;
use crate::tracking::generations::LiveWindow;
use crate::tracking::tracked_config::TrackedConfig;
use bloom_core::{WindowView, MOVED_LAYER};
use pgrx::pg_sys;

/// The user's filter rows in the live window, in pinned pages (or fetched through Citus
/// when a distributed filter table keeps them on another node).
fn live_rows(config: &TrackedConfig, user: &Item) -> UserRows {
    // This transaction's impressions whose fold waits for the commit are folded first, and
    // read with a snapshot that sees them.
    let folded = crate::fold::commit_fold::fold_now(config.filter_table);
    let oldest = LiveWindow::now(&config.window, config.generation_seconds).oldest_live();
    let local = |filter_table| {
        FilterReader::open(filter_table, config.user_type, folded).user_rows_from(user, oldest)
    };
    if !config.distributed {
        return local(config.filter_table);
    }
    match placement_of(config.filter_table, user) {
        Placement::Local(shard) => local(shard),
        Placement::Remote => fetch_user_rows(config.filter_table, user, oldest),
    }
}

/// For each hash, whether `rows` (probably) hold it (answers for NULL candidates are the
/// caller's to discard).
fn seen_in_rows(config: &TrackedConfig, rows: &UserRows, hashes: &[u64]) -> Vec<bool> {
    let mut seen = vec![false; hashes.len()];
    mark_seen_in_rows(config, rows, hashes, &mut seen);
    seen
}

/// Sets `seen[i]` where `rows` (probably) hold `hashes[i]`; never clears a flag, so the
/// answers of several tables combine.
fn mark_seen_in_rows(config: &TrackedConfig, rows: &UserRows, hashes: &[u64], seen: &mut [bool]) {
    let marked = rows.iter().any(|(_, layer, ..)| layer == MOVED_LAYER);
    let layout = config.layout_of(marked);
    let mut view = WindowView::default();
    for (generation, layer, segment, bits) in rows.iter() {
        view.add_row(layout, generation, layer, segment, bits)
            .or_raise();
    }
    view.seal(layout).or_raise();
    view.contains_each(layout, hashes, seen);
}

/// The tracked table of argument 0 and its configuration, with the user argument 1 checked
/// against the tracked user column (`function` names the call in the error).
fn tracked(args: &Args, user: &Item, function: &str) -> (pg_sys::Oid, std::rc::Rc<TrackedConfig>) {
    let impressions = args.regclass(0).unwrap();
    let config = config(impressions);
    config.require_user_type(user.oid, impressions, function);
    (impressions, config)
}

// seen_bloom.unseen(impressions regclass, user bigint|text|uuid, candidates anyarray) -> anyarray
v1_function!(seen_bloom_unseen, pg_finfo_seen_bloom_unseen, |args| {
    if args.is_null(0) {
        return args.return_null();
    }
    let Some(candidates) = args.items(2) else {
        return args.return_null();
    };
    let Some(user) = args.item(1) else {
        // An anonymous user has seen nothing.
        let hashes = CandidateHashes::of(&candidates);
        return keep_unseen(&candidates, &hashes, |_| false);
    };
    let (impressions, config) = tracked(args, &user, "seen_bloom.unseen");
    let mut tally = Tally::start(impressions, Counter::ReadMicros);
    config.require_item_family(
        candidates.item_type,
        candidates.element_type,
        impressions,
        "seen_bloom.unseen",
    );
    // The rows first, then the candidates' hashes, with the lines of the rows' bits (which
    // the window copies next) prefetched a share at a time between pieces of hashing.
    let rows = live_rows(&config, &user);
    let ranges = rows.bit_ranges();
    let mut lines = LinePrefetcher::over(&ranges);
    let total_lines = lines.lines();
    let hashes = CandidateHashes::of_with(&candidates, |pieces| {
        lines.issue(total_lines.div_ceil(pieces));
    });
    let seen = seen_in_rows(&config, &rows, hashes.all());
    let (result, returned) = keep_unseen_counted(&candidates, &hashes, |i| seen[i]);
    let seen_count = (0..seen.len())
        .filter(|&i| seen[i] && !hashes.is_null(i))
        .count();
    tally.add(Counter::UnseenCalls, 1);
    tally.add(Counter::CandidatesIn, seen.len() as u64);
    tally.add(Counter::CandidatesSeen, seen_count as u64);
    tally.add(Counter::CandidatesReturned, returned as u64);
    result
});

// seen_bloom.has_seen(impressions regclass, user bigint|text|uuid, item anyelement) -> boolean
// (not STRICT since 0.5.0: as in unseen, a NULL user has seen nothing; a NULL table or item
// gives NULL).
v1_function!(seen_bloom_has_seen, pg_finfo_seen_bloom_has_seen, |args| {
    if args.is_null(0) {
        return args.return_null();
    }
    let Some(item) = args.item(2) else {
        return args.return_null();
    };
    let Some(user) = args.item(1) else {
        // An anonymous user has seen nothing: its feed is every candidate, as unseen gives.
        return pg_sys::Datum::from(false);
    };
    let (impressions, config) = tracked(args, &user, "seen_bloom.has_seen");
    config.require_item_family(item.item_type, item.oid, impressions, "seen_bloom.has_seen");
    let mut tally = Tally::start(impressions, Counter::ReadMicros);
    let rows = live_rows(&config, &user);
    let seen = seen_in_rows(&config, &rows, &[item.hash()]);
    tally.add(Counter::HasSeenCalls, 1);
    tally.add(Counter::CandidatesIn, 1);
    tally.add(Counter::CandidatesSeen, u64::from(seen[0]));
    tally.add(Counter::CandidatesReturned, u64::from(!seen[0]));
    pg_sys::Datum::from(seen[0])
});

/// Sets `seen[i]` for the candidates any of `tables` holds for `user`, after the checks a
/// read of each table makes, and counts each table's read (`calls`) in its activity.
struct TablesRead<'a> {
    tables: &'a [pg_sys::Oid],
    user: &'a Item,
    /// The candidates' SQL type and item type.
    candidates: (pg_sys::Oid, crate::pg::item_type::ItemType),
    calls: Counter,
    function: &'static str,
}

impl TablesRead<'_> {
    fn mark(&self, hashes: &[u64], seen: &mut [bool]) {
        for &impressions in self.tables {
            let config = config(impressions);
            config.require_user_type(self.user.oid, impressions, self.function);
            config.require_item_family(
                self.candidates.1,
                self.candidates.0,
                impressions,
                self.function,
            );
            let mut tally = Tally::start(impressions, Counter::ReadMicros);
            let rows = live_rows(&config, self.user);
            let before = seen.iter().filter(|&&s| s).count();
            mark_seen_in_rows(&config, &rows, hashes, seen);
            tally.add(self.calls, 1);
            tally.add(Counter::CandidatesIn, hashes.len() as u64);
            tally.add(
                Counter::CandidatesSeen,
                (seen.iter().filter(|&&s| s).count() - before) as u64,
            );
        }
    }
}

// seen_bloom.unseen_in(impressions regclass[], user bigint|text|uuid, candidates anyarray) ->
// anyarray: the candidates none of the tables holds for the user (the feed's impressions and
// its served log, say), hashed once, in order, as unseen of one table answers.
v1_function!(
    seen_bloom_unseen_in,
    pg_finfo_seen_bloom_unseen_in,
    |args| {
        let (Some(tables), Some(candidates)) = (args.passed(0), args.items(2)) else {
            return args.return_null();
        };
        let tables = crate::pg::item_array::regclass_elements(tables, "seen_bloom.unseen_in");
        let hashes = CandidateHashes::of(&candidates);
        let Some(user) = args.item(1) else {
            // An anonymous user has seen nothing.
            return keep_unseen(&candidates, &hashes, |_| false);
        };
        let mut seen = vec![false; hashes.all().len()];
        let read = TablesRead {
            tables: &tables,
            user: &user,
            candidates: (candidates.element_type, candidates.item_type),
            calls: Counter::UnseenCalls,
            function: "seen_bloom.unseen_in",
        };
        read.mark(hashes.all(), &mut seen);
        keep_unseen(&candidates, &hashes, |i| seen[i])
    }
);

// seen_bloom.has_seen_in(impressions regclass[], user bigint|text|uuid, item anyelement) ->
// boolean: whether any of the tables (probably) holds the item for the user.
v1_function!(
    seen_bloom_has_seen_in,
    pg_finfo_seen_bloom_has_seen_in,
    |args| {
        let (Some(tables), Some(item)) = (args.passed(0), args.item(2)) else {
            return args.return_null();
        };
        let tables = crate::pg::item_array::regclass_elements(tables, "seen_bloom.has_seen_in");
        let Some(user) = args.item(1) else {
            return pg_sys::Datum::from(false);
        };
        let mut seen = [false];
        let read = TablesRead {
            tables: &tables,
            user: &user,
            candidates: (item.oid, item.item_type),
            calls: Counter::HasSeenCalls,
            function: "seen_bloom.has_seen_in",
        };
        read.mark(&[item.hash()], &mut seen);
        pg_sys::Datum::from(seen[0])
    }
);

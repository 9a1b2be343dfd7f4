//! feed-demo: seen_bloom doing its real job. A creator marketplace (creators, posts, follows,
//! impressions) whose impressions table is tracked with `seen_bloom.track`; simulated users
//! open the app over simulated days, each feed request over-fetches candidates from several
//! pools and filters them with `seen_bloom.unseen_in` in one query, against the impressions and
//! a served log of the pages just served (tracked with a window of one simulated day), the
//! client reports only what was visible, in multi-row batches, and the 30-day window rolls so
//! old posts come back.
//! At the end it checks in SQL that nothing visible was served again within the window and
//! prints what it measured. Exits non-zero on any re-serve or false negative.
//!
//! # The clock
//!
//! seen_bloom judges the window against the server's clock: an impression counts in the
//! generation of its `seen_at`, rows older than `now() - window` are not folded in, and
//! `unseen` reads the generations from `floor((now() - window) / generation)` on, with
//! `now()` the transaction start (src/tracking.rs, `seen_in_window`; the fold, src/fold_trigger.rs
//! and sql/tracking.sql `_fold_query`). The server's clock cannot be moved, so simulated days whose timestamps
//! merely end at the real now() would not work: the impressions of every simulated day more
//! than 30 days before now() would be dropped at insert, and the window would never roll
//! during the run, because the server's now() hardly moves. So the demo compresses time
//! instead: one simulated day lasts `--day-seconds` real seconds (3 by default), the window is
//! tracked as 30 such days (`"window" => 90 seconds`), and every timestamp (posts'
//! `created_at`, impressions' `seen_at`, the moment a page is served) is the server's own
//! clock. The extension runs exactly its production code path, the window really rolls
//! (a simulated 6-day generation is 18 s), and the re-serve check uses the same clock as
//! the filter. Day 0 starts at a generation boundary (a whole number of generation lengths
//! since the epoch), so every run groups the same days into generations; day d starts d day
//! lengths later and the demo waits for it. A day whose work overruns its slot is reported
//! (results then may differ slightly between runs; correctness does not depend on it).

mod db;
mod world;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use postgres::{Client, NoTls, Statement};
use rand::seq::SliceRandom;
use rand::RngExt;
use std::collections::{HashMap, HashSet};
use std::io::IsTerminal;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};
use world::{user_day, UserDay, World, HISTORY_DAYS};

use db::{time_of, us_of, Result};

/// Simulated days in the window.
const WINDOW_DAYS: i64 = 30;
/// Items per feed page.
const PAGE: usize = 20;
/// Page slots per pool, in fallback order: followed creators' recent posts, trending,
/// discovery (recent posts from the recommendation side), explore (posts older than 14 days).
const QUOTAS: [usize; 4] = [10, 5, 3, 2];
/// Candidates drawn by the recommendation side per request, discovery and explore.
const DRAWN: usize = 40;
/// Users whose pages are requested before one flush of their impressions.
const GROUP: usize = 25;
/// Simulated days in the served log's window (in 2 generations): a page is not served again
/// for one to one and a half days, visible or not.
const SERVED_DAYS: f64 = 1.0;

#[derive(Parser, Debug)]
#[command(
    version,
    about = "A creator-marketplace feed simulated against seen_bloom's impression tracking",
    long_about = "A creator-marketplace feed simulated against seen_bloom's impression tracking.\n\
        Creates the schema feed_demo in the target database (dropping an earlier run's), \
        simulates users over simulated days and prints a summary. Exits non-zero if anything \
        visible was served again within the window.\n\
        Run through scripts/demo.sh, which starts a throwaway cluster unless --dsn is given \
        (and takes --walkthrough for the short SQL tour instead)."
)]
struct Args {
    /// Simulated users
    #[arg(long, default_value_t = 1000)]
    users: u64,
    /// Simulated days (the window is 30 of them; posts seen in the first days come back after about 36)
    #[arg(long, default_value_t = 45)]
    days: u32,
    /// Seed of every random choice (same seed, same flags: same run, as long as no day overruns)
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Server to run against (libpq key=value or URL); seen_bloom must be installed there
    #[arg(
        long,
        default_value = "host=127.0.0.1 port=25490 user=postgres dbname=postgres"
    )]
    dsn: String,
    /// Real seconds per simulated day, a multiple of 0.5 (the tracked window is 30 of them)
    #[arg(long, default_value_t = 3.0)]
    day_seconds: f64,
    /// Creators (default: users / 4, at least 20)
    #[arg(long)]
    creators: Option<u64>,
    /// Client connections simulating users in parallel
    #[arg(long, default_value_t = 2)]
    clients: usize,
}

/// What one simulated day looks like to the feed.
#[derive(Clone)]
struct Day {
    index: i64,
    /// Posts created after this are in the followed pool (the last 7 days).
    followed_since: SystemTime,
    /// Discovery draws from the posts of the last 14 days, explore from the older ones.
    discovery: Range<i64>,
    explore: Range<i64>,
    window_s: f64,
    generation_s: f64,
    served_window_s: f64,
    served_generation_s: f64,
    /// Day 0 starts at start_us; a day lasts day_us (microseconds on the server's clock).
    start_us: i64,
    day_us: i64,
}

#[derive(Default, Clone)]
struct Metrics {
    pages: u64,
    fallback_pages: u64,
    underfilled_pages: u64,
    served: u64,
    candidates: u64,
    candidates_unseen_truth: u64,
    false_positives: u64,
    false_negatives: u64,
    repeats_filtered: u64,
    /// Candidates dropped only because the served log holds them (served, not visible).
    served_filtered: u64,
    /// Pages after a user's first of the day, and the items of those that the user's
    /// previous page had (the re-serve rate within a session: must be 0).
    followup_pages: u64,
    reserved_from_previous: u64,
    held_by_generation: u64,
    impressions: u64,
    batches: u64,
    insert_time: Duration,
    wal_bytes: i64,
}

impl Metrics {
    fn add(&mut self, o: &Metrics) {
        self.pages += o.pages;
        self.fallback_pages += o.fallback_pages;
        self.underfilled_pages += o.underfilled_pages;
        self.served += o.served;
        self.candidates += o.candidates;
        self.candidates_unseen_truth += o.candidates_unseen_truth;
        self.false_positives += o.false_positives;
        self.false_negatives += o.false_negatives;
        self.repeats_filtered += o.repeats_filtered;
        self.served_filtered += o.served_filtered;
        self.followup_pages += o.followup_pages;
        self.reserved_from_previous += o.reserved_from_previous;
        self.held_by_generation += o.held_by_generation;
        self.impressions += o.impressions;
        self.batches += o.batches;
        self.insert_time += o.insert_time;
        self.wal_bytes += o.wal_bytes;
    }
}

/// Counters the progress display reads while the workers run.
#[derive(Default)]
struct Live {
    pages: AtomicU64,
    impressions: AtomicU64,
}

/// One client connection and the users it simulates.
struct Worker {
    db: Client,
    feed: Statement,
    flush: Statement,
    log_served: Statement,
    users: Vec<u64>,
    /// The exact truth: per user, the latest time each post was visible to them.
    seen: HashMap<u64, HashMap<i64, i64>>,
    /// Per user, the latest time each post was served (the served log's truth).
    served_at: HashMap<u64, HashMap<i64, i64>>,
    /// Per user, the day and items of the last page served.
    previous_page: HashMap<u64, (i64, Vec<i64>)>,
    /// Every served page item: (user, post, served at, microseconds since the epoch).
    served: Vec<(i64, i64, i64)>,
    feed_us: Vec<u32>,
    m: Metrics,
    pending: Pending,
    pending_served: Pending,
}

#[derive(Default)]
struct Pending {
    users: Vec<i64>,
    posts: Vec<i64>,
    at: Vec<SystemTime>,
    watch: Vec<f32>,
}

impl Worker {
    fn connect(dsn: &str, users: Vec<u64>) -> Result<Worker> {
        let mut db = Client::connect(dsn, NoTls)?;
        let feed = db::prepare_feed(&mut db)?;
        let flush = db::prepare_flush(&mut db)?;
        let log_served = db::prepare_served(&mut db)?;
        Ok(Worker {
            db,
            feed,
            flush,
            log_served,
            users,
            seen: HashMap::new(),
            served_at: HashMap::new(),
            previous_page: HashMap::new(),
            served: Vec::new(),
            feed_us: Vec::new(),
            m: Metrics::default(),
            pending: Pending::default(),
            pending_served: Pending::default(),
        })
    }

    /// The day of this worker's users: groups of users scroll page by page, and after each
    /// round the client flushes the group's visible impressions in one INSERT, so a user's
    /// impressions are in before their next request.
    fn run_day(&mut self, world: &World, day: &Day, live: &Live, wal: &Mutex<()>) -> Result<()> {
        let mut plans: Vec<UserDay> = self
            .users
            .iter()
            .filter_map(|&u| user_day(world, u, day.index))
            .collect();
        for group in plans.chunks_mut(GROUP) {
            loop {
                let mut any = false;
                for plan in group.iter_mut().filter(|p| p.pages > 0) {
                    plan.pages -= 1;
                    any = true;
                    self.page(plan, day)?;
                    live.pages.fetch_add(1, Ordering::Relaxed);
                }
                live.impressions
                    .fetch_add(self.pending.users.len() as u64, Ordering::Relaxed);
                self.flush(wal)?;
                if !any {
                    break;
                }
            }
        }
        Ok(())
    }

    /// One feed request: the pools and seen_bloom.unseen_in in one query, a page of 20 built
    /// from the pools' quotas (a pool that underfills hands its slots to the next ones), the
    /// part the user scrolls past recorded as impressions.
    fn page(&mut self, plan: &mut UserDay, day: &Day) -> Result<()> {
        let r = &mut plan.rng;
        let user = plan.user as i64;
        let discovery: Vec<i64> = (0..DRAWN)
            .map(|_| r.random_range(day.discovery.clone()))
            .collect();
        let explore: Vec<i64> = if day.explore.is_empty() {
            Vec::new()
        } else {
            (0..DRAWN)
                .map(|_| r.random_range(day.explore.clone()))
                .collect()
        };

        let started = Instant::now();
        let row = db::feed(
            &mut self.db,
            &self.feed,
            user,
            day.followed_since,
            &discovery,
            &explore,
        )?;
        self.feed_us
            .push(started.elapsed().as_micros().min(u32::MAX as u128) as u32);
        let now_us = us_of(row.now);

        // Score seen_bloom's answer against the exact truth, with its own rule for what is
        // live: generations from floor((now - window) / generation) on, in each table.
        let live = |at_us: Option<i64>, window_s: f64, generation_s: f64| {
            let from = ((now_us as f64 / 1e6 - window_s) / generation_s).floor() as i64;
            at_us.is_some_and(|t| ((t as f64 / 1e6) / generation_s).floor() as i64 >= from)
        };
        let unseen: HashSet<i64> = row.unseen.iter().copied().collect();
        let truth = self.seen.entry(plan.user).or_default();
        let served_truth = self.served_at.entry(plan.user).or_default();
        let pools: [&[i64]; 4] = [&row.followed, &row.trending, &discovery, &explore];
        let mut distinct = HashSet::new();
        for &c in pools.iter().flat_map(|p| p.iter()) {
            if !distinct.insert(c) {
                continue;
            }
            self.m.candidates += 1;
            let kept = unseen.contains(&c);
            let last_seen = truth.get(&c).copied();
            let seen_live = live(last_seen, day.window_s, day.generation_s);
            let served_live = live(
                served_truth.get(&c).copied(),
                day.served_window_s,
                day.served_generation_s,
            );
            match (seen_live || served_live, kept) {
                (true, true) => self.m.false_negatives += 1,
                (true, false) if !seen_live => self.m.served_filtered += 1,
                (true, false) => {
                    self.m.repeats_filtered += 1;
                    let seen_day = (last_seen.unwrap() - day.start_us).div_euclid(day.day_us);
                    if day.index - seen_day >= WINDOW_DAYS {
                        self.m.held_by_generation += 1;
                    }
                }
                (false, kept) => {
                    self.m.candidates_unseen_truth += 1;
                    if !kept {
                        self.m.false_positives += 1;
                    }
                }
            }
        }

        let mut page: Vec<i64> = Vec::with_capacity(PAGE);
        let mut used = HashSet::new();
        let mut take = |pool: &[i64], n: usize, page: &mut Vec<i64>| {
            for &c in pool {
                if page.len() >= n {
                    break;
                }
                if unseen.contains(&c) && used.insert(c) {
                    page.push(c);
                }
            }
        };
        // Each pool fills its slots; a pool that falls short hands the rest to the next one,
        // and what the last one cannot fill goes back to whichever pool has candidates left.
        let mut carry = 0;
        let mut fell_short = false;
        for (pool, quota) in pools.iter().zip(QUOTAS) {
            let want = quota + carry;
            let before = page.len();
            take(pool, before + want, &mut page);
            carry = want - (page.len() - before);
            fell_short |= carry > 0;
        }
        if page.len() < PAGE {
            for pool in pools {
                take(pool, PAGE, &mut page);
            }
        }
        if fell_short {
            self.m.fallback_pages += 1;
        }
        if page.len() < PAGE {
            self.m.underfilled_pages += 1;
        }
        self.m.pages += 1;
        self.m.served += page.len() as u64;
        // The re-serve rate within a session: items of the user's previous page this day.
        if let Some((previous_day, previous)) = self.previous_page.get(&plan.user) {
            if *previous_day == day.index {
                self.m.followup_pages += 1;
                self.m.reserved_from_previous +=
                    page.iter().filter(|c| previous.contains(c)).count() as u64;
            }
        }
        self.previous_page
            .insert(plan.user, (day.index, page.clone()));

        // The client shows the page in ranked (here: shuffled) order; the user scrolls past
        // 20% to 100% of it, and only what crossed the viewport is an impression.
        page.shuffle(r);
        let visible = (page.len() as f64 * r.random_range(0.2..=1.0)).round() as usize;
        for (i, &post) in page.iter().enumerate() {
            self.served.push((user, post, now_us));
            served_truth.insert(post, now_us);
            self.pending_served.users.push(user);
            self.pending_served.posts.push(post);
            self.pending_served.at.push(row.now);
            if i < visible {
                self.pending.users.push(user);
                self.pending.posts.push(post);
                self.pending.at.push(row.now);
                self.pending.watch.push(r.random_range(0.05f32..=1.0));
                truth.insert(post, now_us);
            }
        }
        Ok(())
    }

    /// One multi-row INSERT of the pending impressions (the tracking trigger folds them into
    /// the filter rows in the same statement). WAL is measured around it under a lock, so
    /// the other connection's flushes do not land in this one's figure.
    fn flush(&mut self, wal: &Mutex<()>) -> Result<()> {
        // The round's pages into the served log first (outside the WAL figure, which is the
        // impressions'): each user's next request is in the next round.
        if !self.pending_served.users.is_empty() {
            let s = std::mem::take(&mut self.pending_served);
            self.db
                .execute(&self.log_served, &[&s.users, &s.posts, &s.at])?;
        }
        if self.pending.users.is_empty() {
            return Ok(());
        }
        let p = std::mem::take(&mut self.pending);
        let _guard = wal.lock().unwrap_or_else(|e| e.into_inner());
        let before = db::wal_position(&mut self.db)?;
        let started = Instant::now();
        self.db
            .execute(&self.flush, &[&p.users, &p.posts, &p.at, &p.watch])?;
        self.m.insert_time += started.elapsed();
        self.m.wal_bytes += db::wal_position(&mut self.db)? - before;
        self.m.batches += 1;
        self.m.impressions += p.users.len() as u64;
        Ok(())
    }
}

fn main() {
    let args = Args::parse();
    match run(&args) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("feed-demo: {e}");
            std::process::exit(2);
        }
    }
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

fn run(args: &Args) -> Result<bool> {
    if args.users == 0 || args.days == 0 || args.clients == 0 {
        return Err("--users, --days and --clients must be positive".into());
    }
    if args.day_seconds < 0.5 || (args.day_seconds * 2.0).fract() != 0.0 {
        return Err(
            "--day-seconds must be a multiple of 0.5 (so a 6-day generation is whole seconds)"
                .into(),
        );
    }
    let tty = std::io::stderr().is_terminal();
    let day_us = (args.day_seconds * 1e6) as i64;
    let window_s = WINDOW_DAYS as f64 * args.day_seconds;
    let creators = args.creators.unwrap_or((args.users / 4).max(20));

    println!(
        "feed-demo: {} users, {} creators, {} simulated days of {} s (window: 30 days = {} s), seed {}, {} client connections",
        thousands(args.users), thousands(creators), args.days, args.day_seconds, window_s, args.seed, args.clients
    );

    // ---- schema and the world
    let mut db = Client::connect(&args.dsn, NoTls)?;
    let server: String = db.query_one("SHOW server_version", &[])?.get(0);
    db::create_schema(&mut db)?;
    let served_window_s = SERVED_DAYS * args.day_seconds;
    let (generation_s, served_generation_s) = db::track(&mut db, window_s, served_window_s)?;
    println!(
        "  PostgreSQL {server}; schema feed_demo created; impressions tracked: window {window_s} s, generations of {generation_s} s; served log: window {served_window_s} s, generations of {served_generation_s} s"
    );
    let mut world = World::new(args.seed, args.users, creators);
    db::insert_creators(&mut db, creators as usize)?;
    let (mut fu, mut fc) = (Vec::new(), Vec::new());
    for u in 1..=args.users {
        for c in world.follows(u) {
            fu.push(u as i64);
            fc.push(c);
        }
    }
    db::insert_follows(&mut db, &fu, &fc)?;

    // Day d starts at start_us + d * day_us; day 0 at the next generation boundary (a whole
    // multiple of the generation length since the epoch, at least a second away), so every
    // run groups the same simulated days into a generation (same seed, same run).
    let generation_us = generation_s * 1_000_000;
    let now_us = us_of(SystemTime::now());
    let start_us = ((now_us + 1_000_000) / generation_us + 1) * generation_us;
    let day_start = |d: i64| time_of(start_us + d * day_us);
    let add_posts = |world: &mut World, db: &mut Client, d: i64| -> Result<usize> {
        let posts = world.new_posts(d);
        let ids: Vec<i64> = posts.iter().map(|p| p.0).collect();
        let by: Vec<i64> = posts.iter().map(|p| p.1).collect();
        // Created just before the day starts, in id order.
        let at: Vec<SystemTime> = (0..posts.len())
            .map(|i| time_of(start_us + d * day_us - 1000 - (posts.len() - i) as i64))
            .collect();
        db::insert_posts(db, &ids, &by, &at)?;
        Ok(posts.len())
    };
    let mut catalogue = 0;
    for d in -HISTORY_DAYS..0 {
        catalogue += add_posts(&mut world, &mut db, d)?;
    }
    println!(
        "  {} follows, {} posts from the {} days before day 0",
        thousands(fu.len() as u64),
        thousands(catalogue as u64),
        HISTORY_DAYS
    );

    let mut workers: Vec<Worker> = (0..args.clients)
        .map(|w| {
            let users = (1..=args.users)
                .filter(|u| (u % args.clients as u64) as usize == w)
                .collect();
            Worker::connect(&args.dsn, users)
        })
        .collect::<Result<_>>()?;

    // ---- the simulation
    let bar = ProgressBar::new(args.days as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "  {spinner} day {pos:>3}/{len} [{bar:30}] {elapsed_precise} {msg}",
        )?
        .progress_chars("=> "),
    );
    if !tty {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let live = Live::default();
    let wal_lock = Mutex::new(());
    let mut overruns = 0u32;
    let mut worst_lag = Duration::ZERO;
    let mut expired = 0i64;
    let mut busy = Duration::ZERO;
    let sim_started = Instant::now();
    let mut posts_total = catalogue;
    for d in 0..args.days as i64 {
        // Wait for the day's moment on the real clock.
        if let Ok(wait) = day_start(d).duration_since(SystemTime::now()) {
            if d == 0 {
                println!(
                    "  day 0 starts at the next generation boundary, in {:.1} s",
                    wait.as_secs_f64()
                );
            }
            bar.set_message("waiting for the clock");
            std::thread::sleep(wait);
        } else if d > 0 {
            let lag = SystemTime::now()
                .duration_since(day_start(d))
                .unwrap_or_default();
            overruns += 1;
            worst_lag = worst_lag.max(lag);
        }
        let day_began = Instant::now();
        posts_total += add_posts(&mut world, &mut db, d)?;
        db::refresh_trending(&mut db, day_start(d - 2))?;
        expired += db::expire(&mut db, served_window_s)?;
        let day = Day {
            index: d,
            followed_since: day_start(d - 7),
            discovery: world.posts_since(d - 13),
            explore: world.posts_since(-HISTORY_DAYS).start..world.posts_since(d - 13).start,
            window_s,
            generation_s: generation_s as f64,
            served_window_s,
            served_generation_s: served_generation_s as f64,
            start_us,
            day_us,
        };
        let world_ref = &world;
        let results: Vec<Result<()>> = std::thread::scope(|s| {
            let handles: Vec<_> = workers
                .iter_mut()
                .map(|w| {
                    let (day, live, wal) = (&day, &live, &wal_lock);
                    s.spawn(move || w.run_day(world_ref, day, live, wal))
                })
                .collect();
            while !handles.iter().all(|h| h.is_finished()) {
                bar.set_message(format!(
                    "{} pages, {} impressions",
                    thousands(live.pages.load(Ordering::Relaxed)),
                    thousands(live.impressions.load(Ordering::Relaxed))
                ));
                std::thread::sleep(Duration::from_millis(100));
            }
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a worker panicked".into())))
                .collect()
        });
        results.into_iter().collect::<Result<Vec<()>>>()?;
        busy += day_began.elapsed();
        bar.inc(1);
        if !tty && ((d + 1) % 5 == 0 || d + 1 == args.days as i64) {
            println!(
                "  day {:>3}/{}: {} pages, {} impressions, {:.0} s",
                d + 1,
                args.days,
                thousands(live.pages.load(Ordering::Relaxed)),
                thousands(live.impressions.load(Ordering::Relaxed)),
                sim_started.elapsed().as_secs_f64()
            );
        }
    }
    // The last day ends at its slot; a late finish is an overrun too.
    if let Ok(lag) = SystemTime::now().duration_since(day_start(args.days as i64)) {
        if lag > Duration::ZERO {
            overruns += 1;
            worst_lag = worst_lag.max(lag);
        }
    }
    bar.finish_with_message("done");
    let sim_elapsed = sim_started.elapsed();

    // ---- the checks
    println!("  checking: loading the served log, re-serve check in SQL, sizes ...");
    let mut m = Metrics::default();
    let mut feed_us: Vec<u32> = Vec::new();
    let mut served = Vec::new();
    for w in &mut workers {
        m.add(&w.m);
        feed_us.append(&mut w.feed_us);
        served.append(&mut w.served);
    }
    feed_us.sort_unstable();
    db.batch_execute(
        "CREATE TABLE feed_demo.served_all (user_id bigint NOT NULL, post_id bigint NOT NULL, served_at timestamptz NOT NULL);
         SET work_mem = '128MB';",
    )?;
    for chunk in served.chunks(100_000) {
        let u: Vec<i64> = chunk.iter().map(|s| s.0).collect();
        let p: Vec<i64> = chunk.iter().map(|s| s.1).collect();
        let t: Vec<SystemTime> = chunk.iter().map(|s| time_of(s.2)).collect();
        db.execute(
            "INSERT INTO feed_demo.served_all SELECT * FROM unnest($1::int8[], $2::int8[], $3::timestamptz[])",
            &[&u, &p, &t],
        )?;
    }
    drop(served);
    // Each served item against the latest earlier impression of the same (user, post).
    let row = db.query_one(
        "SELECT count(*),
                count(*) FILTER (WHERE last_seen >= served_at - make_interval(secs => $1)),
                count(*) FILTER (WHERE last_seen < served_at - make_interval(secs => $1))
         FROM (SELECT s.served_at, max(i.seen_at) AS last_seen
               FROM feed_demo.served_all s
               LEFT JOIN feed_demo.impressions i
                 ON i.user_id = s.user_id AND i.post_id = s.post_id AND i.seen_at < s.served_at
               GROUP BY s.user_id, s.post_id, s.served_at) x",
        &[&window_s],
    )?;
    let (served_total, reserved, reshown): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));

    let stats = db.query_one(
        "SELECT users, total_bytes, bytes_per_user_mean, bytes_per_user_max, saturated_generations, estimated_fpr_max
         FROM seen_bloom.stats('feed_demo.impressions')",
        &[],
    )?;
    let (filter_users, filter_total, filter_mean, filter_max, saturated, fpr_max): (
        i64,
        i64,
        f64,
        i64,
        i64,
        f64,
    ) = (
        stats.get(0),
        stats.get(1),
        stats.get(2),
        stats.get(3),
        stats.get(4),
        stats.get(5),
    );
    // The filter rows themselves (the table above also holds dead row versions and its index).
    let rows_per_user: f64 = db
        .query_one(
            "SELECT coalesce(sum(pg_column_size(f.*))::float8 / greatest(count(DISTINCT f.user_key), 1), 0)
             FROM feed_demo.impressions_seen f",
            &[],
        )?
        .get(0);
    // The exact alternative: an index on impressions(user_id, post_id) over the same window.
    db.batch_execute(&format!(
        "DO $$ BEGIN EXECUTE format('CREATE INDEX impressions_exact ON feed_demo.impressions (user_id, post_id) WHERE seen_at >= %L',
                                    now() - make_interval(secs => {window_s})); END $$"
    ))?;
    let exact = db.query_one(
        "SELECT pg_relation_size('feed_demo.impressions_exact'),
                (SELECT count(DISTINCT user_id) FROM feed_demo.impressions WHERE seen_at >= now() - make_interval(secs => $1)),
                pg_total_relation_size('feed_demo.impressions') - pg_relation_size('feed_demo.impressions_exact')",
        &[&window_s],
    )?;
    let (exact_bytes, window_users, log_bytes): (i64, i64, i64) =
        (exact.get(0), exact.get(1), exact.get(2));

    // What the server counted (src/activity.rs), when it preloads seen_bloom.
    let activity = db
        .query_opt(
            "SELECT unseen_calls, candidates_seen, coalesce(seen_share, 0)::float8, read_ms::float8, folds, impressions_folded
             FROM seen_bloom.activity WHERE impressions = 'feed_demo.impressions'::regclass",
            &[],
        )?
        .map(|r| {
            let (calls, seen, share, read_ms, folds, folded): (i64, i64, f64, f64, i64, i64) =
                (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5));
            (calls, seen, share, read_ms, folds, folded)
        });

    // ---- the summary
    let ok = reserved == 0 && m.false_negatives == 0 && m.reserved_from_previous == 0;
    let n = |x: f64| thousands(x.round().max(0.0) as u64);
    let redis_bytes = 164.0 * 1024.0;
    let per_day = busy.as_secs_f64() / f64::from(args.days);
    println!();
    println!(
        "Summary: seed {}, {} users, {} creators, {} days of {} s, {} connections, PostgreSQL {server}",
        args.seed, n(args.users as f64), n(creators as f64), args.days, args.day_seconds, args.clients
    );
    let line = |what: &str, text: String| println!("  {what:<22}{text}");
    line("simulated", format!(
        "{} feed requests, {} items served, {} impressions, {} posts in {:.0} s (work {:.2} s per {} s day)",
        n(m.pages as f64), n(m.served as f64), n(m.impressions as f64), n(posts_total as f64),
        sim_elapsed.as_secs_f64(), per_day, args.day_seconds));
    line("re-serve rate", format!(
        "{:.4}%: {} of {} served items had been visible to the user within the window (SQL over feed_demo.impressions)",
        pct(reserved as u64, served_total as u64), n(reserved as f64), n(served_total as f64)));
    line(
        "session re-serve",
        format!(
            "{:.4}%: {} items of {} follow-up pages were on the user's previous page (the served log, docs/FEED.md); {} candidates served but not visible were held back by it",
            pct(m.reserved_from_previous, m.followup_pages * PAGE as u64),
            n(m.reserved_from_previous as f64),
            n(m.followup_pages as f64),
            n(m.served_filtered as f64)
        ),
    );
    line(
        "back after window",
        format!(
            "{} served items had last been visible more than 30 days before (the window rolled)",
            n(reshown as f64)
        ),
    );
    line(
        "repeats filtered",
        format!(
        "{} candidates the user had seen were dropped by seen_bloom.unseen_in ({:.1}% of candidates)",
        n(m.repeats_filtered as f64), pct(m.repeats_filtered, m.candidates)),
    );
    match &activity {
        Some((calls, seen, share, read_ms, folds, folded)) => line(
            "filter share",
            format!(
                "{:.1}% of candidates removed as seen, {:.1} per request (seen_bloom.activity: {} unseen calls, {:.3} ms each in the server; {} folds of {} impressions)",
                share * 100.0, *seen as f64 / (*calls).max(1) as f64, n(*calls as f64),
                read_ms / (*calls).max(1) as f64, n(*folds as f64), n(*folded as f64)),
        ),
        None => line(
            "filter share",
            "seen_bloom.activity is empty: the server does not have seen_bloom in shared_preload_libraries".into(),
        ),
    }
    line("underfill rate", format!(
        "{:.2}% of pages had fewer than {PAGE} items; on {:.1}% a pool fell short and the next one filled in",
        pct(m.underfilled_pages, m.pages), pct(m.fallback_pages, m.pages)));
    line("false-positive rate", format!(
        "{:.3}%: {} of {} candidates the user had neither seen nor been served were dropped (exact truth; target 1% per table)",
        pct(m.false_positives, m.candidates_unseen_truth), n(m.false_positives as f64), n(m.candidates_unseen_truth as f64)));
    line(
        "false negatives",
        format!("{} seen candidates kept", m.false_negatives),
    );
    line(
        "generation rounding",
        format!(
        "{} dropped candidates had last been seen 30 or more simulated days before (6-day generations expire whole)",
        n(m.held_by_generation as f64)),
    );
    line("feed query", format!(
        "p50 {:.2} ms, p99 {:.2} ms: pools + seen_bloom.unseen_in over {:.0} candidates and two tables, one statement, client side",
        percentile(&feed_us, 0.50), percentile(&feed_us, 0.99), m.candidates as f64 / m.pages.max(1) as f64));
    line(
        "ingest",
        format!(
        "{} impressions/s inside INSERT, tracking trigger included ({} batches, {:.0} rows each)",
        n(m.impressions as f64 / m.insert_time.as_secs_f64().max(1e-9)), n(m.batches as f64),
        m.impressions as f64 / m.batches.max(1) as f64),
    );
    line(
        "WAL per impression",
        format!(
            "{} B (pg_current_wal_insert_lsn before and after each batch)",
            n(m.wal_bytes as f64 / m.impressions.max(1) as f64)
        ),
    );
    line("filter per user", format!(
        "{} B: seen_bloom.stats ({} B over {} users, table and index); the rows alone {} B, largest user {} B; estimated FPR max {:.3}%",
        n(filter_mean), n(filter_total as f64), n(filter_users as f64), n(rows_per_user), n(filter_max as f64), fpr_max * 100.0));
    if saturated > 0 {
        line("", format!("{saturated} saturated generations"));
    }
    line(
        "RedisBloom",
        format!(
        "~164 KB per user (BF.RESERVE seen:u 0.01 100000, whatever it holds): {:.1}x the filter",
        redis_bytes / filter_mean.max(1.0)),
    );
    line("exact alternative", format!(
        "{} B per user: an index on impressions(user_id, post_id) over the window ({:.1}x the filter); the log itself {} B per user",
        n(exact_bytes as f64 / window_users.max(1) as f64),
        exact_bytes as f64 / window_users.max(1) as f64 / filter_mean.max(1.0),
        n(log_bytes as f64 / args.users as f64)));
    line("clock", format!(
        "{} of {} days overran their slot (worst by {:.1} s); {} expired filter rows reclaimed by seen_bloom.expire",
        overruns, args.days, worst_lag.as_secs_f64(), n(expired as f64)));
    if ok {
        println!("\nOK: re-serve rate 0, nothing visible came back within the window, and no page repeated the previous one.");
    } else {
        println!(
            "\nFAILED: {reserved} re-serves within the window, {} items repeated from the previous page, {} false negatives.",
            m.reserved_from_previous, m.false_negatives
        );
    }
    Ok(ok)
}

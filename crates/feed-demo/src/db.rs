//! The SQL the demo runs: the schema, the feed query, the impression flush and the checks.
//! Everything lives in the schema `feed_demo`, so `--dsn` can point at a database that holds
//! other things.

use postgres::{Client, Statement};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Microseconds since the Unix epoch.
pub fn us_of(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .expect("time after 1970")
        .as_micros() as i64
}

pub fn time_of(us: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(us as u64)
}

/// Drops an earlier run's schema (untracking its impressions first) and creates the tables.
pub fn create_schema(db: &mut Client) -> Result<()> {
    db.batch_execute(
        "SET client_min_messages = warning;
         CREATE EXTENSION IF NOT EXISTS seen_bloom;
         SELECT seen_bloom.untrack(impressions) FROM seen_bloom.tracked
          WHERE impressions IN (pg_catalog.to_regclass('feed_demo.impressions'),
                                pg_catalog.to_regclass('feed_demo.served'));
         DROP SCHEMA IF EXISTS feed_demo CASCADE;
         CREATE SCHEMA feed_demo;
         CREATE TABLE feed_demo.creators (id bigint PRIMARY KEY, name text NOT NULL);
         CREATE TABLE feed_demo.posts (
             id bigint PRIMARY KEY,
             creator_id bigint NOT NULL REFERENCES feed_demo.creators,
             created_at timestamptz NOT NULL);
         CREATE INDEX posts_by_creator ON feed_demo.posts (creator_id, created_at DESC);
         CREATE TABLE feed_demo.follows (
             user_id bigint NOT NULL,
             creator_id bigint NOT NULL REFERENCES feed_demo.creators,
             PRIMARY KEY (user_id, creator_id));
         -- The durable impression log: one row per post that was actually visible.
         CREATE TABLE feed_demo.impressions (
             user_id bigint NOT NULL,
             post_id bigint NOT NULL,
             seen_at timestamptz NOT NULL,
             watch_pct real NOT NULL);
         CREATE INDEX impressions_seen_at ON feed_demo.impressions USING brin (seen_at);
         -- The served log (docs/FEED.md): every item of every page served, visible or not,
         -- kept for a short window so that the next page cannot repeat this one.
         CREATE TABLE feed_demo.served (
             user_id bigint NOT NULL,
             post_id bigint NOT NULL,
             served_at timestamptz NOT NULL);
         CREATE TABLE feed_demo.trending (rank int PRIMARY KEY, post_id bigint NOT NULL);",
    )?;
    Ok(())
}

/// Tracks the impressions with a window of `window_seconds` and the served log with one of
/// `served_seconds` in 2 generations; returns the generation lengths in seconds that
/// seen_bloom chose for each.
pub fn track(db: &mut Client, window_seconds: f64, served_seconds: f64) -> Result<(i64, i64)> {
    // No "where" predicate: every visible impression counts, so nothing visible may return
    // within the window.
    db.execute(
        "SELECT seen_bloom.track('feed_demo.impressions', 'user_id', 'post_id', 'seen_at',
                                 \"window\" => make_interval(secs => $1))",
        &[&window_seconds],
    )?;
    db.execute(
        "SELECT seen_bloom.track('feed_demo.served', 'user_id', 'post_id', 'served_at',
                                 \"window\" => make_interval(secs => $1), generations => 2)",
        &[&served_seconds],
    )?;
    // seen_bloom.activity counts this run only (nothing when the server does not preload
    // seen_bloom: the summary says so).
    db.execute(
        "SELECT seen_bloom.activity_reset('feed_demo.impressions')",
        &[],
    )?;
    let row = db.query_one(
        "SELECT (SELECT generation_seconds FROM seen_bloom.tracked
                 WHERE impressions = 'feed_demo.impressions'::regclass),
                (SELECT generation_seconds FROM seen_bloom.tracked
                 WHERE impressions = 'feed_demo.served'::regclass)",
        &[],
    )?;
    Ok((row.get(0), row.get(1)))
}

pub fn insert_creators(db: &mut Client, n: usize) -> Result<()> {
    db.execute(
        "INSERT INTO feed_demo.creators SELECT i, 'creator ' || i FROM generate_series(1, $1::int8) i",
        &[&(n as i64)],
    )?;
    Ok(())
}

pub fn insert_follows(db: &mut Client, users: &[i64], creators: &[i64]) -> Result<()> {
    db.execute(
        "INSERT INTO feed_demo.follows SELECT * FROM unnest($1::int8[], $2::int8[])",
        &[&users, &creators],
    )?;
    Ok(())
}

pub fn insert_posts(
    db: &mut Client,
    ids: &[i64],
    creators: &[i64],
    at: &[SystemTime],
) -> Result<()> {
    db.execute(
        "INSERT INTO feed_demo.posts SELECT * FROM unnest($1::int8[], $2::int8[], $3::timestamptz[])",
        &[&ids, &creators, &at],
    )?;
    Ok(())
}

/// Today's trending pool: the 200 posts with the most impressions since `since`.
pub fn refresh_trending(db: &mut Client, since: SystemTime) -> Result<()> {
    let mut tx = db.transaction()?;
    tx.execute("DELETE FROM feed_demo.trending", &[])?;
    tx.execute(
        "INSERT INTO feed_demo.trending (rank, post_id)
         SELECT row_number() OVER (ORDER BY count(*) DESC, post_id), post_id
         FROM feed_demo.impressions WHERE seen_at >= $1
         GROUP BY post_id ORDER BY count(*) DESC, post_id LIMIT 200",
        &[&since],
    )?;
    tx.commit()?;
    Ok(())
}

/// Deletes the filter rows of generations that left the window, and the served log's rows
/// past twice its window (nothing reads them); returns the filter rows deleted.
pub fn expire(db: &mut Client, served_seconds: f64) -> Result<i64> {
    db.execute(
        "DELETE FROM feed_demo.served WHERE served_at < now() - make_interval(secs => $1::float8 * 2)",
        &[&served_seconds],
    )?;
    Ok(db
        .query_one(
            "SELECT seen_bloom.expire('feed_demo.impressions') + seen_bloom.expire('feed_demo.served')",
            &[],
        )?
        .get(0))
}

/// The feed query: the candidate pools and `seen_bloom.unseen_in` over all of them, against
/// the impressions and the served log at once, in ONE statement. $1 user, $2 oldest post time for the followed pool, $3 discovery and $4
/// explore candidates (from the recommendation side, here the client). Returns the
/// transaction's now() (the moment the window is judged at and the page is served), the
/// followed and trending pools as fetched, and the unseen candidates of all pools in order.
pub fn prepare_feed(db: &mut Client) -> Result<Statement> {
    Ok(db.prepare(
        "SELECT now(), f.ids, t.ids,
                seen_bloom.unseen_in(ARRAY['feed_demo.impressions', 'feed_demo.served']::regclass[], $1::int8,
                                     f.ids || t.ids || $3::int8[] || $4::int8[])
         FROM (SELECT coalesce(array_agg(id ORDER BY created_at DESC, id DESC), '{}') AS ids
               FROM (SELECT p.id, p.created_at
                     FROM feed_demo.follows fo
                     CROSS JOIN LATERAL (
                         SELECT id, created_at FROM feed_demo.posts p
                         WHERE p.creator_id = fo.creator_id AND p.created_at > $2
                         ORDER BY created_at DESC LIMIT 5) p
                     WHERE fo.user_id = $1
                     ORDER BY p.created_at DESC, p.id DESC LIMIT 60) x) f,
              (SELECT coalesce(array_agg(post_id ORDER BY rank), '{}') AS ids
               FROM (SELECT post_id, rank FROM feed_demo.trending ORDER BY rank LIMIT 100) y) t",
    )?)
}

pub struct FeedRow {
    pub now: SystemTime,
    pub followed: Vec<i64>,
    pub trending: Vec<i64>,
    pub unseen: Vec<i64>,
}

pub fn feed(
    db: &mut Client,
    stmt: &Statement,
    user: i64,
    followed_since: SystemTime,
    discovery: &[i64],
    explore: &[i64],
) -> Result<FeedRow> {
    let row = db.query_one(stmt, &[&user, &followed_since, &discovery, &explore])?;
    Ok(FeedRow {
        now: row.get(0),
        followed: row.get(1),
        trending: row.get(2),
        unseen: row.get(3),
    })
}

pub fn prepare_flush(db: &mut Client) -> Result<Statement> {
    Ok(db.prepare(
        "INSERT INTO feed_demo.impressions (user_id, post_id, seen_at, watch_pct)
         SELECT * FROM unnest($1::int8[], $2::int8[], $3::timestamptz[], $4::float4[])",
    )?)
}

/// The served log's INSERT of a round's pages.
pub fn prepare_served(db: &mut Client) -> Result<Statement> {
    Ok(db.prepare(
        "INSERT INTO feed_demo.served (user_id, post_id, served_at)
         SELECT * FROM unnest($1::int8[], $2::int8[], $3::timestamptz[])",
    )?)
}

/// Bytes of WAL inserted so far.
pub fn wal_position(db: &mut Client) -> Result<i64> {
    Ok(db
        .query_one(
            "SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::int8",
            &[],
        )?
        .get(0))
}

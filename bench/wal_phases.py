"""WAL per impression in the phases of a generation, in one run: a freshly tracked table of
1,000 users x 3,000 items (the state 0.4.0's runs measured: the open generation's items in a
layer row written in place), then right after `compact` (a generation's first items in an
exact row, rewritten by each fold, as at every generation's start), then with 100 items per
user in that exact row, then 100 more per user later (a layer row again). Batches of 20 rows,
250 after a CHECKPOINT and 250 more measured (steady), plain first (the triggers disabled).

Two figures per phase: the WAL of the filter table and its index per impression (records
that name one of their blocks, read with pg_walinspect): what tracking writes; and all WAL
less plain's. The second also counts how the impressions table's own indexes happen to split
in that phase (after 20,000 random inserts they split several times as often as in the first
phase: 320 splits with their full-page images, about 600 bytes per impression).

Usage: python3 bench/wal_phases.py PORT [PG_BIN], against a running server (PostgreSQL 15 or
later) with seen_bloom installed (it makes and drops database walab). It prints each phase's
WAL per impression."""
import random
import subprocess
import sys

port = sys.argv[1]
pg_bin = sys.argv[2] if len(sys.argv) > 2 else "/usr/lib/postgresql/15/bin"


def psql(sql, db="walab"):
    out = subprocess.run([f"{pg_bin}/psql", "-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p", port,
                          "-U", "postgres", "-d", db, "-v", "ON_ERROR_STOP=1"], input=sql, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr)
    return out.stdout.strip()


def batches(rounds, users, seed):
    rng = random.Random(seed)
    return "\n".join("INSERT INTO r3000 (user_id, post_id) VALUES " + ",".join(
        f"({rng.randint(1, users)}, {rng.randint(4_000_000_000, 9_000_000_000)})" for _ in range(20)) + ";" for _ in range(rounds))


users = 1000
psql("DROP DATABASE IF EXISTS walab; CREATE DATABASE walab;", db="postgres")
psql(f"""SET client_min_messages = warning; CREATE EXTENSION seen_bloom;
CREATE TABLE r3000 (id bigserial PRIMARY KEY, user_id bigint NOT NULL, post_id bigint NOT NULL,
                    seen_at timestamptz NOT NULL DEFAULT now(), watch_pct real NOT NULL DEFAULT 1);
CREATE INDEX r3000_user_post ON r3000 (user_id, post_id);
INSERT INTO r3000 (user_id, post_id, seen_at)
SELECT u, (u * 1000003 + i) % 1000000007, now() - (i::float8 / 3000) * interval '29 days 23 hours'
FROM generate_series(1::bigint, {users}) u, generate_series(1, 3000) i;
SELECT seen_bloom.track('r3000', 'user_id', 'post_id', 'seen_at');
VACUUM ANALYZE r3000; VACUUM ANALYZE r3000_seen;""")
trig = psql("SELECT string_agg(format('ALTER TABLE r3000 ENABLE %sTRIGGER %I;', CASE WHEN tgenabled = 'R' THEN 'REPLICA ' ELSE '' END, tgname), ' ') FROM pg_trigger WHERE tgrelid = 'r3000'::regclass AND NOT tgisinternal")
psql("CREATE EXTENSION pg_walinspect;")
nodes = psql("SELECT pg_relation_filenode('r3000_seen') || '|' || pg_relation_filenode('r3000_seen_pkey')")
rounds = 250
res = {}


def more_items(per_user, base):
    psql(f"INSERT INTO r3000 (user_id, post_id) SELECT u, {base} + u * 1000 + g FROM generate_series(1, {users}) u, generate_series(1, {per_user}) g;")


for i, mode in enumerate(["plain", "tracked", "after_compact", "exact_100", "layers_after_200"]):
    psql("ALTER TABLE r3000 DISABLE TRIGGER USER;" + (trig if mode != "plain" else ""))
    if mode == "after_compact":
        psql("SET client_min_messages = warning; CALL seen_bloom.compact('r3000', min_bytes => 0);")
    if mode == "exact_100":
        more_items(100, 7_000_000_000)
    if mode == "layers_after_200":
        more_items(100, 8_000_000_000)
    out = psql(f"""CHECKPOINT;
SELECT pg_current_wal_lsn() AS a \\gset
{batches(rounds, users, 10 + i)}
SELECT pg_current_wal_lsn() AS b \\gset
{batches(rounds, users, 20 + i)}
SELECT pg_current_wal_lsn() AS c \\gset
SELECT pg_wal_lsn_diff(:'b', :'a'), pg_wal_lsn_diff(:'c', :'b'),
       coalesce(sum(record_length) FILTER (WHERE block_ref ~ '/({nodes}) '), 0)
FROM pg_get_wal_records_info(:'b', :'c');
SELECT string_agg(format('%s/%s %s x %s B', resource_manager, record_type, n, bytes), ', ' ORDER BY n * bytes DESC)
FROM (SELECT resource_manager, record_type, count(*) AS n, round(avg(record_length)) AS bytes
      FROM pg_get_wal_records_info(:'b', :'c') WHERE block_ref ~ '/({nodes}) '
      GROUP BY 1, 2) kinds;""")
    lines = out.splitlines()
    # (The record kinds' line is empty, and stripped, where the filter table wrote nothing.)
    kinds = lines.pop() if lines[-1].count("|") != 2 else ""
    first, second, filter_table = (float(x) for x in lines[-1].split("|"))
    n = rounds * 20
    res[mode] = (first / n, second / n, filter_table / n)
    print(mode, "after checkpoint %.0f B, steady %.0f B, of which the filter table %.0f B" % res[mode], flush=True)
    if kinds:
        print("    the filter table's records:", kinds, flush=True)
for m in ("tracked", "after_compact", "exact_100", "layers_after_200"):
    print("%s: the filter table's WAL per impression %.0f B; all WAL less plain's %.0f B"
          % (m, res[m][2], res[m][1] - res["plain"][1]))
psql("DROP DATABASE walab;", db="postgres")

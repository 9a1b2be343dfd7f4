"""WAL per impression in the phases of a generation, in one run: a freshly tracked table of
1,000 users x 3,000 items (the state 0.4.0's runs measured: the open generation's items in a
layer row written in place), then right after `compact` (a generation's first items in an
exact row, rewritten by each fold, as at every generation's start), then 200 items per user
later (a layer row again). Batches of 20 rows, 250 after a CHECKPOINT and 250 more measured
(steady), plain first (the triggers disabled).

Usage: python3 bench/wal_phases.py PORT [PG_BIN], against a running server with seen_bloom
installed (it makes and drops database walab). It prints each phase's WAL per impression and
what tracking adds to plain's."""
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
rounds = 250
res = {}
for i, mode in enumerate(["plain", "tracked", "after_compact", "after_compact_200"]):
    psql("ALTER TABLE r3000 DISABLE TRIGGER USER;" + (trig if mode != "plain" else ""))
    if mode == "after_compact":
        psql("SET client_min_messages = warning; CALL seen_bloom.compact('r3000', min_bytes => 0);")
    if mode == "after_compact_200":
        psql(f"INSERT INTO r3000 (user_id, post_id) SELECT u, 7000000000 + u * 1000 + g FROM generate_series(1, {users}) u, generate_series(1, 200) g;")
    out = psql(f"""CHECKPOINT;
SELECT pg_current_wal_lsn() AS a \\gset
{batches(rounds, users, 10 + i)}
SELECT pg_current_wal_lsn() AS b \\gset
{batches(rounds, users, 20 + i)}
SELECT pg_wal_lsn_diff(:'b', :'a'), pg_wal_lsn_diff(pg_current_wal_lsn(), :'b');""")
    first, second = (float(x) for x in out.splitlines()[-1].split("|"))
    res[mode] = (first / (rounds * 20), second / (rounds * 20))
    print(mode, "after checkpoint %.0f B, steady %.0f B" % res[mode], flush=True)
for m in ("tracked", "after_compact", "after_compact_200"):
    print("added by tracking, steady, %s: %.0f B" % (m, res[m][1] - res["plain"][1]))
psql("DROP DATABASE walab;", db="postgres")

#!/usr/bin/env python3
"""Tracking benchmark for issue 3, measured side by side in one run on one server.

- WAL added by tracking per impression: the same batches of 20 rows (spread over users)
  inserted into a tracked and an untracked copy of the table, pg_current_wal_lsn() before
  and after, full_page_writes on; once right after a CHECKPOINT (full-page images) and once
  more straight after (steady state).
- Ingest throughput: pgbench, batched 20-row INSERTs, tracked against untracked.
- seen_bloom.unseen with 1,000 candidates: server-side time (EXPLAIN ANALYZE, median) and
  end-to-end latency from pgbench with a prepared statement (median and p99 from its log).
- Filter table bytes per user (pg_total_relation_size / users) at 3,000 and 100 items.
- False-positive rate over the whole window at capacity: one user with 100,000 items over
  30 days, 100,000 fresh ids.

Usage: bench/tracking.py --port PORT [--users N] [--quick] [--json OUT]
Reports numbers; asserts nothing.
"""
import argparse
import glob
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile


def psql(args, sql, db=None):
    db = db or args.db
    out = subprocess.run(
        ["psql", "-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p", str(args.port), "-U", "postgres",
         "-d", db, "-v", "ON_ERROR_STOP=1"],
        input=sql, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"psql failed: {out.stderr[-2000:]}")
    return out.stdout.strip()


def setup(args):
    n = args.users
    psql(args, f"DROP DATABASE IF EXISTS {args.db}", db="postgres")
    psql(args, f"CREATE DATABASE {args.db}", db="postgres")
    psql(args, f"""
    CREATE EXTENSION seen_bloom;
    CREATE TABLE imp_plain (id bigserial PRIMARY KEY, user_id bigint NOT NULL, post_id bigint NOT NULL,
                            seen_at timestamptz NOT NULL DEFAULT now(), watch_pct real NOT NULL DEFAULT 1);
    CREATE INDEX ON imp_plain (user_id, seen_at);
    CREATE TABLE imp_tracked (LIKE imp_plain INCLUDING ALL);
    CREATE TABLE imp_small (LIKE imp_plain INCLUDING ALL);
    CREATE TABLE imp_cap (LIKE imp_plain INCLUDING ALL);
    -- {n} users with 3,000 impressions each over the last 30 days
    INSERT INTO imp_tracked (user_id, post_id, seen_at)
    SELECT u, (u * 1000003 + i) % 1000000007, now() - (i / 3000.0) * interval '30 days'
    FROM generate_series(1, {n}) u, generate_series(1, 3000) i;
    INSERT INTO imp_plain SELECT * FROM imp_tracked;
    -- {n} users with 100 impressions each
    INSERT INTO imp_small (user_id, post_id, seen_at)
    SELECT u, (u * 1000003 + i) % 1000000007, now() - (i / 100.0) * interval '30 days'
    FROM generate_series(1, {n}) u, generate_series(1, 100) i;
    -- one user at capacity: 100,000 items over 30 days
    INSERT INTO imp_cap (user_id, post_id, seen_at)
    SELECT 1, i, now() - (i / 100000.0) * interval '29 days 23 hours' FROM generate_series(1, 100000) i;
    SELECT seen_bloom.track('imp_tracked', 'user_id', 'post_id', 'seen_at');
    SELECT seen_bloom.track('imp_small', 'user_id', 'post_id', 'seen_at');
    SELECT seen_bloom.track('imp_cap', 'user_id', 'post_id', 'seen_at');
    VACUUM ANALYZE;
    """)


def batches_sql(table, rounds, users, seed):
    rng = random.Random(seed)
    stmts = []
    for _ in range(rounds):
        rows = ",".join(f"({rng.randint(1, users)}, {rng.randint(2_000_000_000, 9_000_000_000)})" for _ in range(20))
        stmts.append(f"INSERT INTO {table} (user_id, post_id) VALUES {rows};")
    return "\n".join(stmts)


def wal_per_impression(args):
    """WAL bytes per impression row for each table: the first batches after a CHECKPOINT (with
    full-page images) and the batches straight after those (steady state)."""
    rounds = 50 if args.quick else 250
    result = {}
    for table in ("imp_plain", "imp_tracked"):
        out = psql(args, f"""CHECKPOINT;
        SELECT pg_current_wal_lsn() AS a \\gset
        {batches_sql(table, rounds, args.users, 1)}
        SELECT pg_current_wal_lsn() AS b \\gset
        {batches_sql(table, rounds, args.users, 2)}
        SELECT pg_wal_lsn_diff(:'b', :'a'), pg_wal_lsn_diff(pg_current_wal_lsn(), :'b');""")
        first, second = (float(x) for x in out.splitlines()[-1].split("|"))
        result[f"after_checkpoint_{table}"] = first / (rounds * 20)
        result[f"steady_{table}"] = second / (rounds * 20)
    for phase in ("after_checkpoint", "steady"):
        result[f"{phase}_added_by_tracking"] = result[f"{phase}_imp_tracked"] - result[f"{phase}_imp_plain"]
    return result


def pgbench(args, script, seconds, clients, extra=()):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "script.sql")
        with open(path, "w") as f:
            f.write(script)
        cmd = ["pgbench", "-n", "-h", "127.0.0.1", "-p", str(args.port), "-U", "postgres", "-f", path,
               "-T", str(seconds), "-c", str(clients), "-j", str(clients), *extra, args.db]
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=d)
        if out.returncode != 0:
            sys.exit(f"pgbench failed: {out.stderr[-2000:]}")
        tps = float(re.search(r"tps = ([0-9.]+)", out.stdout).group(1))
        lat = []
        for log in glob.glob(os.path.join(d, "pgbench_log*")):
            with open(log) as f:
                lat += [int(line.split()[2]) for line in f if line.strip()]
        return tps, lat


def ingest(args):
    seconds = 5 if args.quick else 15
    insert = ("\\set u1 random(1, {n})\n\\set u2 random(1, {n})\n\\set i random(2000000000, 9000000000)\n"
              "INSERT INTO {t} (user_id, post_id) VALUES " +
              ", ".join(f"(:u{1 + k % 2} + {k}, :i + {k})" for k in range(20)) + ";\n")
    out = {}
    # interleave to share the machine's noise
    for rep in range(1 if args.quick else 3):
        for t in ("imp_plain", "imp_tracked"):
            tps, _ = pgbench(args, insert.format(n=args.users - 20, t=t), seconds, 2)
            out.setdefault(t, []).append(tps)
    med = {t: statistics.median(v) for t, v in out.items()}
    return {"tps_plain": med["imp_plain"], "tps_tracked": med["imp_tracked"],
            "tracked_over_plain": med["imp_tracked"] / med["imp_plain"], "clients": 2, "rows_per_statement": 20}


def unseen_latency(args, end_to_end_only=False):
    rng = random.Random(7)
    cands = "{" + ",".join(str(rng.randint(1, 2_000_000_000)) for _ in range(1000)) + "}"
    repeats = 50 if args.quick else 300
    script = [f"PREPARE q(bigint, bigint[]) AS SELECT seen_bloom.unseen('imp_tracked', $1, $2);"]
    for i in range(repeats):
        script.append(f"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) EXECUTE q({1 + i % args.users}, '{cands}');")
    times = [0.0]
    if not end_to_end_only:
        # A feed's users are in cache: read every filter row once before timing.
        psql(args, "SELECT count(*), sum(length(bits)) FROM imp_tracked_seen;")
        out = psql(args, "\n".join(script))
        times = [float(m) * 1000 for m in re.findall(r'"Execution Time": ([0-9.]+)', out)][repeats // 10:]
    bench = (f"\\set u random(1, {args.users})\n"
             f"SELECT cardinality(seen_bloom.unseen('imp_tracked', :u::bigint, '{cands}'::bigint[]));\n")
    _, lat = pgbench(args, bench, 5 if args.quick else 10, 1, ("-M", "prepared", "-l"))
    lat.sort()
    return {"server_median_us": statistics.median(times),
            "client_p50_us": lat[len(lat) // 2] if lat else None,
            "client_p99_us": lat[int(len(lat) * 0.99)] if lat else None,
            "client_samples": len(lat)}


def redis_comparison(args):
    """BF.MEXISTS of 1,000 ids against RedisBloom (BF.RESERVE 0.01 100000, 3,000 items per
    user) from redis-benchmark, beside seen_bloom.unseen from pgbench, run back to back."""
    if not args.redis_port:
        return {"skipped": "no --redis-port"}
    cli = ["redis-cli", "-p", str(args.redis_port)]
    users = min(args.users, 100)
    cmds = []
    for u in range(1, users + 1):
        cmds.append(f"BF.RESERVE seen:{u} 0.01 100000")
        for chunk in range(0, 3000, 500):
            ids = " ".join(str((u * 1000003 + i) % 1000000007) for i in range(chunk + 1, chunk + 501))
            cmds.append(f"BF.MADD seen:{u} {ids}")
    subprocess.run(cli + ["FLUSHALL"], check=True, capture_output=True)
    subprocess.run(cli, input="\n".join(cmds) + "\n", text=True, check=True, capture_output=True)
    memory = int(subprocess.run(cli + ["MEMORY", "USAGE", "seen:1"], capture_output=True, text=True).stdout.strip())
    rng = random.Random(7)
    ids = [str(rng.randint(1, 2_000_000_000)) for _ in range(1000)]
    seconds = 5 if args.quick else 10
    out = {"redis_memory_usage_bytes_per_user": memory}
    for rep in range(1 if args.quick else 3):
        rb = subprocess.run(["redis-benchmark", "-p", str(args.redis_port), "-c", "1", "-n", str(3000 * seconds),
                             "-q", "--csv", "BF.MEXISTS", "seen:1", *ids], capture_output=True, text=True)
        # csv: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...
        row = [line for line in rb.stdout.splitlines() if line and not line.startswith('"test"')][-1]
        fields = [f.strip('"') for f in row.split('","')]
        out.setdefault("redis_bf_mexists_p50_us", []).append(float(fields[4]) * 1000)
        pg = unseen_latency(args, end_to_end_only=True)
        out.setdefault("seen_bloom_unseen_p50_us", []).append(pg["client_p50_us"])
    for k in ("redis_bf_mexists_p50_us", "seen_bloom_unseen_p50_us"):
        out[k] = statistics.median(out[k])
    out["seen_bloom_over_redis_p50"] = out["seen_bloom_unseen_p50_us"] / out["redis_bf_mexists_p50_us"]
    return out


def bytes_per_user(args):
    out = psql(args, """
    SELECT pg_total_relation_size('imp_tracked_seen')::float8 / (SELECT count(DISTINCT user_key) FROM imp_tracked_seen),
           pg_total_relation_size('imp_small_seen')::float8 / (SELECT count(DISTINCT user_key) FROM imp_small_seen),
           pg_total_relation_size('imp_tracked')::float8 / (SELECT count(DISTINCT user_id) FROM imp_tracked);""")
    a, b, c = (float(x) for x in out.split("|"))
    return {"at_3000_items": a, "at_100_items": b, "impressions_table_at_3000_items": c}


def fpr_at_capacity(args):
    out = psql(args, """
    SELECT sum(cardinality(ARRAY(SELECT generate_series(b * 1000 + 10000001, b * 1000 + 10001000)))
               - cardinality(seen_bloom.unseen('imp_cap', 1::bigint,
                                               ARRAY(SELECT generate_series(b * 1000 + 10000001, b * 1000 + 10001000)::bigint))))
    FROM generate_series(0, 99) b;
    SELECT cardinality(seen_bloom.unseen('imp_cap', 1::bigint, ARRAY(SELECT post_id FROM imp_cap)));""")
    fp, fn = (int(x) for x in out.splitlines())
    return {"fresh_ids": 100000, "false_positives": fp, "fpr": fp / 100000, "false_negatives": fn}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--db", default="seen_bloom_bench")
    ap.add_argument("--redis-port", type=int)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.quick:
        args.users = min(args.users, 200)
    print(f"setting up {args.users} users x 3,000 and x 100 impressions ...", flush=True)
    setup(args)
    result = {"users": args.users}
    # Reads and sizes first, on the users as set up (3,000 items each); then the writes,
    # which add items.
    for name, step in (("bytes_per_user", bytes_per_user), ("unseen_1000_candidates", unseen_latency),
                       ("fpr_at_capacity", fpr_at_capacity), ("redis_comparison", redis_comparison),
                       ("wal_per_impression", wal_per_impression),
                       ("ingest", ingest)):
        print(f"{name} ...", flush=True)
        result[name] = step(args)
        print(json.dumps(result[name], indent=2), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()

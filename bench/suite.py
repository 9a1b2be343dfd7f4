#!/usr/bin/env python3
"""The side-by-side benchmark suite (issue 4), run by bench/run.sh.

Every comparison runs both sides in the same run, interleaved where it matters, and reports
medians and ratios. Sections (each writes target/bench/<section>.json):

  reads     seen_bloom.unseen, bloom_unseen (and per-row bloom_contains, server side only)
            against the exact anti-join and RedisBloom BF.MEXISTS; users holding 100, 3,000
            and 100,000 items; 100 and 1,000 candidates. Server side: EXPLAIN ANALYZE
            execution time (PG), SLOWLOG duration (Redis). End to end: pgbench -M prepared
            (candidates sent as a parameter on every call) and redis-benchmark, p50/p99.
  writes    throughput (pgbench, 20-row INSERTs, 2 clients) and WAL per impression for plain,
            tracked and naive (one bloom value per user, PL/pgSQL statement trigger) inserts,
            and RedisBloom BF.MADD of 20 ids (redis-benchmark, 2 clients).
  memory    bytes per user against items held: tracked filter table, a bloom value,
            RedisBloom MEMORY USAGE, the exact set (impressions index).
  accuracy  measured false-positive rate against fill, with the engine's model; false
            negatives counted.
  growth    read latency and bytes per user as users grow.
  generations  bytes, reads and WAL of track(..., generations => N).
  sizing    bytes per user and false positives against a RedisBloom key reserved for the same
            items and the Bloom optimum: 1% and 0.1%, N = 5 and 30, 10 to 100,000 items.
  citus     seen_bloom on a Citus cluster (coordinator and two workers) beside a single node:
            the delegated <table>_unseen and other read paths (pgbench p50/p99), 20-row
            INSERTs tracked and plain on each side (clusters started by bench/citus.sh).

Then results.json (everything), PNG plots and SUMMARY.md. Exits non-zero if any section
failed to produce its numbers (never on a timing).
"""
import argparse
import json
import math
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

import redis

ARGS = None
DB = "seen_bloom_bench"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------- Postgres helpers

def psql(sql, db=None, check=True, port=None, stderr=False):
    """Runs `sql` in one session (the suite's cluster unless `port` is given); returns its
    output, and its messages (NOTICEs) as well when `stderr`."""
    out = subprocess.run(
        [os.path.join(ARGS.pg_bin, "psql"), "-X", "-q", "-A", "-t", "-h", "127.0.0.1",
         "-p", str(port or ARGS.port), "-U", "postgres", "-d", db or DB, "-v", "ON_ERROR_STOP=1"],
        input=sql, capture_output=True, text=True)
    if check and out.returncode != 0:
        raise RuntimeError(f"psql failed: {out.stderr[-3000:]}")
    return (out.stdout.strip(), out.stderr) if stderr else out.stdout.strip()


def scalar_row(sql, port=None):
    return [float(x) for x in psql(sql, port=port).splitlines()[-1].split("|")]


def pgbench(script, seconds, clients=1, prepared=True, log_latency=False, defines=()):
    """Runs a pgbench script; returns (tps, per-transaction latencies in us)."""
    run = pgbench_run([script], seconds, clients, prepared, log_latency, defines)
    return run["tps"], run["latencies_us"]


def pgbench_run(scripts, seconds, clients=1, prepared=True, log_latency=False, defines=(), port=None, db=None,
                per_client=None):
    """Runs pgbench with one or more scripts (each transaction picks one at random) against
    the suite's cluster, or the server on `port`, for `seconds` or `per_client` transactions
    per client; returns tps, the transactions processed and, with `log_latency`, every
    transaction's latency in us."""
    with tempfile.TemporaryDirectory() as d:
        cmd = [os.path.join(ARGS.pg_bin, "pgbench"), "-n", "-h", "127.0.0.1", "-p", str(port or ARGS.port),
               "-U", "postgres", "-c", str(clients), "-j", str(clients)]
        cmd += ["-t", str(per_client)] if per_client else ["-T", str(seconds)]
        for k, script in enumerate(scripts):
            path = os.path.join(d, f"script{k}.sql")
            with open(path, "w") as f:
                f.write(script)
            cmd += ["-f", path]
        if prepared:
            cmd += ["-M", "prepared"]
        if log_latency:
            cmd += ["-l"]
        for k, v in defines:
            cmd += ["-D", f"{k}={v}"]
        cmd.append(db or DB)
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=d)
        if out.returncode != 0:
            raise RuntimeError(f"pgbench failed: {out.stderr[-2000:]}")
        tps = float(re.search(r"tps = ([0-9.]+)", out.stdout).group(1))
        xacts = int(re.search(r"number of transactions actually processed: ([0-9]+)", out.stdout).group(1))
        lat = []
        for name in os.listdir(d):
            if name.startswith("pgbench_log"):
                with open(os.path.join(d, name)) as f:
                    lat += [int(line.split()[2]) for line in f if line.strip()]
        return {"tps": tps, "transactions": xacts, "latencies_us": lat}


def restart_cluster(wal_level, port=None, pg_bin=None, pg_data=None):
    """Restarts the benchmark's cluster (or the one on `port`, its programs in `pg_bin`, its
    data in `pg_data`) at `wal_level` (ALTER SYSTEM, pg_ctl restart)."""
    pg_bin, pg_data = pg_bin or ARGS.pg_bin, pg_data or ARGS.pg_data
    psql(f"ALTER SYSTEM SET wal_level = '{wal_level}'", port=port)
    cmd = [os.path.join(pg_bin, "pg_ctl"), "-D", pg_data, "-m", "fast", "-w", "restart",
           "-l", os.path.join(os.path.dirname(pg_data), "server.log")]
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--"] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"pg_ctl restart failed: {out.stderr[-2000:]}")
    got = psql("SHOW wal_level", port=port)
    if got != wal_level:
        raise RuntimeError(f"wal_level is {got} after the restart, not {wal_level}")


def quiet_autovacuum(quiet):
    """Turns autovacuum off (and waits, at most 5 minutes, for running workers to finish) or
    back on."""
    if not quiet:
        psql("ALTER SYSTEM RESET autovacuum; SELECT pg_reload_conf();")
        return
    psql("ALTER SYSTEM SET autovacuum = off; SELECT pg_reload_conf();")
    for _ in range(300):
        if psql("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'") == "0":
            return
        time.sleep(1)
    raise RuntimeError("autovacuum workers still running after 5 minutes")


def pct(values, q):
    s = sorted(values)
    if not s:
        return None
    return s[min(len(s) - 1, int(len(s) * q))]


def explain_times(script_lines):
    """Runs EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) statements tagged by `\\echo TAG`;
    returns {tag: [execution time in us]}."""
    out = psql("\n".join(script_lines))
    times, tag = {}, None
    for line in out.splitlines():
        s = line.strip()
        if s.startswith("@@"):
            tag = s[2:]
            continue
        m = re.search(r'"Execution Time": ([0-9.]+)', s)
        if m and tag:
            times.setdefault(tag, []).append(float(m.group(1)) * 1000.0)
    return times


# ---------------------------------------------------------------- Redis helpers

def rconn():
    return redis.Redis(host="127.0.0.1", port=ARGS.redis_port)


def rkey(prefix, user):
    # redis-benchmark's __rand_int__ is a 12-digit zero-padded number in [0, keyspace).
    return f"{prefix}:{user - 1:012d}"


def redis_benchmark(args, requests, clients=1, keyspace=None):
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(ARGS.redis_port), "-c", str(clients),
           "-n", str(requests), "--csv"]
    if keyspace:
        cmd += ["-r", str(keyspace)]
    out = subprocess.run(cmd + list(args), capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"redis-benchmark failed: {out.stderr[-1000:]}")
    rows = [line for line in out.stdout.splitlines() if line and not line.startswith('"test"')]
    fields = [f.strip('"') for f in rows[-1].split('","')]
    # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
    return {"rps": float(fields[1]), "p50_us": float(fields[4]) * 1000, "p99_us": float(fields[6]) * 1000}


# ---------------------------------------------------------------- data sets

def item(u, i):
    return (u * 1000003 + i) % 1000000007


def impressions_sql(table, users, items, first_user=1):
    return f"""
    INSERT INTO {table} (user_id, post_id, seen_at)
    SELECT u, (u * 1000003 + i) % 1000000007, now() - (i::float8 / {items}) * interval '29 days 23 hours'
    FROM generate_series({first_user}::bigint, {first_user + users - 1}) u, generate_series(1, {items}) i;"""


def create_impressions(table):
    return f"""
    CREATE TABLE {table} (id bigserial PRIMARY KEY, user_id bigint NOT NULL, post_id bigint NOT NULL,
                          seen_at timestamptz NOT NULL DEFAULT now(), watch_pct real NOT NULL DEFAULT 1);
    CREATE INDEX {table}_user_post ON {table} (user_id, post_id);"""


def load_redis_users(prefix, users, items):
    r = rconn()
    pipe = r.pipeline(transaction=False)
    for u in range(1, users + 1):
        key = rkey(prefix, u)
        pipe.delete(key)
        pipe.execute_command("BF.RESERVE", key, 0.01, 100000)
        for start in range(1, items + 1, 1000):
            pipe.execute_command("BF.MADD", key, *[item(u, i) for i in range(start, min(items, start + 999) + 1)])
        if len(pipe) > 200:
            pipe.execute()
    pipe.execute()


def setup():
    q = ARGS.quick
    psql(f"DROP DATABASE IF EXISTS {DB}", db="postgres")
    psql(f"CREATE DATABASE {DB}", db="postgres")
    psql("CREATE EXTENSION seen_bloom; CREATE EXTENSION pg_prewarm;")
    rconn().flushall()
    if not set(ARGS.sections.split(",")) & {"reads", "writes", "memory"}:
        log("  no section asked for needs the shared data sets: none loaded")
        return
    sizes = {}
    for s, users in READ_SIZES[q].items():
        t = f"r{s}"
        t0 = time.time()
        psql(f"""{create_impressions(t)}
        {impressions_sql(t, users, s)}
        SELECT seen_bloom.track('{t}', 'user_id', 'post_id', 'seen_at');
        CREATE TABLE b{s} (user_id bigint PRIMARY KEY, seen bloom);
        INSERT INTO b{s} SELECT user_id, bloom_agg(post_id) FROM {t} GROUP BY user_id;
        VACUUM ANALYZE {t}; VACUUM ANALYZE {t}_seen; VACUUM ANALYZE b{s};""")
        load_redis_users(f"seen{s}", users, s)
        sizes[s] = users
        log(f"  {users} users x {s} items: tracked table, bloom table, RedisBloom keys ({time.time() - t0:.1f} s)")
    for s in LAYOUT2_COPIES:
        if s in sizes:
            t = f"r{s}l2"
            t0 = time.time()
            psql(f"""{create_impressions(t)}
            SELECT seen_bloom.track('{t}', 'user_id', 'post_id', 'seen_at');
            UPDATE seen_bloom.tracked SET layout = 2 WHERE impressions = '{t}'::regclass;
            SELECT seen_bloom._forget_config('{t}');
            INSERT INTO {t} (user_id, post_id, seen_at) SELECT user_id, post_id, seen_at FROM r{s} ORDER BY id;
            VACUUM ANALYZE {t}; VACUUM ANALYZE {t}_seen;""")
            log(f"  {t}: the same impressions tracked in layout 2 (the read A/B, {time.time() - t0:.1f} s)")
    for s, users in MEMORY_EXTRA[q].items():
        t = f"m{s}"
        psql(f"""{create_impressions(t)}
        {impressions_sql(t, users, s)}
        SELECT seen_bloom.track('{t}', 'user_id', 'post_id', 'seen_at');
        VACUUM ANALYZE {t}; VACUUM ANALYZE {t}_seen;""")
        log(f"  {users} users x {s} items (memory only)")
        sizes[s] = users
    compact_data_sets(sizes)


# What setup's compaction did, per data set (results["compact"]).
COMPACTED = {}


def compact_data_sets(sizes):
    """The maintenance the docs call routine, once per generation: CALL seen_bloom.compact on
    every data set (its users' items spread over the window, every user has rows of a closed
    generation and is compacted). A data set it changed is then
    measured after VACUUM FULL of its filter table: the layered rows it deleted leave pages
    that later rows reuse in a running system, not bytes any user holds. Before that, its
    bytes and a short interleaved read (seen_bloom.unseen against bloom_unseen, 1,000
    candidates) are recorded, so both states come from this run."""
    for s, users in sizes.items():
        t = f"r{s}" if s in READ_SIZES[ARGS.quick] else f"m{s}"
        before = scalar_row(f"SELECT pg_total_relation_size('{t}_seen')::float8 / {users}")[0]
        reads = heavy_reads(t, s, users) if s == 100000 and t.startswith("r") else None
        psql(f"SET client_min_messages = warning; CALL seen_bloom.compact('{t}');")
        n = int(scalar_row(f"SELECT count(DISTINCT user_key) FROM {t}_seen WHERE layer = -2")[0])
        if n == 0:
            continue
        psql(f"VACUUM FULL {t}_seen; ANALYZE {t}_seen;")
        after = scalar_row(f"SELECT pg_total_relation_size('{t}_seen')::float8 / {users}")[0]
        COMPACTED[str(s)] = {"table": t, "users": users, "users_compacted": n, "bytes_per_user_before": before,
                             "bytes_per_user_after": after, "reads_before": reads}
        log(f"  {t}: {n} of {users} users compacted, {before:.0f} -> {after:.0f} B/user")


def heavy_reads(t, s, users):
    """Server medians of seen_bloom.unseen over layered rows and bloom_unseen over one value,
    1,000 candidates (half held), 40 interleaved calls."""
    prewarm([t, f"b{s}"])
    rng = random.Random(18)
    lines = [f"PREPARE u(bigint, bigint[]) AS {PG_READS['seen_bloom.unseen'].format(s=s)};",
             f"PREPARE b(bigint, bigint[]) AS {PG_READS['bloom_unseen'].format(s=s)};"]
    for _ in range(20 if ARGS.quick else 40):
        u = rng.randint(1, users)
        arr = "'{" + ",".join(map(str, candidates(rng, u, s, 1000))) + "}'"
        for tag, stmt in (("unseen", "u"), ("bloom_unseen", "b")):
            lines += [f"\\echo @@{tag}", f"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) EXECUTE {stmt}({u}, {arr});"]
    times = explain_times(lines)
    return {tag: statistics.median(v) for tag, v in times.items()}


# Users per data set: {items held: users}.
READ_SIZES = {False: {100: 1000, 3000: 1000, 100000: 10}, True: {100: 100, 3000: 100, 100000: 2}}
MEMORY_EXTRA = {False: {10: 1000, 1000: 300, 10000: 30}, True: {10: 100, 1000: 30, 10000: 3}}
# Typical users' data sets also tracked in layout 2 (r<s>l2, same impressions): issue 18's
# read A/B of the layouts, interleaved with the other methods.
LAYOUT2_COPIES = (100, 3000)


# ---------------------------------------------------------------- 1. reads

PG_READS = {
    "seen_bloom.unseen": "SELECT seen_bloom.unseen('r{s}', $1, $2)",
    "bloom_unseen": "SELECT bloom_unseen(seen, $2) FROM b{s} WHERE user_id = $1",
    "per_row_contains": "SELECT array_agg(c) FROM b{s} f, unnest($2) c WHERE f.user_id = $1 AND NOT bloom_contains(f.seen, c)",
    "exact_anti_join": "SELECT array_agg(c) FROM unnest($2) c WHERE NOT EXISTS "
                       "(SELECT 1 FROM r{s} i WHERE i.user_id = $1 AND i.post_id = c)",
}
# seen_bloom.unseen with seen_bloom.activity's counting off (issue 20: its cost at most 2%);
# the cluster preloads seen_bloom, so the other calls count.
ACTIVITY_OFF = "seen_bloom.unseen (activity off)"
IDS_IN_STATEMENT = " (ids in statement)"
# The floor of any call over the text protocol: the same prepared statement sending the ids as a
# parameter and returning them unchanged, no function called (PostgreSQL's array text input and
# output of 1,000 ids, the round trip).
LAYOUT2 = "seen_bloom.unseen (layout 2)"
ECHO = "echo of the ids (no function)"
ECHO_SQL = "SELECT $2"
BINARY = " (binary protocol)"
E2E_PG = ("seen_bloom.unseen", "bloom_unseen", "exact_anti_join", "seen_bloom.unseen" + IDS_IN_STATEMENT, ECHO)


def candidates(rng, u, s, n):
    """Half items the user holds, half fresh ids, shuffled."""
    c = [item(u, rng.randint(1, s)) if j % 2 == 0 else rng.randint(2_000_000_000, 3_000_000_000) for j in range(n)]
    rng.shuffle(c)
    return c


def prewarm(tables):
    psql(";".join(f"SELECT pg_prewarm(c.oid) FROM pg_class c WHERE c.relname IN "
                  f"(SELECT relname FROM pg_class WHERE relname LIKE '{t}%' AND relkind IN ('r', 'i', 't'))"
                  for t in tables) + ";")
    psql(";".join(f"SELECT count(*), sum(length(bits)) FROM {t}_seen" for t in tables if t.startswith("r")) + ";")


def section_reads():
    q = ARGS.quick
    repeats = 20 if q else 150
    rounds = 1 if q else 5
    seconds = 1 if q else 3
    redis_requests = {100: 300, 1000: 300} if q else {100: 6000, 1000: 3000}
    r = rconn()
    result = {"server_side": {}, "end_to_end": {}, "repeats": repeats, "rounds": rounds,
              "pgbench_seconds": seconds}
    for s, users in READ_SIZES[q].items():
        ab = s in LAYOUT2_COPIES
        prewarm([f"r{s}", f"b{s}"] + ([f"r{s}l2"] if ab else []))
        # Server side, interleaved: every method on the same candidates for the same user.
        rng = random.Random(s)
        lines = []
        for name, sql in PG_READS.items():
            lines.append(f"PREPARE {name.replace('.', '_')}(bigint, bigint[]) AS {sql.format(s=s)};")
        lines.append(f"PREPARE unseen_activity_off(bigint, bigint[]) AS {PG_READS['seen_bloom.unseen'].format(s=s)};")
        if ab:
            lines.append(f"PREPARE unseen_layout2(bigint, bigint[]) AS SELECT seen_bloom.unseen('r{s}l2', $1, $2);")
        redis_calls = {100: [], 1000: []}
        for ncand in (100, 1000):
            for i in range(repeats):
                u = rng.randint(1, users)
                cands = candidates(rng, u, s, ncand)
                arr = "'{" + ",".join(map(str, cands)) + "}'"
                order = list(PG_READS) + [ACTIVITY_OFF] + ([LAYOUT2] if ab else [])
                rng.shuffle(order)
                for name in order:
                    off = name == ACTIVITY_OFF
                    if off:
                        lines.append("SET seen_bloom.track_activity = off;")
                    lines.append(f"\\echo @@{name}/{ncand}")
                    statement = ("unseen_activity_off" if off else "unseen_layout2" if name == LAYOUT2
                                 else name.replace('.', '_'))
                    lines.append(f"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) EXECUTE {statement}({u}, {arr});")
                    if off:
                        lines.append("RESET seen_bloom.track_activity;")
                redis_calls[ncand].append((rkey(f"seen{s}", u), cands))
        times = explain_times(lines)
        paired_times = {n: (times[f"seen_bloom.unseen/{n}"], times[f"{ACTIVITY_OFF}/{n}"]) for n in ("100", "1000")}
        paired_layouts = {n: (times[f"seen_bloom.unseen/{n}"], times[f"{LAYOUT2}/{n}"]) for n in ("100", "1000")} if ab else {}
        server = {}
        for tag, ts in times.items():
            name, ncand = tag.split("/")
            ts = ts[max(1, len(ts) // 10):]  # the first executions warm caches and plans
            server.setdefault(ncand, {})[name] = {"median_us": statistics.median(ts), "p90_us": pct(ts, 0.9),
                                                  "samples": len(ts)}
        r.config_set("slowlog-log-slower-than", 0)
        r.config_set("slowlog-max-len", repeats + 10)
        for ncand, calls in redis_calls.items():
            r.slowlog_reset()
            for key, cands in calls:
                r.execute_command("BF.MEXISTS", key, *cands)
            durs = [e["duration"] for e in r.slowlog_get(repeats + 10)
                    if e["command"].upper().startswith(b"BF.MEXISTS")]
            durs = durs[max(1, len(durs) // 10):]
            server[str(ncand)]["redis_bf_mexists"] = {"median_us": statistics.median(durs), "p90_us": pct(durs, 0.9),
                                                      "samples": len(durs)}
        r.config_set("slowlog-log-slower-than", 10000)
        for ncand, pair in paired_times.items():
            # The same candidates and user, counted and not, in each repeat: the median of
            # the repeats' own ratios.
            server[ncand]["activity_on/off_paired"] = statistics.median(
                a / b for a, b in zip(*pair) if b > 0)
        for ncand, pair in paired_layouts.items():
            # The same rows in layout 3 (r<s>) and layout 2 (r<s>l2), same user and candidates.
            server[ncand]["layout3/layout2_paired"] = statistics.median(a / b for a, b in zip(*pair) if b > 0)
        for ncand, m in server.items():
            base = m["seen_bloom.unseen"]["median_us"]
            m["ratios"] = {
                "exact_anti_join/seen_bloom.unseen": m["exact_anti_join"]["median_us"] / base,
                "exact_anti_join/bloom_unseen": m["exact_anti_join"]["median_us"] / m["bloom_unseen"]["median_us"],
                "per_row_contains/bloom_unseen": m["per_row_contains"]["median_us"] / m["bloom_unseen"]["median_us"],
                "seen_bloom.unseen/redis_bf_mexists": base / m["redis_bf_mexists"]["median_us"],
                "bloom_unseen/redis_bf_mexists": m["bloom_unseen"]["median_us"] / m["redis_bf_mexists"]["median_us"],
                "activity_on/activity_off": m.pop("activity_on/off_paired"),
            }
            if "layout3/layout2_paired" in m:
                m["ratios"]["layout3/layout2"] = m.pop("layout3/layout2_paired")
        result["server_side"][str(s)] = server
        log(f"  reads, {s} items, server side: " + "; ".join(
            f"{n} cands: " + ", ".join(f"{k} {v['median_us']:.0f}" for k, v in m.items() if k != "ratios")
            for n, m in server.items()) + " (us)")

        # End to end from C clients: one user at random per call, the same fresh candidates
        # sent on every call (pgbench: as a parameter of the prepared statement).
        e2e = {}
        for ncand in (100, 1000):
            crng = random.Random(1000 + ncand)
            cands = [crng.randint(2_000_000_000, 3_000_000_000) for _ in range(ncand)]
            lit = "{" + ",".join(map(str, cands)) + "}"
            per = {}
            for rnd in range(rounds):
                # RedisBloom first, so that it and seen_bloom.unseen (the first PostgreSQL
                # variant) run back to back: their per-round ratio sees the same machine.
                rb = redis_benchmark(["BF.MEXISTS", f"seen{s}:__rand_int__", *map(str, cands)],
                                     redis_requests[ncand], keyspace=users)
                per.setdefault("redis_bf_mexists", []).append({"p50_us": rb["p50_us"], "p99_us": rb["p99_us"],
                                                               "n": redis_requests[ncand]})
                for name in E2E_PG:
                    # the last variant keeps the ids in the prepared statement (not sent per call)
                    sql = ECHO_SQL if name == ECHO else PG_READS[name.replace(IDS_IN_STATEMENT, "")]
                    base = sql.format(s=s).replace("$1", ":u::bigint")
                    base = base.replace("$2", f"'{lit}'::bigint[]" if name.endswith(IDS_IN_STATEMENT)
                                        else ":cands::bigint[]")
                    script = f"\\set u random(1, {users})\n" + base + ";\n"
                    _, lat = pgbench(script, seconds, log_latency=True, defines=[("cands", lit)])
                    per.setdefault(name, []).append({"p50_us": pct(lat, 0.5), "p99_us": pct(lat, 0.99), "n": len(lat)})
                # The same call from bench/unseen_client.c: ids sent as a binary int8[] parameter and
                # the result read in binary, as binary-protocol drivers do.
                if ARGS.unseen_client:
                    out = subprocess.run(
                        [ARGS.unseen_client, f"host=127.0.0.1 port={ARGS.port} user=postgres dbname={DB}",
                         PG_READS["seen_bloom.unseen"].format(s=s), str(users), str(seconds), *map(str, cands)],
                        capture_output=True, text=True)
                    if out.returncode != 0:
                        raise RuntimeError(f"unseen_client failed: {out.stderr[-1000:]}")
                    fields = out.stdout.split()
                    per.setdefault("seen_bloom.unseen" + BINARY, []).append(
                        {"p50_us": float(fields[3]), "p99_us": float(fields[5]), "n": int(fields[1])})
            m = {name: {"p50_us": statistics.median(x["p50_us"] for x in runs),
                        "p99_us": statistics.median(x["p99_us"] for x in runs),
                        "samples": sum(x["n"] for x in runs)} for name, runs in per.items()}
            # Each round's p50 against the same round's BF.MEXISTS p50, median over the rounds:
            # the comparison side by side (RedisBloom's p50 alone drifts by half on this kind
            # of machine within minutes). The ratios below it are of each side's median.
            m["per_round"] = {
                name + "/redis_bf_mexists_p50": [x["p50_us"] / r["p50_us"]
                                                 for x, r in zip(runs, per["redis_bf_mexists"])]
                for name, runs in per.items() if name != "redis_bf_mexists"}
            m["paired_ratios"] = {k: statistics.median(v) for k, v in m["per_round"].items()}
            m["ratios"] = {
                "seen_bloom.unseen/redis_bf_mexists_p50": m["seen_bloom.unseen"]["p50_us"] / m["redis_bf_mexists"]["p50_us"],
                "bloom_unseen/redis_bf_mexists_p50": m["bloom_unseen"]["p50_us"] / m["redis_bf_mexists"]["p50_us"],
                "exact_anti_join/seen_bloom.unseen_p50": m["exact_anti_join"]["p50_us"] / m["seen_bloom.unseen"]["p50_us"],
                "seen_bloom.unseen (ids in statement)/redis_bf_mexists_p50":
                    m["seen_bloom.unseen" + IDS_IN_STATEMENT]["p50_us"] / m["redis_bf_mexists"]["p50_us"],
                ECHO + "/redis_bf_mexists_p50": m[ECHO]["p50_us"] / m["redis_bf_mexists"]["p50_us"],
            }
            if "seen_bloom.unseen" + BINARY in m:
                m["ratios"]["seen_bloom.unseen (binary protocol)/redis_bf_mexists_p50"] = \
                    m["seen_bloom.unseen" + BINARY]["p50_us"] / m["redis_bf_mexists"]["p50_us"]
            e2e[str(ncand)] = m
        result["end_to_end"][str(s)] = e2e
        log(f"  reads, {s} items, end to end p50: " + "; ".join(
            f"{n} cands: " + ", ".join(f"{k} {v['p50_us']:.0f}" for k, v in m.items() if k not in ("ratios", "per_round", "paired_ratios"))
            for n, m in e2e.items()) + " (us)")
    return result


# ---------------------------------------------------------------- 2. writes

NAIVE_SQL = """
CREATE TABLE naive_seen (user_id bigint PRIMARY KEY, seen bloom NOT NULL);
INSERT INTO naive_seen SELECT user_id, seen FROM b3000;
CREATE FUNCTION naive_fold() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- lock the batch's users in key order (no deadlock between concurrent batches)
  PERFORM 1 FROM naive_seen s WHERE s.user_id IN (SELECT DISTINCT n.user_id FROM new_rows n)
    ORDER BY s.user_id FOR UPDATE;
  UPDATE naive_seen s SET seen = bloom_add(s.seen, n.items)
    FROM (SELECT user_id, array_agg(post_id) AS items FROM new_rows GROUP BY user_id) n
   WHERE s.user_id = n.user_id;
  INSERT INTO naive_seen
  SELECT user_id, bloom_add(NULL::bloom, array_agg(post_id)) FROM new_rows n
   WHERE NOT EXISTS (SELECT 1 FROM naive_seen s WHERE s.user_id = n.user_id)
   GROUP BY user_id ON CONFLICT DO NOTHING;
  RETURN NULL;
END $$;
CREATE TRIGGER naive_insert AFTER INSERT ON r3000 REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION naive_fold();
VACUUM ANALYZE naive_seen;
"""


def write_mode(mode):
    """One impressions table (r3000: users with 3,000 items, tracked), three ways to write
    it, chosen by which triggers are enabled: the same table, indexes and rows each time.
    Each tracking trigger gets back the state track() gave it (seen_bloom_replica fires for
    replicas only: enabled as an ordinary trigger it would run per row for nothing)."""
    enable = {"plain": [], "tracked": TRACK_TRIGGERS, "tracked_after_compact": TRACK_TRIGGERS,
              "tracked_layout2": TRACK_TRIGGERS, "naive": [("naive_insert", "O")]}[mode]
    sql = triggers_sql("r3000", enable)
    # Layout 2 sizes its rows as layout 3 does: the same rows, written as new row versions
    # (layout 2) or in place at commit (layout 3), by flipping the table's layout number.
    layout = 2 if mode == "tracked_layout2" else 3
    sql += (f"UPDATE seen_bloom.tracked SET layout = {layout} WHERE impressions = 'r3000'::regclass;"
            "SELECT seen_bloom._forget_config('r3000');")
    psql(sql)


TRACK_TRIGGERS = []


def triggers_sql(table, enable):
    """Every user trigger of `table` disabled, then those of `enable` ((name, pg_trigger's
    tgenabled) pairs, as track left them) enabled again in their state."""
    return f"ALTER TABLE {table} DISABLE TRIGGER USER;" + "".join(
        f"ALTER TABLE {table} ENABLE {'REPLICA ' if state == 'R' else ''}TRIGGER {name};" for name, state in enable)


def batches_sql(rounds, users, seed, table="r3000"):
    rng = random.Random(seed)
    stmts = []
    for _ in range(rounds):
        rows = ",".join(f"({rng.randint(1, users)}, {rng.randint(4_000_000_000, 9_000_000_000)})" for _ in range(20))
        stmts.append(f"INSERT INTO {table} (user_id, post_id) VALUES {rows};")
    return "\n".join(stmts)


def copy_rows_per_s(users, copies):
    """Rows per second of `copies` COPY FROM STDIN of 10,000 fresh rows each, two psql clients
    at once (the rows written beforehand, so only the server's work is timed)."""
    rng = random.Random(copies * 7919 + users)
    with tempfile.TemporaryDirectory() as d:
        files = []
        for c in range(copies):
            path = os.path.join(d, f"copy{c}.csv")
            with open(path, "w") as f:
                f.write("".join(f"{rng.randint(1, users)},{rng.randint(4_000_000_000, 9_000_000_000)}\n"
                                for _ in range(10_000)))
            files.append(path)
        cmd = [os.path.join(ARGS.pg_bin, "psql"), "-X", "-q", "-h", "127.0.0.1", "-p", str(ARGS.port),
               "-U", "postgres", "-d", DB, "-v", "ON_ERROR_STOP=1"]
        t0 = time.time()
        procs = [subprocess.Popen(cmd + sum((["-c", f"\\copy r3000 (user_id, post_id) FROM '{p}' WITH (FORMAT csv)"]
                                            for p in files[k::2]), []), stdout=subprocess.DEVNULL)
                 for k in range(2)]
        if any(p.wait() != 0 for p in procs):
            raise RuntimeError("COPY failed")
        return copies * 10_000 / (time.time() - t0)


def values_script(users, table="r3000"):
    """The pgbench script of ingest: one 20-row VALUES INSERT of fresh items over 2 users."""
    return ("\\set u1 random(1, {n})\n\\set u2 random(1, {n})\n\\set i random(4000000000, 9000000000)\n"
            f"INSERT INTO {table} (user_id, post_id) VALUES " +
            ", ".join(f"(:u{1 + k % 2}::bigint + {k}, :i::bigint + {k})" for k in range(20)) + ";\n").format(n=users - 20)


def section_writes():
    q = ARGS.quick
    users = READ_SIZES[q][3000]
    psql(NAIVE_SQL)
    TRACK_TRIGGERS[:] = [tuple(line.split("|")) for line in psql(
        "SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'r3000'::regclass "
        "AND NOT tgisinternal AND tgname <> 'naive_insert'").split()]
    naive_value = scalar_row("SELECT avg(pg_column_size(seen)), max(pg_column_size(seen)) FROM naive_seen")
    # The same rows in both layouts, layout 3 first: whichever runs second meets the rows as
    # the first left them. On a table just tracked (rows packed, no dead versions) a layout-2
    # update finds no room on its page, so layout 2 second writes non-HOT updates at first;
    # layout 3 after layout 2 added 1,002 B at replica in one run, against 127 B first (not
    # explained yet). Earlier runs measured layout 2 first on a fresh table: 245 B added.
    modes = ("plain", "tracked_after_compact", "tracked", "tracked_layout2", "naive")
    result = {"users": users, "items_per_user_before": 3000, "rows_per_statement": 20, "clients": 2,
              "naive_value_bytes_mean": naive_value[0], "tracked_triggers": TRACK_TRIGGERS[:]}
    # WAL per impression: batches of 20 rows over the users, right after a CHECKPOINT (full-page
    # images) and straight after that (steady state); full_page_writes on. At wal_level replica
    # and logical (where an UPDATE logs its whole new row), the cluster restarted between.
    # Tracked twice, in the two phases of every generation: tracked_after_compact right after
    # a compact that took the open generation in (min_bytes => 0: the state the routine run
    # leaves, once per generation), whose new items go to an exact row that each fold writes
    # as a new row version, as at the start of every generation before 0.5.0 too; then, after
    # 200 more items per user (past the exact row's 192 hashes), tracked in the open
    # generation's layer rows, written in place: the state 0.4.0's runs measured.
    rounds = 50 if q else 250
    wal = {}
    levels = ("replica", "logical") if ARGS.pg_data else (psql("SHOW wal_level"),)
    # The LSN is the cluster's: an autovacuum of these tables (due after the loads, and again
    # after a restart) would count its WAL as the batches'. None runs while WAL is measured.
    quiet_autovacuum(True)
    for j, level in enumerate(levels):
        if ARGS.pg_data:
            restart_cluster(level)
        w = {}
        for i, mode in enumerate(modes):
            write_mode(mode)
            if mode == "tracked_after_compact":
                psql("SET client_min_messages = warning; CALL seen_bloom.compact('r3000', min_bytes => 0);")
            elif mode == "tracked":
                psql(f"""INSERT INTO r3000 (user_id, post_id)
                         SELECT u, 7000000000 + {j} * 100000000 + u * 1000 + g
                         FROM generate_series(1, {users}) u, generate_series(1, 200) g;""")
            # Fresh items for each level and mode: items already held would write nothing.
            a_b = psql(f"""CHECKPOINT;
            SELECT pg_current_wal_lsn() AS a \\gset
            {batches_sql(rounds, users, 10 + i + 100 * j)}
            SELECT pg_current_wal_lsn() AS b \\gset
            {batches_sql(rounds, users, 20 + i + 100 * j)}
            SELECT pg_wal_lsn_diff(:'b', :'a'), pg_wal_lsn_diff(pg_current_wal_lsn(), :'b');""")
            first, second = (float(x) for x in a_b.splitlines()[-1].split("|"))
            w[mode] = {"after_checkpoint": first / (rounds * 20), "steady": second / (rounds * 20)}
        for mode in ("tracked_after_compact", "tracked", "tracked_layout2", "naive"):
            for phase in ("after_checkpoint", "steady"):
                w[mode][f"{phase}_added"] = w[mode][phase] - w["plain"][phase]
            w[mode]["after_checkpoint/plain"] = w[mode]["after_checkpoint"] / w["plain"]["after_checkpoint"]
        wal[level] = w
        log(f"  WAL per impression at {level} (steady / after checkpoint): " + ", ".join(
            f"{m} {w[m]['steady']:.0f} / {w[m]['after_checkpoint']:.0f} B" for m in modes))
    if ARGS.pg_data:
        restart_cluster("replica")
    quiet_autovacuum(False)
    # The figures of the cluster's own level stay where they were (older results read them).
    wal.update(wal[levels[0]])
    wal["rows"] = rounds * 20
    result["wal_bytes_per_impression"] = wal

    # Throughput, interleaved rounds.
    seconds = 2 if q else 10
    nrounds = 1 if q else 5
    insert = values_script(users)
    # The bulk path of applications that send arrays: one INSERT ... SELECT over two arrays
    # of 20 (sent as text literals: pgbench has no array parameters).
    from_arrays = ("\\set u1 random(1, {n})\n\\set u2 random(1, {n})\n\\set i random(4000000000, 9000000000)\n"
                   "INSERT INTO r3000 (user_id, post_id) SELECT u + k, p + k FROM unnest("
                   "'{{" + ",".join(f":u{1 + k % 2}" for k in range(20)) + "}}'::bigint[], "
                   "'{{" + ",".join(":i" for _ in range(20)) + "}}'::bigint[]) WITH ORDINALITY AS t(u, p, k);\n"
                   ).format(n=users - 21)
    madd = ["BF.MADD", "seen3000:__rand_int__"] + [f"i{k}:__rand_int__" for k in range(20)]
    tps = {}
    for _ in range(nrounds):
        for mode in (m for m in modes if m != "tracked_after_compact"):
            write_mode(mode)
            t, _ = pgbench(insert, seconds, clients=2)
            tps.setdefault(mode, []).append(t)
        rb = redis_benchmark(madd, int(seconds * 4000), clients=2, keyspace=users)
        tps.setdefault("redis_bf_madd", []).append(rb["rps"])
    ingest = {}
    for _ in range(nrounds):
        for mode in ("plain", "tracked", "tracked_layout2"):
            write_mode(mode)
            t, _ = pgbench(from_arrays, seconds, clients=2, prepared=False)
            ingest.setdefault("insert_select_arrays", {}).setdefault(mode, []).append(20 * t)
            ingest.setdefault("copy_10000", {}).setdefault(mode, []).append(copy_rows_per_s(users, 2 if q else 6))
    for kind, runs in ingest.items():
        for tracked in ("tracked", "tracked_layout2"):
            runs[f"{tracked}/plain_per_round"] = [t / p for t, p in zip(runs[tracked], runs["plain"])]
            runs[f"{tracked}/plain"] = statistics.median(runs[f"{tracked}/plain_per_round"])
        log(f"  {kind}: tracked/plain {runs['tracked/plain']:.2f} (rows/s plain "
            f"{statistics.median(runs['plain']):.0f}, tracked {statistics.median(runs['tracked']):.0f})")
    result["ingest"] = ingest
    write_mode("tracked")
    thr = {m: {"statements_per_s": statistics.median(v), "impressions_per_s": 20 * statistics.median(v),
               "runs": v} for m, v in tps.items()}
    # The ratio is measured side by side: each round's tracked run against the plain run just
    # before it (the machine drifts between rounds, both sides with it), median over rounds.
    for tracked in ("tracked", "tracked_layout2"):
        thr[f"{tracked}/plain_per_round"] = [t / p for t, p in zip(tps[tracked], tps["plain"])]
        thr[f"{tracked}/plain"] = statistics.median(thr[f"{tracked}/plain_per_round"])
    # The ratio of each side's median throughput, as reported before (drift not paired).
    thr["tracked/plain_of_medians"] = thr["tracked"]["statements_per_s"] / thr["plain"]["statements_per_s"]
    thr["naive/plain"] = thr["naive"]["statements_per_s"] / thr["plain"]["statements_per_s"]
    thr["redis_bf_madd/plain"] = thr["redis_bf_madd"]["statements_per_s"] / thr["plain"]["statements_per_s"]
    thr["seconds_per_run"] = seconds
    result["throughput"] = thr
    log("  throughput (20-row statements/s): " + ", ".join(
        f"{m} {thr[m]['statements_per_s']:.0f}" for m in (*modes, "redis_bf_madd") if m in thr))
    return result


# ---------------------------------------------------------------- 3. memory

MEMORY_ITEMS = (10, 100, 1000, 3000, 10000, 100000)


def section_memory():
    q = ARGS.quick
    tables = {**{s: f"r{s}" for s in READ_SIZES[q]}, **{s: f"m{s}" for s in MEMORY_EXTRA[q]}}
    users_of = {**READ_SIZES[q], **MEMORY_EXTRA[q]}
    r = rconn()
    rows = {}
    for n in MEMORY_ITEMS:
        t, users = tables[n], users_of[n]
        tracked, index, table = scalar_row(
            f"SELECT pg_total_relation_size('{t}_seen')::float8 / {users}, "
            f"pg_relation_size('{t}_user_post')::float8 / {users}, pg_total_relation_size('{t}')::float8 / {users}")
        scaling, fixed = scalar_row(
            f"SELECT pg_column_size(bloom_agg(g)), pg_column_size(bloom_add(bloom_empty(100000, 0.01, false), "
            f"array_agg(g))) FROM generate_series(1::bigint, {n}) g")
        key = f"mem:{n}"
        r.delete(key)
        r.execute_command("BF.RESERVE", key, 0.01, 100000)
        for start in range(0, n, 5000):
            r.execute_command("BF.MADD", key, *range(start, min(n, start + 5000)))
        rb = r.memory_usage(key, samples=0)
        rows[str(n)] = {"users": users, "seen_bloom_tracked_table": tracked, "bloom_value_scaling": scaling,
                        "bloom_value_fixed": fixed, "redisbloom_memory_usage": rb,
                        "exact_impressions_index": index, "exact_impressions_table_total": table}
        log(f"  {n} items: tracked {tracked:.0f} B/user, value {scaling:.0f} B, RedisBloom {rb} B, "
            f"exact index {index:.0f} B/user")
    v200 = scalar_row("SELECT pg_column_size(bloom_agg(g)) FROM generate_series(1::bigint, 200) g")[0]
    return {"bytes_per_user": rows, "bloom_value_200_items": v200,
            "note": "tracked table = pg_total_relation_size(filter table, indexes included) / users; "
                    "exact = the (user_id, post_id) index of the impressions / users"}


# ---------------------------------------------------------------- 4. accuracy

def sbbf_model(items, blocks):
    """The engine's model (crates/bloom-core sizing::modelled_fpr): an item lands in one
    32-byte block and needs one bit in each of its 8 lanes; block loads are Poisson."""
    if blocks == 0:
        return 1.0
    lam = items / blocks
    if lam <= 0:
        return 0.0
    total, weight_sum = 0.0, 0.0
    lo = max(0, int(lam - 40 * math.sqrt(lam) - 40))
    hi = int(lam + 40 * math.sqrt(lam) + 40)
    for j in range(lo, hi + 1):
        w = math.exp(-lam + j * math.log(lam) - math.lgamma(j + 1))
        weight_sum += w
        total += w * (1 - (31 / 32) ** j) ** 8
    return total / weight_sum


def model_of_info(info):
    if info["representation"] == "exact":
        return 0.0
    keep = 1.0
    for layer in info["layer_details"]:
        keep *= 1 - sbbf_model(layer["items"], layer["blocks"])
    return 1 - keep


def section_accuracy():
    q = ARGS.quick
    cap = 100000
    fresh = 20000 if q else 200000
    fills = [0.1, 0.25, 0.5, 1.0, 1.5, 2.0] if q else [round(0.1 * k, 1) for k in range(1, 21)]
    fresh_arr = f"ARRAY(SELECT g::bigint FROM generate_series(5000000001, {5000000000 + fresh}) g)"
    points = {"scaling": [], "fixed": []}
    for fill in fills:
        n = int(cap * fill)
        for kind in ("scaling", "fixed"):
            if kind == "fixed" and fill > 1.0:
                continue  # a fixed filter refuses adds past capacity (54000), as NONSCALING does
            build = (f"bloom_agg(g, {cap}, 0.01)" if kind == "scaling" else
                     f"bloom_add(bloom_empty({cap}, 0.01, false), array_agg(g))")
            out = psql(f"""SELECT bloom_info(f), {fresh} - cardinality(bloom_unseen(f, {fresh_arr})),
                   cardinality(bloom_unseen(f, ARRAY(SELECT g::bigint FROM generate_series(1, {n}) g)))
            FROM (SELECT {build} AS f FROM generate_series(1::bigint, {n}) g) s""")
            info_s, fp, fn = out.split("|")
            info = json.loads(info_s)
            points[kind].append({"fill": fill, "items": n, "false_positives": int(fp), "fresh_ids": fresh,
                                 "fpr": int(fp) / fresh, "false_negatives": int(fn),
                                 "model_fpr": model_of_info(info), "engine_estimate_fpr": info["estimated_fpr"],
                                 "representation": info["representation"], "layers": info["layers"],
                                 "bytes": info["bytes"]})
    # RedisBloom, same fills, one key grown step by step (scaling, and NONSCALING up to 1.0).
    r = rconn()
    fresh_ids = list(range(5000000001, 5000000001 + fresh))
    for kind, extra in (("redis_scaling", []), ("redis_fixed", ["NONSCALING"])):
        key = f"acc:{kind}"
        r.delete(key)
        r.execute_command("BF.RESERVE", key, 0.01, cap, *extra)
        have = 0
        points[kind] = []
        for fill in fills:
            n = int(cap * fill)
            if kind == "redis_fixed" and fill > 1.0:
                continue
            for start in range(have + 1, n + 1, 5000):
                r.execute_command("BF.MADD", key, *range(start, min(n, start + 4999) + 1))
            have = n
            fp = fn = 0
            pipe = r.pipeline(transaction=False)
            for start in range(0, fresh, 5000):
                pipe.execute_command("BF.MEXISTS", key, *fresh_ids[start:start + 5000])
            for start in range(1, n + 1, 5000):
                pipe.execute_command("BF.MEXISTS", key, *range(start, min(n, start + 4999) + 1))
            replies = pipe.execute()
            nf = (fresh + 4999) // 5000
            fp = sum(sum(x) for x in replies[:nf])
            fn = sum(len(x) - sum(x) for x in replies[nf:])
            points[kind].append({"fill": fill, "items": n, "false_positives": fp, "fresh_ids": fresh,
                                 "fpr": fp / fresh, "false_negatives": fn,
                                 "memory_usage": r.memory_usage(key, samples=0)})
    # The tracked window: one user, items spread over the 30-day window, added in steps
    # through the trigger; probed with seen_bloom.unseen.
    tfills = [0.25, 0.5, 1.0, 2.0] if q else [0.25, 0.5, 0.75, 1.0, 1.5, 2.0]
    psql(f"{create_impressions('acc_tracked')} SELECT seen_bloom.track('acc_tracked', 'user_id', 'post_id', 'seen_at');")
    have = 0
    points["tracked_window"] = []
    for fill in tfills:
        n = int(cap * fill)
        psql(f"""INSERT INTO acc_tracked (user_id, post_id, seen_at)
        SELECT 1, i, now() - ((i * 7919) % {cap})::float8 / {cap} * interval '29 days 23 hours'
        FROM generate_series({have + 1}, {n}) i;""")
        have = n
        fp, fn, nbytes = scalar_row(f"""SELECT {fresh} - cardinality(seen_bloom.unseen('acc_tracked', 1::bigint, {fresh_arr})),
            cardinality(seen_bloom.unseen('acc_tracked', 1::bigint, ARRAY(SELECT post_id FROM acc_tracked))),
            pg_total_relation_size('acc_tracked_seen')""")
        st = psql("SELECT estimated_fpr_mean FROM seen_bloom.stats('acc_tracked')")
        points["tracked_window"].append({"fill": fill, "items": n, "false_positives": int(fp), "fresh_ids": fresh,
                                         "fpr": fp / fresh, "false_negatives": int(fn),
                                         "engine_estimate_fpr": float(st), "filter_table_bytes": nbytes})
    for kind, pts in points.items():
        log(f"  {kind}: " + ", ".join(f"{p['fill']}x {100 * p['fpr']:.2f}%" for p in pts) +
            f"; false negatives {sum(p['false_negatives'] for p in pts)}")
    # The same user at capacity after seen_bloom.compact: one filter sized for its items.
    psql(f"""{create_impressions('acc_compacted')}
    SELECT seen_bloom.track('acc_compacted', 'user_id', 'post_id', 'seen_at');
    INSERT INTO acc_compacted (user_id, post_id, seen_at)
    SELECT 1, i, now() - ((i * 7919) % {cap})::float8 / {cap} * interval '29 days 23 hours'
    FROM generate_series(1, {cap}) i;
    SET client_min_messages = warning;
    CALL seen_bloom.compact('acc_compacted');""")
    fp, fn, rows, nbytes = scalar_row(f"""SELECT {fresh} - cardinality(seen_bloom.unseen('acc_compacted', 1::bigint, {fresh_arr})),
        cardinality(seen_bloom.unseen('acc_compacted', 1::bigint, ARRAY(SELECT post_id FROM acc_compacted))),
        (SELECT count(*) FROM acc_compacted_seen WHERE layer = -2), (SELECT sum(length(bits)) FROM acc_compacted_seen)""")
    compacted = {"items": cap, "false_positives": int(fp), "fresh_ids": fresh, "fpr": fp / fresh,
                 "false_negatives": int(fn), "compacted_rows": int(rows), "bits_bytes": int(nbytes)}
    log(f"  tracked window after compact, at capacity: {100 * compacted['fpr']:.2f}%, "
        f"false negatives {compacted['false_negatives']}")
    return {"capacity": cap, "target_error_rate": 0.01, "points": points, "compacted_at_capacity": compacted,
            "false_negatives_total": sum(p["false_negatives"] for pts in points.values() for p in pts)
            + compacted["false_negatives"],
            "model": "the engine's split-block model: per layer sum_j Poisson(j; items/blocks) * "
                     "(1 - (31/32)^j)^8, layers combined as 1 - prod(1 - p_layer); 0 while exact"}


# ---------------------------------------------------------------- 5. growth

def section_growth():
    q = ARGS.quick
    steps = [200, 1000, 3000] if q else [1000, 3000, 10000, 30000, 100000]
    items = 100
    repeats = 20 if q else 100
    seconds = 1 if q else 3
    chunk = 5000  # users per INSERT statement (the fold locks each user of a statement)
    psql(f"{create_impressions('gr')} SELECT seen_bloom.track('gr', 'user_id', 'post_id', 'seen_at');")
    have = 0
    rows = []
    rng = random.Random(5)
    crng = random.Random(6)
    cands = [crng.randint(2_000_000_000, 3_000_000_000) for _ in range(1000)]
    lit = "{" + ",".join(map(str, cands)) + "}"
    for users in steps:
        t0 = time.time()
        for first in range(have + 1, users + 1, chunk):
            psql(impressions_sql("gr", min(chunk, users - first + 1), items, first_user=first))
        have = users
        psql("VACUUM ANALYZE gr; VACUUM ANALYZE gr_seen;")
        load_s = time.time() - t0
        prewarm(["gr"])
        tracked, index = scalar_row(f"SELECT pg_total_relation_size('gr_seen')::float8 / {users}, "
                                    f"pg_relation_size('gr_user_post')::float8 / {users}")
        lines = ["PREPARE u(bigint, bigint[]) AS SELECT seen_bloom.unseen('gr', $1, $2);",
                 "PREPARE x(bigint, bigint[]) AS SELECT array_agg(c) FROM unnest($2) c WHERE NOT EXISTS "
                 "(SELECT 1 FROM gr i WHERE i.user_id = $1 AND i.post_id = c);"]
        for _ in range(repeats):
            u = rng.randint(1, users)
            arr = "'{" + ",".join(map(str, candidates(rng, u, items, 1000))) + "}'"
            for name in ("u", "x"):
                lines.append(f"\\echo @@{name}")
                lines.append(f"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) EXECUTE {name}({u}, {arr});")
        times = explain_times(lines)
        med = {k: statistics.median(v[max(1, len(v) // 10):]) for k, v in times.items()}
        script = f"\\set u random(1, {users})\nSELECT seen_bloom.unseen('gr', :u::bigint, :cands::bigint[]);\n"
        _, lat = pgbench(script, seconds, log_latency=True, defines=[("cands", lit)])
        row = {"users": users, "items_per_user": items, "seen_bloom_tracked_table_bytes_per_user": tracked,
               "exact_index_bytes_per_user": index, "unseen_server_median_us": med["u"],
               "anti_join_server_median_us": med["x"], "unseen_p50_us": pct(lat, 0.5),
               "unseen_p99_us": pct(lat, 0.99), "load_seconds": load_s}
        rows.append(row)
        log(f"  {users} users: unseen {med['u']:.0f} us server, p50 {row['unseen_p50_us']} us, "
            f"anti-join {med['x']:.0f} us; {tracked:.0f} B/user (exact index {index:.0f})")
    return {"items_per_user": items, "candidates": 1000, "points": rows}


# ---------------------------------------------------------------- machine

# ---------------------------------------------------------------- 6. generations

# The ends of what track accepts (2 and 60) and the choices between.
GENERATION_COUNTS = (2, 5, 10, 15, 30, 60)


def window_fpr_at_capacity(t, n):
    """One user tracked with `generations => n` holding the default capacity (100,000; 20,000
    and that capacity in --quick) spread evenly over the 30-day window, added through the
    trigger in 10 statements; the share of fresh ids `seen_bloom.unseen` drops, and how many
    held items it returns (false negatives)."""
    cap = 20000 if ARGS.quick else 100000
    fresh = 20000 if ARGS.quick else 200000
    psql(f"""{create_impressions(t)}
    SELECT seen_bloom.track('{t}', 'user_id', 'post_id', 'seen_at', capacity => {cap}, generations => {n});""")
    step = cap // 10
    for first in range(1, cap + 1, step):
        psql(f"""INSERT INTO {t} (user_id, post_id, seen_at)
        SELECT 1, i, now() - ((i * 7919) % {cap})::float8 / {cap} * interval '29 days 23 hours'
        FROM generate_series({first}, {first + step - 1}) i;""")
    fp, fn = scalar_row(f"""SELECT {fresh} - cardinality(seen_bloom.unseen('{t}', 1::bigint,
            ARRAY(SELECT g::bigint FROM generate_series(5000000001, {5000000000 + fresh}) g))),
        cardinality(seen_bloom.unseen('{t}', 1::bigint, ARRAY(SELECT post_id FROM {t})))""")
    return {"items": cap, "fresh_ids": fresh, "false_positives": int(fp), "fpr": fp / fresh,
            "false_negatives": int(fn), "target_error_rate": 0.01}


def section_generations():
    """What `track(..., generations => N)` costs: the same users (3,000 items spread over the
    30-day window) tracked with each N. Bytes per user, `seen_bloom.unseen` server time with
    1,000 candidates (half held), WAL per impression of 20-row batches in steady state, the
    window's edge error (window / N), and the window's false-positive rate at capacity (one
    user holding `capacity` items spread over the window, probed with fresh ids)."""
    q = ARGS.quick
    users = 30 if q else 300
    repeats = 10 if q else 60
    rounds = 20 if q else 100
    rows = {}
    for n in GENERATION_COUNTS:
        t = f"g{n}"
        psql(f"""{create_impressions(t)}
        SELECT seen_bloom.track('{t}', 'user_id', 'post_id', 'seen_at', generations => {n});
        {impressions_sql(t, users, 3000)}
        VACUUM ANALYZE {t}; VACUUM ANALYZE {t}_seen;""")
    prewarm([f"g{n}" for n in GENERATION_COUNTS])
    # Server side, interleaved: every N on the same user and candidates.
    rng = random.Random(6)
    lines = [f"PREPARE unseen_g{n}(bigint, bigint[]) AS SELECT seen_bloom.unseen('g{n}', $1, $2);"
             for n in GENERATION_COUNTS]
    for _ in range(repeats):
        u = rng.randint(1, users)
        arr = "'{" + ",".join(map(str, candidates(rng, u, 3000, 1000))) + "}'"
        order = list(GENERATION_COUNTS)
        rng.shuffle(order)
        for n in order:
            lines.append(f"\\echo @@{n}")
            lines.append(f"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) EXECUTE unseen_g{n}({u}, {arr});")
    times = explain_times(lines)
    for n in GENERATION_COUNTS:
        t = f"g{n}"
        ts = times[str(n)][max(1, len(times[str(n)]) // 10):]
        bytes_per_user = scalar_row(f"SELECT pg_total_relation_size('{t}_seen')::float8 / {users}")[0]
        # WAL: a warm round, then the measured one (no CHECKPOINT between: steady state).
        rng_b = random.Random(60 + n)

        def batches(k):
            return "\n".join(
                f"INSERT INTO {t} (user_id, post_id) VALUES " + ",".join(
                    f"({rng_b.randint(1, users)}, {rng_b.randint(4_000_000_000, 9_000_000_000)})"
                    for _ in range(20)) + ";" for _ in range(k))
        out = psql(f"""{batches(rounds)}
        SELECT pg_current_wal_lsn() AS a \\gset
        {batches(rounds)}
        SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), :'a');""")
        wal = float(out.splitlines()[-1]) / (rounds * 20)
        accuracy = window_fpr_at_capacity(f"gfpr{n}", n)
        rows[str(n)] = {"generations": n, "edge_error_days": 30 / n, "bytes_per_user": bytes_per_user,
                        "unseen_server_median_us": statistics.median(ts), "unseen_samples": len(ts),
                        "wal_bytes_per_impression_steady": wal, "at_capacity": accuracy}
        log(f"  generations {n}: {bytes_per_user:.0f} B/user, unseen {statistics.median(ts):.0f} us, "
            f"WAL {wal:.0f} B/impression, edge error {30 / n:.1f} days; at capacity "
            f"{100 * accuracy['fpr']:.2f}% false positives, {accuracy['false_negatives']} false negatives")
    wal_level = psql("SHOW wal_level").strip()
    return {"users": users, "items_per_user": 3000, "window_days": 30, "candidates": 1000,
            "wal_level": wal_level, "by_generations": rows}


# ---------------------------------------------------------------- 6b. sizing

# Users per profile (items per user -> users) and fresh ids probed per table.
# Enough users that a table's fixed pages (the free space map's 3 pages after VACUUM, the
# index's metapage: 32 KB) are under 3% of 3,000-item users' bytes in a full run.
SIZING_USERS = {False: {10: 1000, 300: 1000, 3000: 1000, 100000: 10}, True: {10: 100, 300: 100, 3000: 30, 100000: 1}}
SIZING_FRESH = {False: 100000, True: 20000}
SIZING_RATES = (0.01, 0.001)
SIZING_GENERATIONS = (5, 30)


def sizing_rows(t, users, items, generations):
    """The impressions of sizing_table: users of `items` items spread over the 30-day window,
    one generation's share of them (items / N) in the open generation. Returns the open
    generation's start (an SQL expression), the older rows' INSERT (before track: backfilled)
    and the open generation's, as impressions arrive: 20 per user per statement."""
    gen_seconds = 30 * 86400 // generations
    open_items = -(-items // generations)
    older = items - open_items
    # The open generation starts at a whole multiple of its length since 1970; the older items
    # spread evenly over the rest of the window.
    open_start = f"pg_catalog.to_timestamp(floor(extract(epoch FROM now()) / {gen_seconds}) * {gen_seconds})"
    old_rows = (f"INSERT INTO {t} (user_id, post_id, seen_at) "
                f"SELECT u, (u * 1000003 + i) % 1000000007, "
                f"{open_start} - interval '1 second' - ((i - {open_items} - 1)::float8 / {max(older, 1)}) "
                f"* ({open_start} - interval '1 second' - (now() - interval '29 days 23 hours')) "
                f"FROM generate_series(1::bigint, {users}) u, generate_series({open_items + 1}, {items}) i;")
    open_rows = "\n".join(
        f"INSERT INTO {t} (user_id, post_id, seen_at) "
        f"SELECT u, (u * 1000003 + i) % 1000000007, now() "
        f"FROM generate_series(1::bigint, {users}) u, generate_series({a}, {min(a + 19, open_items)}) i;"
        for a in range(1, open_items + 1, 20))
    return open_start, old_rows, open_rows


def sizing_bytes_sql(t, users):
    """Bytes per user of `t`'s filter table: the table with its index, their main forks, and
    the rows alone."""
    return (f"SELECT pg_total_relation_size('{t}_seen')::float8 / {users}, "
            f"(pg_relation_size('{t}_seen') + pg_relation_size('{t}_seen_pkey'))::float8 / {users}, "
            f"(SELECT coalesce(sum(pg_column_size(f.*)), 0) FROM {t}_seen f)::float8 / {users}")


def sizing_table(t, users, items, error_rate, generations, capacity):
    """A table of `users` users holding `items` items each over the 30-day window, tracked
    with that error rate, N and capacity (None: the default), measured in three states:
    - before: every item in layered rows, as 0.4.0 held users under its compaction threshold
      (the older items backfilled by track, the open generation's folded by inserts);
    - peak: the state just before a routine compact: the items up to the open generation in
      one compacted row, one generation's share of the items (items / N, the most a
      generation holds) in the open generation's layered rows;
    - after: right after the routine compact at the next generation boundary (compact
      with min_bytes => 0 takes every user then).
    A twin table holds the same impressions in the `before` state throughout: peak and after
    time `unseen` against it side by side (sizing_unseen_paired)."""
    cap = "" if capacity is None else f", capacity => {capacity}"
    open_start, old_rows, open_rows = sizing_rows(t, users, items, generations)
    size = sizing_bytes_sql(t, users)

    twin = f"{t}_l"

    def state(paired=False):
        """The state's figures. The table is rewritten first (VACUUM FULL): pages that
        compact's deletes and the exact rows' growth freed hold no user's bytes, and a running
        table reuses them; its size as left is kept beside."""
        psql(f"VACUUM {t}_seen;")
        as_left = scalar_row(size)[0]
        psql(f"VACUUM FULL {t}_seen; ANALYZE {t}_seen;")
        table, main, rows = scalar_row(size)
        fp, probes, fn = sizing_accuracy(t, users, SIZING_FRESH[ARGS.quick])
        st = {"table": table, "main_forks": main, "rows": rows, "false_positives": fp, "fresh_ids": probes,
              "fpr": fp / probes, "false_negatives": fn, "unseen_us": sizing_unseen_us(t, users, items),
              "table_as_left": as_left}
        if paired:
            st["unseen_paired"] = sizing_unseen_paired(t, twin, users, items)
        return st

    def compact(min_bytes):
        psql(f"SET client_min_messages = warning; CALL seen_bloom.compact('{t}', min_bytes => {min_bytes});")

    psql(f"""{create_impressions(t)}
    {old_rows}
    SELECT seen_bloom.track('{t}', 'user_id', 'post_id', 'seen_at', error_rate => {error_rate},
                            generations => {generations}{cap});
    {open_rows}
    CREATE TABLE {twin} (LIKE {t});
    INSERT INTO {twin} SELECT * FROM {t};
    SELECT seen_bloom.track('{twin}', 'user_id', 'post_id', 'seen_at', error_rate => {error_rate},
                            generations => {generations}{cap});
    VACUUM ANALYZE {twin}_seen;""")
    before = state()
    # The open generation's impressions folded again after a compaction of the older ones.
    psql(f"DELETE FROM {t} WHERE seen_at >= {open_start};")
    compact(65536)
    psql(open_rows)
    peak = state(paired=True)
    compact(0)
    after = state(paired=True)
    psql(f"DROP TABLE {twin} CASCADE")
    return before, peak, after


def sizing_accuracy(t, users, fresh, port=None):
    """False positives over `fresh` fresh ids spread over up to 10 users, and false negatives
    (held items `unseen` returns) of the same users."""
    probed = min(users, 10)
    per_user = fresh // probed
    fp, fn = scalar_row(f"""SELECT sum({per_user} - cardinality(seen_bloom.unseen('{t}', u::bigint,
            ARRAY(SELECT 9000000000 + u * 10000000 + g FROM generate_series(1, {per_user}) g)))),
        sum(cardinality(seen_bloom.unseen('{t}', u::bigint,
            ARRAY(SELECT post_id FROM {t} WHERE user_id = u))))
        FROM generate_series(1, {probed}) u""", port=port)
    return int(fp), per_user * probed, int(fn)


# Calls timed together in sizing_unseen_us and sizing_unseen_paired: clock_timestamp counts
# whole microseconds, and one call takes 8 to 12 of them, so a ratio of single calls moved by
# about 0.11 with one.
REPEATS = 10


def timed_unseen(t, into):
    """PL/pgSQL setting `into` to the server time of one `seen_bloom.unseen` on `t` of user `u`
    over candidates `c`, in microseconds: REPEATS calls timed together (needs `t0` and `n`)."""
    return (f"t0 := clock_timestamp(); FOR r IN 1..{REPEATS} LOOP "
            f"n := cardinality(seen_bloom.unseen('{t}', u::bigint, c)); END LOOP; "
            f"{into} := extract(epoch FROM clock_timestamp() - t0) * 1e6 / {REPEATS};")


def sizing_unseen_us(t, users, items, calls=20):
    """Median server time of one `seen_bloom.unseen` of 1,000 candidates (half of them held,
    when the user holds 500) over `calls` samples for each of up to 10 users, timed inside the
    server (clock_timestamp around REPEATS calls, divided by REPEATS)."""
    probed = min(users, 10)
    held = min(items, 500)
    return scalar_row(f"""
    CREATE FUNCTION pg_temp.time_unseen() RETURNS SETOF float8 LANGUAGE plpgsql AS $$
    DECLARE c bigint[]; t0 timestamptz; ta float8; n int;
    BEGIN
        FOR u IN 1..{probed} LOOP
            c := ARRAY(SELECT (u * 1000003 + i) % 1000000007 FROM generate_series(1, {held}) i
                       UNION ALL SELECT 9500000000 + u * 10000 + g FROM generate_series(1, {1000 - held}) g);
            FOR k IN 1..{calls} LOOP
                {timed_unseen(t, 'ta')}
                RETURN NEXT ta;
            END LOOP;
        END LOOP;
    END $$;
    SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) FROM pg_temp.time_unseen() x;""")[0]


def sizing_unseen_paired(t, twin, users, items, calls=20):
    """`seen_bloom.unseen` of the same 1,000 candidates (as sizing_unseen_us) on `t` and on
    `twin`, the same impressions in layered rows (as 0.4.0 held them), timed inside the server
    one right after the other, `calls` times for each of up to 10 users, the order swapped
    every call: the medians of each side, the geometric mean of the pairs' ratios t / twin
    (the ratio judged: a factor the order puts on the second call cancels in it), their
    median, and the median ratio of the pairs where `t` ran first and of those where the twin
    did."""
    probed = min(users, 10)
    held = min(items, 500)
    a, b, median, geomean, t_first, twin_first = scalar_row(f"""
    CREATE FUNCTION pg_temp.time_pairs() RETURNS TABLE (a float8, b float8, t_first bool) LANGUAGE plpgsql AS $$
    DECLARE c bigint[]; t0 timestamptz; ta float8; tb float8; n int;
    BEGIN
        FOR u IN 1..{probed} LOOP
            c := ARRAY(SELECT (u * 1000003 + i) % 1000000007 FROM generate_series(1, {held}) i
                       UNION ALL SELECT 9500000000 + u * 10000 + g FROM generate_series(1, {1000 - held}) g);
            FOR k IN 1..{calls} LOOP
                IF k % 2 = 0 THEN
                    {timed_unseen(t, 'ta')} {timed_unseen(twin, 'tb')}
                ELSE
                    {timed_unseen(twin, 'tb')} {timed_unseen(t, 'ta')}
                END IF;
                a := ta; b := tb; t_first := k % 2 = 0;
                RETURN NEXT;
            END LOOP;
        END LOOP;
    END $$;
    SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY a), percentile_cont(0.5) WITHIN GROUP (ORDER BY b),
           percentile_cont(0.5) WITHIN GROUP (ORDER BY a / b), exp(avg(ln(a / b))),
           percentile_cont(0.5) WITHIN GROUP (ORDER BY a / b) FILTER (WHERE t_first),
           percentile_cont(0.5) WITHIN GROUP (ORDER BY a / b) FILTER (WHERE NOT t_first)
    FROM pg_temp.time_pairs();""")
    return {"us": a, "layered_us": b, "ratio": geomean, "ratio_median": median,
            "ratio_table_first": t_first, "ratio_twin_first": twin_first}


def redisbloom_bytes(items, error_rate):
    """MEMORY USAGE of a RedisBloom key reserved for `items` at `error_rate`, holding them."""
    r = rconn()
    key = f"sizing:{items}:{error_rate}"
    r.delete(key)
    r.execute_command("BF.RESERVE", key, error_rate, items)
    for start in range(0, items, 5000):
        r.execute_command("BF.MADD", key, *range(start, min(items, start + 5000)))
    return r.memory_usage(key, samples=0)


def section_sizing():
    """Bytes per user against a well-sized Bloom filter: users of 10, 300, 3,000 and 100,000
    items spread over the 30-day window, tracked at 1% and 0.1% with N = 5 and 30 generations,
    with the default capacity and with capacity set to the profile; in the three states of
    sizing_table (right after the routine compaction, at its peak before it, and as 0.4.0
    held them), the filter table with its index per user, the rows alone, the false-positive
    rate over fresh ids, false negatives, the time of `unseen`, and beside them a RedisBloom key
    reserved for the same items at the same rate (MEMORY USAGE), the Bloom optimum
    1.44 log2(1/e) bits per item and the limit for any filter, log2(1/e)."""
    q = ARGS.quick
    fresh = SIZING_FRESH[q]
    rows = []
    for error_rate in SIZING_RATES:
        for items, users in SIZING_USERS[q].items():
            rb = redisbloom_bytes(items, error_rate)
            optimum = 1.44 * math.log2(1 / error_rate) * items / 8
            limit = math.log2(1 / error_rate) * items / 8
            for n in SIZING_GENERATIONS:
                for capacity in (None, items):
                    t = f"sz_{str(error_rate).replace('.', '')}_{n}_{items}_{'p' if capacity else 'd'}"
                    t0 = time.time()
                    before, peak, after = sizing_table(t, users, items, error_rate, n, capacity)
                    row = {"error_rate": error_rate, "generations": n, "items_per_user": items, "users": users,
                           "capacity": "default" if capacity is None else capacity,
                           "redisbloom_memory_usage": rb, "bloom_optimum_bytes": optimum, "limit_bytes": limit,
                           "before": before, "peak": peak, "after": after}
                    for name, st in (("after", after), ("peak", peak), ("before", before)):
                        row[f"{name}/redisbloom"] = st["table"] / rb
                    # Side by side with the twin in the before state (see sizing_unseen_paired).
                    row["unseen_after/before"] = after["unseen_paired"]["ratio"]
                    row["unseen_peak/before"] = peak["unseen_paired"]["ratio"]
                    rows.append(row)
                    psql(f"DROP TABLE {t} CASCADE")
                    log(f"  {error_rate:g}, N={n}, {items} items, capacity {capacity or 'default'}: "
                        + "; ".join(f"{name} {st['table']:.0f} B/user ({st['table'] / rb:.2f}x), "
                                    f"FP {100 * st['fpr']:.3f}%, FN {st['false_negatives']}, unseen {st['unseen_us']:.0f} us"
                                    for name, st in (("before", before), ("peak", peak), ("after", after)))
                        + f"; RedisBloom {rb} B, optimum {optimum:.0f} B, limit {limit:.0f} B ({time.time() - t0:.1f} s)")
    return {"rows": rows, "window_days": 30,
            "note": "table = pg_total_relation_size(filter table, its index included) / users after VACUUM; "
                    "main_forks = the heap's and the primary key's main forks only (no free space or visibility "
                    "map); rows = sum(pg_column_size) / users; states: see sizing_table"}


# ---------------------------------------------------------------- 6c. served log

# (users, impressions per user, served items per user) of the served-log data set.
SERVED_SIZES = {False: (1000, 3000, 60), True: (100, 300, 60)}


def section_served():
    """The feed's two tables (docs/FEED.md): `seen_bloom.unseen_in` over the impressions
    (30-day window) and a served log (10-minute window) in one call, against `unseen` of the
    impressions alone and against two nested `unseen` calls, one per table. Median server time
    of one call of 1,000 candidates (a fifth of them seen, a few served), over 20 users x 20
    calls, the three calls interleaved in one loop so that they share the machine's noise."""
    users, items, served = SERVED_SIZES[ARGS.quick]
    psql(f"""
    DROP TABLE IF EXISTS sv_imp, sv_log CASCADE;
    CREATE TABLE sv_imp (user_id bigint NOT NULL, post_id bigint NOT NULL, seen_at timestamptz NOT NULL DEFAULT now());
    CREATE TABLE sv_log (user_id bigint NOT NULL, post_id bigint NOT NULL, served_at timestamptz NOT NULL DEFAULT now());
    SELECT seen_bloom.track('sv_imp', 'user_id', 'post_id', 'seen_at');
    SELECT seen_bloom.track('sv_log', 'user_id', 'post_id', 'served_at', "window" => '10 minutes', generations => 2);
    INSERT INTO sv_imp (user_id, post_id, seen_at)
    SELECT u, (u * 1000003 + i) % 1000000007, now() - (i % 30) * interval '1 day'
    FROM generate_series(1, {users}) u, generate_series(1, {items}) i;
    INSERT INTO sv_log (user_id, post_id)
    SELECT u, 9000000000 + u * 1000 + i FROM generate_series(1, {users}) u, generate_series(1, {served}) i;
    VACUUM ANALYZE sv_imp_seen; VACUUM ANALYZE sv_log_seen;""")
    calls = {"one_table": "seen_bloom.unseen('sv_imp', u::bigint, c)",
             "unseen_in": "seen_bloom.unseen_in(ARRAY['sv_imp', 'sv_log']::regclass[], u::bigint, c)",
             "two_calls": "seen_bloom.unseen('sv_log', u::bigint, seen_bloom.unseen('sv_imp', u::bigint, c))"}
    body = "\n".join(f"""
                t0 := clock_timestamp();
                n := cardinality({call});
                RETURN QUERY SELECT '{name}'::text, extract(epoch FROM clock_timestamp() - t0)::float8 * 1e6, n;"""
                      for name, call in calls.items())
    out = psql(f"""
    CREATE FUNCTION pg_temp.time_served() RETURNS TABLE (call text, us float8, kept int) LANGUAGE plpgsql AS $$
    DECLARE c bigint[]; t0 timestamptz; n int;
    BEGIN
        FOR u IN 1..{min(users, 20)} LOOP
            c := ARRAY(SELECT (u * 1000003 + i) % 1000000007 FROM generate_series(1, 200) i
                       UNION ALL SELECT 9000000000 + u * 1000 + i FROM generate_series(1, 20) i
                       UNION ALL SELECT 9500000000 + u * 10000 + g FROM generate_series(1, 780) g);
            FOR k IN 1..20 LOOP{body}
            END LOOP;
        END LOOP;
    END $$;
    SELECT call, percentile_cont(0.5) WITHIN GROUP (ORDER BY us), min(kept), max(kept)
    FROM pg_temp.time_served() GROUP BY call ORDER BY call;""")
    med, kept = {}, {}
    for line in out.splitlines():
        name, us, lo, hi = line.split("|")
        med[name], kept[name] = float(us), (int(lo), int(hi))
    psql("DROP TABLE sv_imp, sv_log CASCADE")
    log(f"  1,000 candidates: one table {med['one_table']:.0f} us, unseen_in {med['unseen_in']:.0f} us, "
        f"two calls {med['two_calls']:.0f} us; kept {kept}")
    return {"users": users, "items_per_user": items, "served_per_user": served, "candidates": 1000,
            "median_us": med, "kept_min_max": kept,
            "unseen_in/one_table": med["unseen_in"] / med["one_table"],
            "unseen_in/two_calls": med["unseen_in"] / med["two_calls"]}


# ---------------------------------------------------------------- maintenance

# (users, impressions per user over the 30-day window) of the table the worker maintains.
MAINT_SIZES = {False: (2000, 300), True: (200, 300)}
MAINT_IDLE_SECONDS = {False: 60, True: 20}  # (quick runs)


def cluster_cpu_ticks():
    """CPU clock ticks of the cluster's postmaster (its own, and those of the children it has
    reaped: the short-lived maintenance workers) and of the maintenance launcher (/proc)."""
    with open(os.path.join(ARGS.pg_data, "postmaster.pid")) as f:
        pids = [int(f.readline())]
    launcher = psql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'seen_bloom maintenance launcher'").strip()
    if launcher:
        pids.append(int(launcher))
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    return total


def set_maintenance(on):
    psql(f"ALTER SYSTEM SET seen_bloom.maintenance = {'on' if on else 'off'}; SELECT pg_reload_conf();")
    time.sleep(1)


def section_maintenance():
    """The background maintenance worker (docs/OPERATIONS.md#maintenance): CPU while busy, its
    first run over a tracked table of `users` users whose impressions span the 30-day window
    (expire, and compact of every user: each has rows of closed generations), and while idle,
    the rounds after it with nothing due, beside the same time with the worker off. CPU is
    the postmaster's own and its reaped workers', plus the launcher's (/proc, clock ticks)."""
    if not ARGS.pg_data:
        log("  maintenance: needs the suite's own cluster (--pg-data); skipped")
        return {}
    users, items = MAINT_SIZES[ARGS.quick]
    hz = os.sysconf("SC_CLK_TCK")
    set_maintenance(False)
    psql(f"""
    DROP TABLE IF EXISTS mt_imp CASCADE;
    CREATE TABLE mt_imp (user_id bigint NOT NULL, post_id bigint NOT NULL, seen_at timestamptz NOT NULL DEFAULT now());
    CREATE INDEX ON mt_imp (user_id);
    SELECT seen_bloom.track('mt_imp', 'user_id', 'post_id', 'seen_at');
    INSERT INTO mt_imp (user_id, post_id, seen_at)
    SELECT u, (u * 1000003 + i) % 1000000007, now() - (i % 30) * interval '1 day' - interval '1 minute'
    FROM generate_series(1, {users}) u, generate_series(1, {items}) i;
    VACUUM ANALYZE mt_imp; VACUUM FULL mt_imp_seen;
    -- The other sections' tables count as maintained in their open generation: the worker
    -- would otherwise compact the shared data sets the writes section measures after this.
    DELETE FROM seen_bloom.maintenance;
    INSERT INTO seen_bloom.maintenance (impressions, last_generation)
    SELECT impressions, seen_bloom.generation_of(now(), generation_seconds) FROM seen_bloom.tracked
    WHERE impressions <> 'mt_imp'::regclass;""")
    bytes_before = float(psql("SELECT pg_total_relation_size('mt_imp_seen')::float8 / count(DISTINCT user_key) FROM mt_imp_seen"))
    # Busy: from on until every tracked table has had its run in its open generation.
    t0, c0 = time.time(), cluster_cpu_ticks()
    set_maintenance(True)
    pending = "1"
    while pending != "0" and time.time() - t0 < 1800:
        time.sleep(0.5)
        pending = psql("""SELECT count(*) FROM seen_bloom.tracked t LEFT JOIN seen_bloom.maintenance m USING (impressions)
                          WHERE t.impressions = 'mt_imp'::regclass
                            AND m.last_generation IS DISTINCT FROM seen_bloom.generation_of(now(), t.generation_seconds)""").strip()
    busy_wall, busy_ticks = time.time() - t0, cluster_cpu_ticks() - c0  # (wall: from the next round)
    run = psql("SELECT users_compacted, rows_expired, seconds, coalesce(last_error, '') FROM seen_bloom.maintenance "
               "WHERE impressions = 'mt_imp'::regclass").strip().split("|")
    tables = int(psql("SELECT count(*) FROM seen_bloom.maintenance WHERE runs > 0"))
    psql("VACUUM FULL mt_imp_seen")  # (sizes of the live rows, as before the run)
    bytes_after = float(psql("SELECT pg_total_relation_size('mt_imp_seen')::float8 / count(DISTINCT user_key) FROM mt_imp_seen"))
    # Idle: nothing due; the same time with the worker off beside it.
    c0 = cluster_cpu_ticks()
    time.sleep(MAINT_IDLE_SECONDS[ARGS.quick])
    idle_on = cluster_cpu_ticks() - c0
    set_maintenance(False)
    c0 = cluster_cpu_ticks()
    time.sleep(MAINT_IDLE_SECONDS[ARGS.quick])
    idle_off = cluster_cpu_ticks() - c0
    databases = int(psql("SELECT count(*) FROM pg_database WHERE datallowconn AND NOT datistemplate"))
    psql("DROP TABLE mt_imp CASCADE; DELETE FROM seen_bloom.maintenance;")
    ms = lambda ticks: ticks * 1000.0 / hz
    log(f"  busy: {run[0]} users compacted, {run[1]} rows expired in {float(run[2]):.1f} s "
        f"({busy_wall:.1f} s to the end of the round, {ms(busy_ticks):.0f} ms CPU; bytes per user "
        f"{bytes_before:.0f} -> {bytes_after:.0f}); idle {MAINT_IDLE_SECONDS[ARGS.quick]} s: {ms(idle_on):.0f} ms CPU on, "
        f"{ms(idle_off):.0f} ms off")
    return {"users": users, "items_per_user": items, "tracked_tables": tables, "databases": databases,
            "users_compacted": int(run[0]), "rows_expired": int(run[1]), "run_seconds": float(run[2]),
            "last_error": run[3], "busy_wall_seconds": busy_wall, "busy_cpu_ms": ms(busy_ticks),
            "bytes_per_user_before": bytes_before, "bytes_per_user_after": bytes_after,
            "idle_seconds": MAINT_IDLE_SECONDS[ARGS.quick], "idle_cpu_ms_on": ms(idle_on), "idle_cpu_ms_off": ms(idle_off),
            "naptime_seconds": int(psql("SELECT setting FROM pg_settings WHERE name = 'seen_bloom.maintenance_naptime'"))}


# ---------------------------------------------------------------- 7. citus

# (users, impressions per user) of the Citus data set. Each user holds `items` posts of a
# catalogue of 10,000; the candidates are 1,000 posts of that catalogue, so about a tenth of
# them are seen by any user.
CITUS_SIZES = {False: (2000, 1000), True: (200, 1000)}
CITUS_CATALOGUE = 10000
CITUS_SHARDS = 8
CITUS_DB = "postgres"  # citus-cluster.sh creates the citus extension in this database
# The read calls: name -> (where, what). The worker's call picks among users it holds.
CITUS_READS = {
    "delegated": ("coordinator", "SELECT imp_unseen($1, $2) (delegated to the user's worker)"),
    "single": ("single node", "SELECT seen_bloom.unseen('imp_local', $1, $2)"),
    "coordinator": ("coordinator", "SELECT seen_bloom.unseen('imp', $1, $2) (not delegated: filter rows fetched)"),
    "worker": ("worker holding the user", "SELECT imp_unseen($1, $2) (runs there)"),
}
# Ingest: 20-row INSERT ... VALUES, spread over 20 users (a batch of a queue consumer) or
# all for one user (a page of 20 served to one user). TABLE and NUSERS are filled in.
CITUS_SHAPES = {
    "spread": ("20 users per statement",
               "\\set u1 random(1, NUSERS)\n\\set u2 random(1, NUSERS)\n\\set i random(4000000000, 9000000000)\n"
               "INSERT INTO TABLE (user_id, post_id) VALUES " +
               ", ".join(f"(:u{1 + k % 2}::bigint + {k}, :i::bigint + {k})" for k in range(20)) + ";\n"),
    "one_user": ("1 user per statement",
                 "\\set u random(1, NUSERS)\n\\set i random(4000000000, 9000000000)\n"
                 "INSERT INTO TABLE (user_id, post_id) VALUES " +
                 ", ".join(f"(:u::bigint, :i::bigint + {k})" for k in range(20)) + ";\n"),
}
CITUS_SIDES = ("distributed tracked", "single tracked", "distributed plain", "single plain")


def citus_table(name):
    return (f"CREATE TABLE {name} (user_id bigint NOT NULL, post_id bigint NOT NULL, "
            f"seen_at timestamptz NOT NULL DEFAULT now());")


def citus_load(table, first, last, items, t0):
    """Users first..last, `items` impressions each, spread over the 30-day window before t0
    (the same instant on both sides: every item folds into the same generation on both)."""
    return (f"INSERT INTO {table} (user_id, post_id, seen_at) SELECT u, (u * 1009 + i) % {CITUS_CATALOGUE} + 1, "
            f"'{t0}'::timestamptz - (i::float8 / {items}) * interval '29 days 23 hours' "
            f"FROM generate_series({first}::bigint, {last}) u, generate_series(1, {items}) i;")


def citus_held(u, items):
    return {(u * 1009 + i) % CITUS_CATALOGUE + 1 for i in range(1, items + 1)}


def section_citus():
    """seen_bloom on Citus beside a single node, in the same run: reads (the delegated
    imp_unseen called on the coordinator, seen_bloom.unseen on the coordinator, a direct call
    on a worker; seen_bloom.unseen on the single node) and 20-row INSERTs into a tracked and an
    untracked table on each side. bench/run.sh (bench/citus.sh) starts the Citus cluster (a
    coordinator and two workers) and the single node (plain PostgreSQL, the same settings)."""
    if ARGS.citus_skip:
        log(f"  citus: SKIPPED: {ARGS.citus_skip}")
        return {"skipped": ARGS.citus_skip}
    if ARGS.citus_error:
        raise RuntimeError(ARGS.citus_error)
    q = ARGS.quick
    coord, single = ARGS.citus_port, ARGS.single_port
    users, items = CITUS_SIZES[q]

    def on(port, sql, **kw):
        return psql(sql, db=CITUS_DB, port=port, **kw)

    workers = [int(x) for x in on(coord, "SELECT nodeport FROM pg_dist_node WHERE groupid <> 0 "
                                         "AND noderole = 'primary' ORDER BY nodeport").split()]
    citus_nodes = [coord] + workers
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    git = lambda *a: subprocess.run(["git", "-C", root, *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
    result = {"machine": {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cores": os.cpu_count(),
        "citus": on(coord, "SELECT citus_version()").split(" on ")[0],
        "postgres": on(coord, "SELECT version()").split(" on ")[0],
        "seen_bloom_commit": git("rev-parse", "--short=12", "HEAD"),
        "seen_bloom_worktree_changes": bool(git("status", "--porcelain", "--", "src", "sql", "crates", "Cargo.toml")),
        "library_md5": library_hash(),
        "ports": {"coordinator": coord, "workers": workers, "single": single},
        "settings": {k: on(coord, f"SHOW {k}") for k in ("wal_level", "synchronous_commit", "fsync", "full_page_writes",
                                                          "shared_buffers", "checkpoint_timeout", "autovacuum")},
        "load_average_at_start": os.getloadavg()},
        "mode": "quick" if q else "full", "users": users, "items_per_user": items, "shards": CITUS_SHARDS,
        "catalogue": CITUS_CATALOGUE, "candidates": 1000}
    # Single node settings must match the Citus nodes' (bench/citus.sh writes the same lines).
    result["machine"]["settings_single"] = {k: on(single, f"SHOW {k}") for k in result["machine"]["settings"]}

    # The tables: tracked and plain on each side, the distributed ones co-located (8 shards).
    on(coord, f"""CREATE EXTENSION seen_bloom;
    SET citus.shard_count = {CITUS_SHARDS};
    {citus_table('imp')}
    SELECT create_distributed_table('imp', 'user_id');
    SELECT seen_bloom.track('imp', 'user_id', 'post_id', 'seen_at');
    {citus_table('imp_plain')}
    SELECT create_distributed_table('imp_plain', 'user_id', colocate_with => 'imp');""")
    result["machine"]["seen_bloom_version"] = on(coord, "SELECT extversion FROM pg_extension WHERE extname = 'seen_bloom'")
    on(single, f"""CREATE EXTENSION seen_bloom;
    {citus_table('imp_local')}
    SELECT seen_bloom.track('imp_local', 'user_id', 'post_id', 'seen_at');
    {citus_table('imp_local_plain')}""")
    # The same rows on both sides, loaded through the tracked tables (the trigger folds them),
    # 250 users per INSERT ... SELECT.
    t0 = on(coord, "SELECT now()")
    load = {}
    for side, port, table in (("distributed", coord, "imp"), ("single", single, "imp_local")):
        start = time.time()
        for first in range(1, users + 1, 250):
            on(port, citus_load(table, first, min(users, first + 249), items, t0))
        load[side] = {"seconds": time.time() - start, "rows": users * items,
                      "rows_per_s": users * items / (time.time() - start)}
    on(coord, "VACUUM ANALYZE imp; VACUUM ANALYZE imp_seen; VACUUM ANALYZE imp_plain;")
    on(single, "VACUUM ANALYZE imp_local; VACUUM ANALYZE imp_local_seen; VACUUM ANALYZE imp_local_plain;")
    result["load"] = load
    log(f"  citus: {users:,} users x {items:,} impressions loaded: distributed "
        f"{load['distributed']['seconds']:.1f} s, single node {load['single']['seconds']:.1f} s")

    sizes = {"distributed": float(on(coord, "SELECT citus_total_relation_size('imp_seen')")) / users,
             "single": float(on(single, "SELECT pg_total_relation_size('imp_local_seen')")) / users}
    stats = {}
    for side, port, table in (("distributed", coord, "imp"), ("single", single, "imp_local")):
        row = on(port, f"SELECT users, filter_rows, total_bytes, bytes_per_user_mean FROM seen_bloom.stats('{table}')")
        stats[side] = dict(zip(("users", "filter_rows", "total_bytes", "bytes_per_user_mean"), map(float, row.split("|"))))
    result["filter_bytes_per_user"] = sizes
    result["stats"] = stats

    # The answers: every path on Citus gives the same as the others for sample users, no
    # candidate a user holds comes back (no false negative), the single node beside them.
    rng = random.Random(77)
    cands = sorted(rng.sample(range(1, CITUS_CATALOGUE + 1), 1000))
    lit = "{" + ",".join(map(str, cands)) + "}"
    sample = rng.sample(range(1, users + 1), 20)
    calls = {"delegated": (coord, "imp_unseen({u}::bigint, '{lit}'::bigint[])"),
             "coordinator": (coord, "seen_bloom.unseen('imp', {u}::bigint, '{lit}'::bigint[])"),
             "worker": (workers[0], "imp_unseen({u}::bigint, '{lit}'::bigint[])"),
             "single": (single, "seen_bloom.unseen('imp_local', {u}::bigint, '{lit}'::bigint[])")}
    answers = {}
    for name, (port, call) in calls.items():
        out = on(port, "\n".join(f"SELECT {call.format(u=u, lit=lit)};" for u in sample))
        answers[name] = [{int(x) for x in line.strip("{}").split(",") if x} for line in out.splitlines()]
    candset = set(cands)
    false_neg = sum(len(answers[name][k] & citus_held(u, items)) for name in answers for k, u in enumerate(sample))
    held = [len(candset & citus_held(u, items)) for u in sample]
    false_pos = sum(len(candset - citus_held(u, items) - answers["delegated"][k]) for k, u in enumerate(sample))
    fresh = sum(1000 - h for h in held)
    same = {name: sum(answers[name][k] == answers["delegated"][k] for k in range(len(sample)))
            for name in ("coordinator", "worker", "single")}
    result["answers"] = {"users": len(sample), "candidates_held_mean": statistics.mean(held),
                         "false_negatives": false_neg, "false_positives": false_pos, "fresh_candidates": fresh,
                         "fpr": false_pos / fresh, "same_as_delegated": same}
    if false_neg or same["coordinator"] != len(sample) or same["worker"] != len(sample):
        raise RuntimeError(f"citus answers: {false_neg} false negatives, same as the delegated call: {same}")

    # Delegation, seen in the coordinator's log of the commands it sends to workers: one
    # statement per EXECUTE of the prepared call (the 6th and later ones included).
    delegation = {}
    for name, sql, mark in (("delegated", "SELECT imp_unseen($1, $2)", "imp_unseen("),
                            ("coordinator", "SELECT seen_bloom.unseen('imp', $1, $2)", "imp_seen")):
        _, msgs = on(coord, "SET citus.log_remote_commands = on; SET client_min_messages = notice;\n"
                            f"PREPARE p(bigint, bigint[]) AS {sql};\n" +
                            "\n".join(f"EXECUTE p({u}, '{lit}');" for u in sample[:8]), stderr=True)
        issued = [line for line in msgs.splitlines() if "issuing" in line]
        delegation[name] = {"executions": 8, "remote_commands": len(issued),
                            "commands_naming_" + mark.rstrip("("): sum(mark in line for line in issued),
                            "first": (issued[0][:160] + " ...") if issued else ""}
    result["delegation"] = delegation

    # Reads: pgbench -M prepared, 1 client, the candidates sent as a parameter on every call; a
    # random user per call (on the worker: one of up to 100 users it holds, a script each).
    w_users = [int(x) for x in on(coord, f"""SELECT u FROM generate_series(1, {users}) u WHERE EXISTS (
        SELECT 1 FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
         WHERE p.shardid = get_shard_id_for_distribution_column('imp', u) AND n.nodeport = {workers[0]})""").split()]
    w_sample = sorted(random.Random(78).sample(w_users, min(100, len(w_users))))

    def one(call):
        return f"\\set u random(1, {users})\nSELECT {call};\n"
    variants = {
        "delegated": (coord, [one("imp_unseen(:u::bigint, :cands::bigint[])")]),
        "single": (single, [one("seen_bloom.unseen('imp_local', :u::bigint, :cands::bigint[])")]),
        "coordinator": (coord, [one("seen_bloom.unseen('imp', :u::bigint, :cands::bigint[])")]),
        "worker": (workers[0], [f"\\set u {u}\nSELECT imp_unseen(:u::bigint, :cands::bigint[]);\n" for u in w_sample]),
    }
    repeats = 3 if q else 5
    seconds = 1 if q else 5
    for name, (port, scripts) in variants.items():  # warm-up: connections, plans, caches
        pgbench_run(scripts, 1, port=port, db=CITUS_DB, defines=[("cands", lit)])
    runs = {name: [] for name in variants}
    orders = (("delegated", "single", "coordinator", "worker"), ("single", "delegated", "worker", "coordinator"))
    for r in range(repeats):
        for name in orders[r % 2]:
            port, scripts = variants[name]
            lat = pgbench_run(scripts, seconds, port=port, db=CITUS_DB, log_latency=True,
                              defines=[("cands", lit)])["latencies_us"]
            runs[name].append({"avg_us": statistics.mean(lat), "p50_us": pct(lat, 0.5), "p99_us": pct(lat, 0.99),
                               "n": len(lat)})
    reads = {name: {**{k: statistics.median(x[k] for x in rs) for k in ("avg_us", "p50_us", "p99_us")},
                    "samples": sum(x["n"] for x in rs), "runs": rs} for name, rs in runs.items()}
    # Each repeat's figure against the single node's in the same repeat, median over repeats.
    reads["ratios_to_single"] = {
        name: {k: statistics.median(a[k] / b[k] for a, b in zip(runs[name], runs["single"]))
               for k in ("avg_us", "p50_us", "p99_us")} for name in ("delegated", "coordinator", "worker")}
    reads["worker_users"] = len(w_sample)
    result["reads"] = {"repeats": repeats, "seconds": seconds, "calls": reads}
    log("  citus reads, 1,000 candidates, avg / p50 / p99 us: " + "; ".join(
        f"{n} {reads[n]['avg_us']:.0f} / {reads[n]['p50_us']:.0f} / {reads[n]['p99_us']:.0f}" for n in variants) +
        f"; delegated / single (avg) {reads['ratios_to_single']['delegated']['avg_us']:.2f}")

    # Ingest: pgbench -M prepared, 2 clients, 20-row INSERTs of fresh items for loaded users;
    # the four tables in turn, the order alternating between rounds; WAL summed over the side's
    # nodes (for Citus: the coordinator's two-phase commit records included). Every run of a
    # shape inserts the same number of statements, so that both tracked tables hold the same
    # number of items throughout (a timed run would add ten times more to the faster single
    # node, whose filter rows, and their WAL, would then grow apart): as many as the
    # distributed tracked table takes in `seconds`, measured by a first run (its count then
    # given to the single node's tracked table too).
    rounds = 1 if q else 5
    seconds = 2 if q else 8
    sides = {"distributed tracked": (coord, "imp", citus_nodes), "single tracked": (single, "imp_local", [single]),
             "distributed plain": (coord, "imp_plain", citus_nodes),
             "single plain": (single, "imp_local_plain", [single])}
    for port in citus_nodes + [single]:
        on(port, "CHECKPOINT")
    orders = (CITUS_SIDES, ("single tracked", "distributed tracked", "single plain", "distributed plain"))
    ingest = {}
    for shape, (label, template) in CITUS_SHAPES.items():
        per = {side: {"rows_per_s": [], "wal_bytes_per_row": []} for side in CITUS_SIDES}

        def script(side):
            return template.replace("TABLE", sides[side][1]).replace("NUSERS", str(users - 20))
        first = pgbench_run([script("distributed tracked")], seconds, clients=2, port=coord, db=CITUS_DB)
        per_client = max(20, first["transactions"] // 2)
        pgbench_run([script("single tracked")], None, clients=2, port=single, db=CITUS_DB, per_client=per_client)
        for r in range(rounds):
            for side in orders[r % 2]:
                port, table, nodes = sides[side]
                before = [on(p, "SELECT pg_current_wal_lsn()") for p in nodes]
                run = pgbench_run([script(side)], None, clients=2, port=port, db=CITUS_DB, per_client=per_client)
                wal = sum(float(on(p, f"SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '{b}')"))
                          for p, b in zip(nodes, before))
                per[side]["rows_per_s"].append(20 * run["tps"])
                per[side]["wal_bytes_per_row"].append(wal / (20 * run["transactions"]))
        pairs = {"distributed/single, tracked": ("distributed tracked", "single tracked"),
                 "distributed/single, plain": ("distributed plain", "single plain"),
                 "tracked/plain, distributed": ("distributed tracked", "distributed plain"),
                 "tracked/plain, single": ("single tracked", "single plain")}
        ratios = {}
        for name, (a, b) in pairs.items():
            per_round = [x / y for x, y in zip(per[a]["rows_per_s"], per[b]["rows_per_s"])]
            ratios[name] = {"per_round": per_round, "median": statistics.median(per_round)}
        ingest[shape] = {"label": label, "statements_per_run": 2 * per_client, "ratios": ratios, "sides": {
            side: {"rows_per_s": statistics.median(v["rows_per_s"]),
                   "wal_bytes_per_row": statistics.median(v["wal_bytes_per_row"]), "runs": v}
            for side, v in per.items()}}
        log(f"  citus ingest, {label}: rows/s " + ", ".join(
            f"{s} {ingest[shape]['sides'][s]['rows_per_s']:,.0f}" for s in CITUS_SIDES) +
            f"; distributed/single tracked {ratios['distributed/single, tracked']['median']:.2f}")
    result["ingest"] = {"rounds": rounds, "seconds_calibrated": seconds, "clients": 2, "rows_per_statement": 20,
                        "shapes": ingest}
    result["machine"]["load_average_at_end"] = os.getloadavg()
    result["machine"]["library_changed"] = library_hash() != result["machine"]["library_md5"]
    return result


def machine():
    def cmd(*c):
        try:
            return subprocess.run(c, capture_output=True, text=True).stdout.strip()
        except OSError:
            return None
    cpu = next((line.split(":", 1)[1].strip() for line in cmd("lscpu").splitlines()
                if line.startswith("Model name")), platform.processor())
    info = rconn().info("server")
    modules = rconn().execute_command("MODULE", "LIST")
    bf = None
    for m in modules:
        d = {m[i].decode() if isinstance(m[i], bytes) else m[i]: m[i + 1] for i in range(0, len(m), 2)}
        if d.get("name") in (b"bf", "bf"):
            v = int(d["ver"])
            bf = f"{v // 10000}.{v // 100 % 100}.{v % 100}"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dirty = cmd("git", "-C", root, "status", "--porcelain", "--", "src", "sql", "crates", "Cargo.toml")
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpu_model": cpu, "cores": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "kernel": platform.release(),
        "postgres": psql("SELECT version()", db="postgres"),
        "redis": info.get("redis_version"), "redisbloom": bf,
        "seen_bloom_commit": cmd("git", "-C", root, "rev-parse", "--short=12", "HEAD"),
        "seen_bloom_worktree_changes": bool(dirty),
        "seen_bloom_version": psql("SELECT extversion FROM pg_extension WHERE extname = 'seen_bloom'"),
        "rustc": cmd("rustc", "--version"),
        "mode": "quick" if ARGS.quick else "full",
    }


# ---------------------------------------------------------------- completeness check

def missing_numbers(obj, path=""):
    """Paths of every number-less leaf: None, NaN, empty lists or dicts."""
    bad = []
    if isinstance(obj, dict):
        if not obj:
            bad.append(path)
        for k, v in obj.items():
            bad += missing_numbers(v, f"{path}.{k}")
    elif isinstance(obj, list):
        if not obj:
            bad.append(path)
        for i, v in enumerate(obj):
            bad += missing_numbers(v, f"{path}[{i}]")
    elif obj is None or (isinstance(obj, float) and math.isnan(obj)):
        bad.append(path)
    return bad


EXPECTED = {
    "reads": lambda r: [r["server_side"][str(s)][str(c)][m]["median_us"] for s in READ_SIZES[ARGS.quick]
                        for c in (100, 1000) for m in (*PG_READS, "redis_bf_mexists")] +
    [r["end_to_end"][str(s)][str(c)][m][k] for s in READ_SIZES[ARGS.quick] for c in (100, 1000)
     for m in (*E2E_PG, "redis_bf_mexists") for k in ("p50_us", "p99_us")],
    "writes": lambda r: [r["wal_bytes_per_impression"][m][p] for m in ("plain", "tracked", "naive")
                         for p in ("steady", "after_checkpoint")] +
    [r["throughput"][m]["statements_per_s"] for m in ("plain", "tracked", "naive", "redis_bf_madd")],
    "memory": lambda r: [r["bytes_per_user"][str(n)][k] for n in MEMORY_ITEMS
                         for k in ("seen_bloom_tracked_table", "bloom_value_scaling", "redisbloom_memory_usage",
                                   "exact_impressions_index")],
    "accuracy": lambda r: [p["fpr"] for k in ("scaling", "fixed", "redis_scaling", "tracked_window")
                           for p in r["points"][k]] + [r["false_negatives_total"], r["compacted_at_capacity"]["fpr"]],
    "growth": lambda r: [p[k] for p in r["points"] for k in ("unseen_server_median_us", "unseen_p50_us",
                                                               "seen_bloom_tracked_table_bytes_per_user")],
    "generations": lambda r: [g[k] for g in r["by_generations"].values() for k in (
        "bytes_per_user", "unseen_server_median_us", "wal_bytes_per_impression_steady")] +
    [g["at_capacity"]["fpr"] for g in r["by_generations"].values()],
    "sizing": lambda r: [row[state][k] for row in r["rows"] for state in ("before", "peak", "after")
                         for k in ("table", "rows", "fpr", "unseen_us")] +
    [row["redisbloom_memory_usage"] for row in r["rows"]],
    "served": lambda r: [r["median_us"][c] for c in ("one_table", "unseen_in", "two_calls")],
    "maintenance": lambda r: [r[k] for k in ("users_compacted", "run_seconds", "busy_cpu_ms", "idle_cpu_ms_on",
                                            "idle_cpu_ms_off")],
    "citus": lambda r: [r["reads"]["calls"][c][k] for c in CITUS_READS for k in ("avg_us", "p50_us", "p99_us")] +
    [r["ingest"]["shapes"][s]["sides"][d][k] for s in CITUS_SHAPES for d in CITUS_SIDES
     for k in ("rows_per_s", "wal_bytes_per_row")] + [r["filter_bytes_per_user"][d] for d in ("distributed", "single")],
}


def check(results, sections):
    problems = []
    for section in sections:
        r = results.get(section)
        if r is None or "error" in r:
            problems.append(f"{section}: did not run ({(r or {}).get('error', 'missing')})")
            continue
        if r.get("skipped"):  # a section that cannot run here (citus without Citus) says why
            continue
        try:
            values = EXPECTED[section](r)
        except (KeyError, IndexError, TypeError) as e:
            problems.append(f"{section}: missing {e!r}")
            continue
        bad = [v for v in values if not isinstance(v, (int, float)) or (isinstance(v, float) and math.isnan(v))]
        if not values or bad:
            problems.append(f"{section}: {len(bad)} of {len(values)} expected numbers missing")
        problems += [f"{section}: no number at {p}" for p in missing_numbers(r)]
    # The heavy users' compaction (setup) must have run where the read and memory data sets were.
    if {"reads", "memory"} & set(sections) and "100000" not in results.get("compact", {}):
        problems.append("setup: seen_bloom.compact compacted no 100,000-item user")
    sizing = results.get("sizing") or {}
    missed = sum(row.get("false_negatives", 0) for row in sizing.get("rows", []))
    if missed:
        problems.append(f"sizing: {missed} false negatives (must be 0)")
    acc = results.get("accuracy") or {}
    if acc.get("false_negatives_total"):
        problems.append(f"accuracy: {acc['false_negatives_total']} false negatives (must be 0)")
    return problems


SECTIONS = {"reads": section_reads, "writes": section_writes, "memory": section_memory,
            "accuracy": section_accuracy, "growth": section_growth, "generations": section_generations,
            "sizing": section_sizing, "served": section_served, "maintenance": section_maintenance,
            "citus": section_citus}


def library_hash():
    """The installed extension library: other builds on a shared machine may replace it."""
    import hashlib
    libdir = subprocess.run([os.path.join(ARGS.pg_bin, "pg_config"), "--pkglibdir"], capture_output=True,
                            text=True).stdout.strip()
    try:
        with open(os.path.join(libdir, "seen_bloom.so"), "rb") as f:
            return hashlib.md5(f.read()).hexdigest()
    except OSError:
        return None


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--pg-bin", default="/usr/lib/postgresql/15/bin")
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--unseen-client", default="", help="bench/unseen_client.c, built (binary-protocol end to end)")
    ap.add_argument("--sections", default=",".join(SECTIONS))
    ap.add_argument("--pg-data", default="", help="the cluster's data directory: WAL is then measured at "
                    "wal_level replica and logical (restarts the cluster)")
    ap.add_argument("--citus-port", type=int, default=0, help="the Citus coordinator (bench/citus.sh started it)")
    ap.add_argument("--single-port", type=int, default=0, help="the single node beside it (same settings, no Citus)")
    ap.add_argument("--citus-skip", default="", help="why the citus section cannot run here (it is then skipped)")
    ap.add_argument("--citus-error", default="", help="why the citus section's clusters did not start (it fails)")
    ARGS = ap.parse_args()
    os.makedirs(ARGS.out, exist_ok=True)
    t_start = time.time()
    load_at_start = os.getloadavg()
    lib_at_start = library_hash()
    log(f"setting up the data sets ({'quick' if ARGS.quick else 'full'} sizes)")
    setup()
    results = {"machine": machine()}
    results["machine"]["load_average_at_start"] = load_at_start
    results["setup_seconds"] = time.time() - t_start
    results["compact"] = COMPACTED
    # Order matters: the reads and the sizes on the data sets as set up; the writes then add rows.
    wanted = ARGS.sections.split(",")
    for name in ("reads", "memory", "accuracy", "growth", "generations", "sizing", "served", "maintenance", "writes",
                 "citus"):
        if name not in wanted:
            continue
        log(f"{name} ...")
        t0 = time.time()
        try:
            results[name] = SECTIONS[name]()
        except Exception as e:  # report, keep going, fail at the end
            import traceback
            traceback.print_exc()
            results[name] = {"error": repr(e)}
        results[name]["seconds"] = time.time() - t0
        with open(os.path.join(ARGS.out, f"{name}.json"), "w") as f:
            json.dump(results[name], f, indent=2)
    results["machine"]["load_average_at_end"] = os.getloadavg()
    results["machine"]["library_md5"] = lib_at_start
    results["machine"]["library_changed"] = library_hash() != lib_at_start
    results["total_seconds"] = time.time() - t_start
    with open(os.path.join(ARGS.out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    problems = check(results, wanted)
    if problems:
        print("MISSING NUMBERS:\n  " + "\n  ".join(problems[:50]), file=sys.stderr)
        sys.exit(1)
    skipped = [name for name in wanted if results.get(name, {}).get("skipped")]
    log(f"every section produced its numbers ({results['total_seconds']:.0f} s)" +
        (f"; skipped: {', '.join(skipped)}" if skipped else ""))


if __name__ == "__main__":
    main()

"""End-to-end latency of a 1,000-candidate seen_bloom.unseen call from psycopg 3, with
psycopg's default adaptation of a list of ints and with seen_bloom.psycopg.Int8Array (and,
when SQLAlchemy is installed, the same call through SQLAlchemy 2 on psycopg: text() with a
list, and seen_bloom.sqlalchemy.unseen, which sends an Int8Array).

    SEEN_BLOOM_DSN='host=127.0.0.1 port=5432 user=postgres dbname=postgres' \
        python clients/python/benchmarks/unseen_latency.py [--calls 1000] [--candidates 1000]

One connection, one tracked table of its own (dropped at the end), one user with 5,000 seen
items; every call asks about the same 1,000 candidates (64-bit ids, half of them seen). The
variants are interleaved call by call, after a warm-up, so that both see the same server,
cache and machine state; each call is timed from execute() to the fetched row. Also
reported: the client-side adaptation alone (the dump of the parameter, no server) and the
server's own time for the call (EXPLAIN ANALYZE's execution time).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time

import psycopg
from psycopg.adapt import PyFormat, Transformer

from seen_bloom.psycopg import Int8Array

try:
    import sqlalchemy as sa

    from seen_bloom import sqlalchemy as sb
except ImportError:
    sa = None

SQL = "SELECT seen_bloom.unseen({table}, %s::bigint, %s::bigint[])"


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="timed calls per variant (default 1000)")
    parser.add_argument("--candidates", type=int, default=1000, help="candidates per call (default 1000)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    args = parser.parse_args()
    dsn = os.environ.get("SEEN_BLOOM_DSN", "")
    rng = random.Random(20)
    base = 10_000_000_000  # 64-bit ids: psycopg sends them as int8[]
    seen = [base + rng.randrange(1, 1 << 40) for _ in range(5000)]
    candidates = rng.sample(seen, args.candidates // 2)
    candidates += [base + rng.randrange(1 << 40, 1 << 41) for _ in range(args.candidates - len(candidates))]
    rng.shuffle(candidates)
    seen_set = set(seen)
    want = [c for c in candidates if c not in seen_set]

    table = f"sb_latency_{os.getpid()}"
    engine = sa_conn = None
    if sa is not None and "://" in dsn:
        engine = sa.create_engine("postgresql+psycopg://" + dsn.split("://", 1)[1])
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        conn.execute("CREATE EXTENSION IF NOT EXISTS seen_bloom")
        conn.execute(f"CREATE TABLE {table} (user_id bigint, post_id bigint, seen_at timestamptz NOT NULL DEFAULT now())")
        try:
            conn.execute("SELECT seen_bloom.track(%s, 'user_id', 'post_id', 'seen_at')", [table])
            with conn.cursor().copy(f"COPY {table} (user_id, post_id) FROM STDIN") as copy:
                for item in seen:
                    copy.write_row((7, item))
            sql = SQL.format(table=f"'{table}'")
            # name -> (parameter, binary results); the first two are the comparison asked for,
            # the third shows what binary results add.
            params = {
                "list (psycopg default)": (list(candidates), False),
                "Int8Array (seen_bloom.psycopg)": (Int8Array(candidates), False),
                "Int8Array, binary results": (Int8Array(candidates), True),
            }
            calls = {
                name: (lambda value=value, binary=binary: conn.execute(sql, [7, value], binary=binary).fetchone()[0])
                for name, (value, binary) in params.items()
            }
            if engine is not None:
                # Autocommit, as the psycopg connection: each call its own transaction.
                sa_conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
                text_sql = sa.text(f"SELECT seen_bloom.unseen('{table}', CAST(:u AS bigint), CAST(:c AS bigint[]))")
                typed = sa.select(sb.unseen(table, 7, candidates))
                calls["SQLAlchemy text(), list"] = lambda: sa_conn.execute(text_sql, {"u": 7, "c": candidates}).scalar()
                calls["SQLAlchemy sb.unseen (Int8Array)"] = lambda: sa_conn.execute(typed).scalar()
            for name, call in calls.items():
                got = call()
                # Bloom filters may only drop unseen candidates (false positives), never keep
                # a seen one; at 5,000 items the filter is exact or close to it.
                if not set(got) <= set(want) or len(got) < 0.95 * len(want):
                    print(f"FAIL: {name}: unexpected answer ({len(got)} of {len(want)} unseen)", file=sys.stderr)
                    return 1
            for _ in range(100):  # warm-up, and past psycopg's prepare threshold
                for call in calls.values():
                    call()
            times: dict[str, list[float]] = {name: [] for name in calls}
            clock = time.perf_counter
            for _ in range(args.calls):
                for name, call in calls.items():
                    t0 = clock()
                    call()
                    times[name].append(clock() - t0)

            # The adaptation alone: what psycopg does to the parameter before sending it.
            dump_us = {}
            for name, (value, _) in params.items():
                samples = []
                for _ in range(200):
                    tx = Transformer(conn)
                    t0 = clock()
                    tx.dump_sequence([7, value], [PyFormat.AUTO, PyFormat.AUTO])
                    samples.append(clock() - t0)
                dump_us[name] = median_us(samples)
            server_ms = []
            for _ in range(50):
                plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, [7, Int8Array(candidates)]).fetchone()[0]
                server_ms.append(plan[0]["Execution Time"])
        finally:
            if sa_conn is not None:
                sa_conn.close()
            if engine is not None:
                engine.dispose()
            conn.execute(f"DROP TABLE {table}")  # drops the tracking with it

    names = list(calls)
    result = {
        "calls": args.calls,
        "candidates": args.candidates,
        "median_us": {n: round(median_us(times[n]), 1) for n in names},
        "p90_us": {n: round(statistics.quantiles(times[n], n=10)[-1] * 1e6, 1) for n in names},
        "adapt_us": {n: round(dump_us[n], 1) for n in dump_us},
        "server_us": round(statistics.median(server_ms) * 1000, 1),
        "ratio": round(median_us(times[names[0]]) / median_us(times[names[1]]), 2),
        "python": sys.version.split()[0],
        "psycopg": psycopg.__version__,
        "libpq": psycopg.pq.version(),
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"seen_bloom.unseen, {args.candidates} candidates, {args.calls} calls per variant, interleaved")
    print(f"{'variant':34} {'median':>10} {'p90':>10} {'adaptation':>12}")
    for n in names:
        adapt = f"{result['adapt_us'][n]:>10.1f}us" if n in dump_us else ""
        print(f"{n:34} {result['median_us'][n]:>8.1f}us {result['p90_us'][n]:>8.1f}us {adapt}")
    print(f"server execution time (EXPLAIN ANALYZE, median): {result['server_us']:.1f}us")
    print(f"ratio (default / Int8Array): {result['ratio']:.2f}x")
    print(f"Python {result['python']}, psycopg {result['psycopg']}, libpq {result['libpq']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

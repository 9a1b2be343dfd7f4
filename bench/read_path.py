#!/usr/bin/env python3
"""Read-path benchmark for issue 2: bloom_unseen vs the exact anti-join vs per-row contains.

One user holds 100,000 seen items, stored once as an impressions table (indexed) and once as
a bloom filter row. Each query filters the same 1,000 candidates (half seen). The three forms
run interleaved in one psql session, each EXPLAIN (ANALYZE, TIMING OFF) giving the server-side
execution time of the whole query (index lookup, detoast, filtering). Reports medians and
ratios; no thresholds are asserted here (benchmarks are not tests).

Usage: bench/read_path.py --port PORT [--repeats N] [--json OUT]
"""
import argparse
import json
import random
import re
import statistics
import subprocess
import sys

SETUP = """
DROP TABLE IF EXISTS bench_impressions, bench_filters;
CREATE TABLE bench_impressions (user_id bigint, item_id bigint);
INSERT INTO bench_impressions
SELECT 1, g * 7 FROM generate_series(1, 100000) g
UNION ALL SELECT 2 + g % 100, g FROM generate_series(1, 100000) g;
CREATE INDEX ON bench_impressions (user_id, item_id);
CREATE TABLE bench_filters (user_id bigint PRIMARY KEY, seen bloom);
INSERT INTO bench_filters SELECT user_id, bloom_agg(item_id) FROM bench_impressions GROUP BY user_id;
VACUUM ANALYZE bench_impressions;
VACUUM ANALYZE bench_filters;
"""

QUERIES = {
    "bloom_unseen": "SELECT bloom_unseen(seen, $1) FROM bench_filters WHERE user_id = 1",
    "per_row_contains": "SELECT array_agg(c) FROM bench_filters f, unnest($1::bigint[]) c "
    "WHERE f.user_id = 1 AND NOT bloom_contains(f.seen, c)",
    "exact_anti_join": "SELECT array_agg(c) FROM unnest($1::bigint[]) c WHERE NOT EXISTS "
    "(SELECT 1 FROM bench_impressions i WHERE i.user_id = 1 AND i.item_id = c)",
}


def psql(port, sql, db):
    out = subprocess.run(
        ["psql", "-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
         "-d", db, "-v", "ON_ERROR_STOP=1"],
        input=sql, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"psql failed: {out.stderr}")
    return out.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--db", default="postgres")
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--json")
    args = ap.parse_args()

    psql(args.port, "CREATE EXTENSION IF NOT EXISTS seen_bloom;" + SETUP, args.db)
    facts = psql(args.port, "SELECT pg_column_size(seen), bloom_cardinality(seen), "
                 "bloom_info(seen)->>'representation' FROM bench_filters WHERE user_id = 1", args.db)

    rng = random.Random(42)
    script = []
    for name, q in QUERIES.items():
        script.append(f"PREPARE {name}(bigint[]) AS {q};")
    order = list(QUERIES)
    for i in range(args.repeats):
        # half seen (multiples of 7 up to 700,000), half not
        cands = [7 * rng.randint(1, 100000) if j % 2 == 0 else 7 * rng.randint(1, 100000) + 1
                 for j in range(1000)]
        arr = "'{" + ",".join(map(str, cands)) + "}'"
        rng.shuffle(order)
        for name in order:
            script.append(f"\\echo {name}")
            script.append(f"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) EXECUTE {name}({arr});")
    out = psql(args.port, "\n".join(script), args.db)

    times = {name: [] for name in QUERIES}
    current = None
    buf = []
    for line in out.splitlines():
        if line.strip() in QUERIES:
            current = line.strip()
            continue
        m = re.search(r'"Execution Time": ([0-9.]+)', line)
        if m and current:
            times[current].append(float(m.group(1)) * 1000.0)  # ms -> us
    # The first executions warm caches and plans; drop the first 10%.
    skip = max(1, args.repeats // 10)
    result = {"filter": facts.strip(), "repeats": args.repeats, "median_us": {}, "p90_us": {}}
    for name, ts in times.items():
        ts = ts[skip:]
        result["median_us"][name] = round(statistics.median(ts), 1)
        result["p90_us"][name] = round(sorted(ts)[int(len(ts) * 0.9)], 1)
    med = result["median_us"]
    result["anti_join_over_bloom_unseen"] = round(med["exact_anti_join"] / med["bloom_unseen"], 1)
    result["per_row_over_bloom_unseen"] = round(med["per_row_contains"] / med["bloom_unseen"], 2)
    print(f"filter (bytes | items | representation): {result['filter']}")
    print(f"{'query':<20} {'median us':>10} {'p90 us':>10}")
    for name in QUERIES:
        print(f"{name:<20} {result['median_us'][name]:>10} {result['p90_us'][name]:>10}")
    print(f"exact anti-join / bloom_unseen: {result['anti_join_over_bloom_unseen']}x")
    print(f"per-row contains / bloom_unseen: {result['per_row_over_bloom_unseen']}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()

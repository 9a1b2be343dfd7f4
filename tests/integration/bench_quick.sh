#!/usr/bin/env bash
# test.sh: once (does not depend on the PostgreSQL major under test)
# The benchmark suite in its quick mode, so it never rots: bench/run.sh --quick starts its own
# PostgreSQL cluster and Redis (RedisBloom) on loopback ports, runs every section at small
# sizes, and exits non-zero if any section failed to produce its numbers (never on a timing).
# It uses the seen_bloom already installed (test.sh installed the release build).
# Usage: bench_quick.sh PG_BIN PORT   (both ignored: the suite brings its own cluster)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
out="$ROOT/target/bench-quick"
rm -rf "$out"
BENCH_OUT="$out" BENCH_PORT="${BENCH_QUICK_PORT:-25496}" REDIS_PORT="${BENCH_QUICK_REDIS_PORT:-6396}" \
    "$ROOT/bench/run.sh" --quick --no-install
# Belt and braces: the files the suite promises are there and hold numbers.
for f in results.json reads.json writes.json memory.json accuracy.json growth.json SUMMARY.md \
    reads.png writes.png memory.png accuracy.png growth.png; do
    [ -s "$out/$f" ] || fail "$out/$f missing or empty"
done
if grep -q "n/a" "$out/SUMMARY.md"; then
    fail "SUMMARY.md has figures missing (n/a)"
fi
echo "    quick benchmark: every section produced its numbers ($out/SUMMARY.md)"

#!/usr/bin/env bash
# README command 2: every test. Usage: scripts/test.sh [--pg MAJORS]
#   MAJORS: comma-separated PostgreSQL majors (13,14,15,16,17,18) or `all`; default 15.
# Set-up as needed (majors other than 15 are fetched and cached by scripts/pg_majors.sh), then
#   0. lint, once: cargo fmt --check, cargo clippy --workspace --all-targets -D warnings, the
#      shell scripts (scripts/, tests/, bench/*.sh, .ci/run) through shellcheck (.shellcheckrc
#      says what is off), scripts/check_docs.sh (the docs' paths, links, no issue numbers) and
#      scripts/check_modules.py (src/'s layers: no module cycle, no long file or function;
#      with its self-test),
#   1. the engine's unit, golden-byte and property tests (no server), once,
#   and for each major:
#   2. the #[pg_test] suite (cargo pgrx test pgNN, server-side properties),
#   3. the pg_regress SQL tests against a release install on a throwaway cluster,
#   4. every integration script tests/integration/*.sh, in name order; each gets PG_BIN and
#      the port of that cluster, and may start clusters of its own on its own loopback ports.
#      SEEN_BLOOM_LONG=1 selects their long variants (CI runs the bounded ones).
#   Scripts marked with a line `# test.sh: once` do not depend on the major under test
#   (pg_upgrade.sh: 15 to 17; package_deb.sh: the Debian 15 package; private_checkout.sh:
#   scripts run from a copy of the checkout the postgres user cannot enter): they run once,
#   after the majors, with PostgreSQL 15's bin dir and the port of a fresh PostgreSQL 15
#   cluster (release extension installed). Scripts marked `# test.sh: one major` run on one
#   major of the list (15 when it is there, else the first; SEEN_BLOOM_ALL_INTEGRATION=1: on
#   each). PG_MAJOR is exported to every script (sourcing common.sh then gives the major under
#   test).
# Skips: a script that cannot run here says why with common.sh's skip (the whole script) or
#   skip_part (a part of it), which print "SKIP NAME: REASON" and append a line to
#   target/<prefix>skips.log (SEEN_BLOOM_SKIP_LOG). The closing summary counts them per major
#   in its time table and lists each with its reason. ALLOWED_SKIPS (below) is the one list of
#   skips a run may have, each with why; any other skip fails the run when CI is true (or 1)
#   or SEEN_BLOOM_STRICT_SKIPS=1 (=0: never), so that no test stops running unnoticed
#   (.ci/run's command has none on the CI machine). Elsewhere (a fresh machine without
#   ../shared/vendor, whose citus.sh skips, say) it is listed as one CI would refuse, and the
#   run passes.
# Exits non-zero on the first failure.
# Environment: REGRESS_PORT (25433), SEEN_BLOOM_CLUSTER_PREFIX (a prefix for the cluster and
# output dirs under target/, so two runs on one machine do not meet), SEEN_BLOOM_INTEGRATION
# (comma-separated script names without .sh: run only those integration scripts).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$ROOT" || exit 1

pg_spec=15
while [ "$#" -gt 0 ]; do
    case "$1" in
    --pg) pg_spec="${2:?--pg needs a list of majors, e.g. 13,15,18 or all}"; shift 2 ;;
    --pg=*) pg_spec="${1#--pg=}"; shift ;;
    -h | --help) sed -n '/^source/q;2,$p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (usage: scripts/test.sh [--pg 13,15,18|all])" >&2; exit 2 ;;
    esac
done
mapfile -t majors < <(parse_majors "$pg_spec")
[ "${#majors[@]}" -gt 0 ] || { echo "no majors given" >&2; exit 2; }
one_major="${majors[0]}"
for m in "${majors[@]}"; do [ "$m" = 15 ] && one_major=15; done
prefix="${SEEN_BLOOM_CLUSTER_PREFIX:-}"
port="${REGRESS_PORT:-25433}"

# The skips a run may have, NAME|MAJORS|why (NAME as common.sh's skip prints it). Any other
# fails CI (see the header).
ALLOWED_SKIPS=(
    "citus.sh|13,14,18|Citus 13.2.2 builds for PostgreSQL 15 to 17 only"
    "repack.sh|13,14,16,17,18|pg_repack is Debian's postgresql-15-repack: PostgreSQL 15 only"
)
skip_allowed() { # NAME MAJOR: prints why that skip is allowed, nothing when it is not
    local entry name majors why
    for entry in "${ALLOWED_SKIPS[@]}"; do
        IFS='|' read -r name majors why <<<"$entry"
        if [ "$name" = "$1" ] && [[ ",$majors," == *",$2,"* ]]; then
            echo "$why"
            return
        fi
    done
}
# Strict in CI (CI=true or 1); SEEN_BLOOM_STRICT_SKIPS=1 or 0 says so anywhere.
strict_skips=0
case "${CI:-}" in true | TRUE | True | 1) strict_skips=1 ;; esac
case "${SEEN_BLOOM_STRICT_SKIPS:-}" in 1) strict_skips=1 ;; 0) strict_skips=0 ;; esac
mkdir -p "$ROOT/target"
export SEEN_BLOOM_SKIP_LOG="$ROOT/target/${prefix}skips.log"
: >"$SEEN_BLOOM_SKIP_LOG"
skip_count() { wc -l <"$SEEN_BLOOM_SKIP_LOG"; }

# Scripts that run once need their majors too (pg_upgrade: 15 and 17).
once_scripts=()
per_major_scripts=()
one_major_scripts=()
for script in "$ROOT"/tests/integration/*.sh; do
    [ "$(basename "$script")" = lib.sh ] && continue # the scripts' shared helpers
    if [ -n "${SEEN_BLOOM_INTEGRATION:-}" ]; then
        case ",${SEEN_BLOOM_INTEGRATION// /,}," in *",$(basename "$script" .sh),"*) ;; *) continue ;; esac
    fi
    if grep -q '^# test.sh: once' "$script"; then
        once_scripts+=("$script")
    elif grep -q '^# test.sh: one major' "$script" && [ "${SEEN_BLOOM_ALL_INTEGRATION:-0}" != 1 ]; then
        one_major_scripts+=("$script")
    else
        per_major_scripts+=("$script")
    fi
done
wanted=("${majors[@]}")
if [ "${#once_scripts[@]}" -gt 0 ]; then wanted+=(15 17); fi
mapfile -t wanted < <(printf '%s\n' "${wanted[@]}" | sort -un)

t_start=$SECONDS
setup
for m in "${wanted[@]}"; do ensure_pg_major "$m"; done
pgrx_init_majors
t_setup=$((SECONDS - t_start))

step "0/4 Lint: cargo fmt --check, cargo clippy -D warnings, shellcheck, docs, modules"
t0=$SECONDS
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
shellcheck scripts/*.sh tests/integration/*.sh tests/pg_regress/*.sh bench/*.sh .ci/run
scripts/check_docs.sh
python3 scripts/check_modules.py --self-test
python3 scripts/check_modules.py
note "lint clean in $((SECONDS - t0))s"

step "1/4 Engine tests: cargo test -p bloom-core --release"
t0=$SECONDS
cargo test -p bloom-core --release
t_engine=$((SECONDS - t0))

trap stop_cluster EXIT
summary=()
# Each integration script's seconds, slowest first at the end: where CI's time goes.
timings=()
for major in "${majors[@]}"; do
    use_pg_major "$major"
    # PostgreSQL 15 keeps the dir names it always had.
    suffix=""
    [ "$major" = 15 ] || suffix="-pg${major}"

    step "PostgreSQL ${major} 2/4 Server-side tests: cargo pgrx test pg${major}"
    t0=$SECONDS
    if [ "$(id -u)" -eq 0 ]; then
        # initdb refuses root: run the test cluster as postgres, in a data dir it owns.
        PGDATA_DIR="$(cluster_dir "${prefix}pgrx-test-pgdata${suffix}")"
        rm -rf "$PGDATA_DIR"
        mkdir -p "$PGDATA_DIR"
        chown postgres:postgres "$PGDATA_DIR"
        cargo pgrx test "pg${major}" --runas postgres --pgdata "$PGDATA_DIR"
    else
        cargo pgrx test "pg${major}"
    fi
    t_pgtest=$((SECONDS - t0))

    step "PostgreSQL ${major} 3/4 SQL tests: pg_regress"
    t0=$SECONDS
    install_extension
    start_cluster "$(cluster_dir "${prefix}regress-cluster${suffix}")" "$port" "max_prepared_transactions = 4"
    PG_REGRESS_OUT="$ROOT/target/${prefix}pg_regress${suffix}" "$ROOT/tests/pg_regress/run.sh" "$PG_BIN" "$CLUSTER_PORT"
    t_regress=$((SECONDS - t0))

    t0=$SECONDS
    skips0="$(skip_count)"
    scripts=("${per_major_scripts[@]}")
    if [ "$major" = "$one_major" ]; then scripts+=("${one_major_scripts[@]}"); fi
    mapfile -t scripts < <(printf '%s\n' "${scripts[@]}" | sed '/^$/d' | sort)
    for script in "${scripts[@]}"; do
        step "PostgreSQL ${major} 4/4 Integration: $(basename "$script")"
        # Scripts that source common.sh see the major under test too.
        s0=$SECONDS
        PG_MAJOR="$major" "$script" "$PG_BIN" "$CLUSTER_PORT"
        timings+=("$major $(basename "$script") $((SECONDS - s0))s")
    done
    t_integration=$((SECONDS - t0))
    stop_cluster
    CLUSTER_DIR=""
    summary+=("$(printf '%-6s %-12s %-10s %-12s %-6s %-8s %s' "$major" "${t_pgtest}s" "${t_regress}s" "${t_integration}s" \
        "$(($(skip_count) - skips0))" "$((t_pgtest + t_regress + t_integration))s" "$("$PG_CONFIG" --version)")")
done

t_once=0
skips0="$(skip_count)"
if [ "${#once_scripts[@]}" -gt 0 ]; then
    t0=$SECONDS
    use_pg_major 15
    install_extension
    start_cluster "$(cluster_dir "${prefix}regress-cluster")" "$port" "max_prepared_transactions = 4"
    for script in "${once_scripts[@]}"; do
        step "Integration (once): $(basename "$script")"
        s0=$SECONDS
        PG_MAJOR=15 "$script" "$PG_BIN" "$CLUSTER_PORT"
        timings+=("once $(basename "$script") $((SECONDS - s0))s")
    done
    stop_cluster
    # shellcheck disable=SC2034 # read by stop_cluster (common.sh), the EXIT trap
    CLUSTER_DIR=""
    t_once=$((SECONDS - t0))
fi

skips_once=$(($(skip_count) - skips0))

# Every skip with its reason; those not on ALLOWED_SKIPS fail the run in CI.
skip_lines=()
refused=0
while IFS=$'\t' read -r name major reason; do
    why="$(skip_allowed "$name" "$major")"
    if [ -n "$why" ]; then
        skip_lines+=("PostgreSQL $major, $name: $reason (allowed: $why)")
    else
        skip_lines+=("PostgreSQL $major, $name: $reason (NOT on ALLOWED_SKIPS in scripts/test.sh)")
        refused=$((refused + 1))
    fi
done <"$SEEN_BLOOM_SKIP_LOG"

if [ "$refused" -gt 0 ] && [ "$strict_skips" = 1 ]; then
    step "Every test that ran passed (PostgreSQL ${majors[*]}), but $refused skip(s) not on the allowed list"
else
    step "All tests passed (PostgreSQL ${majors[*]})"
fi
note "set-up ${t_setup}s, engine tests ${t_engine}s, once-only integration ${t_once}s (${skips_once} skips), total $((SECONDS - t_start))s"
note "$(printf '%-6s %-12s %-10s %-12s %-6s %-8s %s' major '#[pg_test]' pg_regress integration skips total version)"
for line in "${summary[@]}"; do note "$line"; done
note "slowest integration scripts (major, script, seconds):"
printf '%s\n' "${timings[@]}" | sort -k3 -n -r | sed -n 1,12p | while read -r line; do note "  $line"; done
if [ "${#skip_lines[@]}" -eq 0 ]; then
    note "skipped: nothing"
else
    note "skipped (${#skip_lines[@]}):"
    for line in "${skip_lines[@]}"; do note "  SKIP $line"; done
fi
if [ "$refused" -gt 0 ]; then
    if [ "$strict_skips" = 1 ]; then
        echo "$refused skip(s) not on ALLOWED_SKIPS (scripts/test.sh): a test stopped running; make it run, or allow the skip there with its reason" >&2
        exit 1
    fi
    note "$refused skip(s) not on ALLOWED_SKIPS: CI (CI=true, or SEEN_BLOOM_STRICT_SKIPS=1) would fail this run"
fi

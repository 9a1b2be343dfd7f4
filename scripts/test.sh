#!/usr/bin/env bash
# README command 2: every test. Usage: scripts/test.sh [--pg MAJORS]
#   MAJORS: comma-separated PostgreSQL majors (13,14,15,16,17,18) or `all`; default 15.
# Set-up as needed (majors other than 15 are fetched and cached by scripts/pg_majors.sh), then
#   0. lint, once: cargo fmt --check, cargo clippy --workspace --all-targets -D warnings, and
#      the shell scripts (scripts/, tests/, bench/*.sh, .ci/run) through shellcheck
#      (.shellcheckrc says what is off),
#   1. the engine's unit, golden-byte and property tests (no server), once,
#   and for each major:
#   2. the #[pg_test] suite (cargo pgrx test pgNN, server-side properties),
#   3. the pg_regress SQL tests against a release install on a throwaway cluster,
#   4. every integration script tests/integration/*.sh, in name order; each gets PG_BIN and
#      the port of that cluster, and may start clusters of its own on its own loopback ports.
#      SEEN_BLOOM_LONG=1 selects their long variants (CI runs the bounded ones).
#   Scripts marked with a line `# test.sh: once` do not depend on the major under test
#   (pg_upgrade.sh: 15 to 17; package_deb.sh: the Debian 15 package): they run once, after
#   the majors, with PostgreSQL 15's bin dir and the port of a fresh PostgreSQL 15 cluster
#   (release extension installed). PG_MAJOR is exported to every script (sourcing common.sh
#   then gives the major under test).
# Exits non-zero on the first failure.
# Environment: REGRESS_PORT (55433), SEEN_BLOOM_CLUSTER_PREFIX (a prefix for the cluster and
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
port="${REGRESS_PORT:-55433}"

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

step "0/4 Lint: cargo fmt --check, cargo clippy -D warnings, shellcheck"
t0=$SECONDS
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
shellcheck scripts/*.sh tests/integration/*.sh tests/pg_regress/*.sh bench/*.sh .ci/run
scripts/check_docs.sh
note "lint clean in $((SECONDS - t0))s"

step "1/4 Engine tests: cargo test -p bloom-core --release"
t0=$SECONDS
cargo test -p bloom-core --release
t_engine=$((SECONDS - t0))

trap stop_cluster EXIT
summary=()
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
    scripts=("${per_major_scripts[@]}")
    if [ "$major" = "$one_major" ]; then scripts+=("${one_major_scripts[@]}"); fi
    mapfile -t scripts < <(printf '%s\n' "${scripts[@]}" | sed '/^$/d' | sort)
    for script in "${scripts[@]}"; do
        step "PostgreSQL ${major} 4/4 Integration: $(basename "$script")"
        # Scripts that source common.sh see the major under test too.
        PG_MAJOR="$major" "$script" "$PG_BIN" "$CLUSTER_PORT"
    done
    t_integration=$((SECONDS - t0))
    stop_cluster
    CLUSTER_DIR=""
    summary+=("$(printf '%-6s %-12s %-10s %-12s %-8s %s' "$major" "${t_pgtest}s" "${t_regress}s" "${t_integration}s" \
        "$((t_pgtest + t_regress + t_integration))s" "$("$PG_CONFIG" --version)")")
done

t_once=0
if [ "${#once_scripts[@]}" -gt 0 ]; then
    t0=$SECONDS
    use_pg_major 15
    install_extension
    start_cluster "$(cluster_dir "${prefix}regress-cluster")" "$port" "max_prepared_transactions = 4"
    for script in "${once_scripts[@]}"; do
        step "Integration (once): $(basename "$script")"
        PG_MAJOR=15 "$script" "$PG_BIN" "$CLUSTER_PORT"
    done
    stop_cluster
    # shellcheck disable=SC2034 # read by stop_cluster (common.sh), the EXIT trap
    CLUSTER_DIR=""
    t_once=$((SECONDS - t0))
fi

step "All tests passed (PostgreSQL ${majors[*]})"
note "set-up ${t_setup}s, engine tests ${t_engine}s, once-only integration ${t_once}s, total $((SECONDS - t_start))s"
note "$(printf '%-6s %-12s %-10s %-12s %-8s %s' major '#[pg_test]' pg_regress integration total version)"
for line in "${summary[@]}"; do note "$line"; done

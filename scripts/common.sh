# shellcheck shell=bash
# Shared helpers for the README commands (sourced, not run).
# Everything is idempotent: a step whose result is already there is skipped.

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PG_MAJOR="${PG_MAJOR:-15}"
PGRX_VERSION="0.18.1"
# Where each PostgreSQL major comes from (15: Debian's packages; 13, 14, 16-18: a cache
# outside the checkout), pg_bin_of / pg_config_of / ensure_pg_majors.
source "$ROOT/scripts/pg_majors.sh"
PG_BIN="$(pg_bin_of "$PG_MAJOR")"
PG_CONFIG="${PG_BIN}/pg_config"

# Switches PG_MAJOR, PG_BIN and PG_CONFIG (install_extension, start_cluster, ... follow).
use_pg_major() {
    PG_MAJOR="$1"
    PG_BIN="$(pg_bin_of "$PG_MAJOR")"
    PG_CONFIG="${PG_BIN}/pg_config"
}
export PATH="${HOME}/.cargo/bin:${PATH}"

step() { printf '\n==> %s\n' "$*"; }
note() { printf '    %s\n' "$*"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Skips, one mechanism for every test script. A test that cannot run here says why:
#   skip REASON            the whole script: prints "SKIP NAME: REASON" and exits 0;
#   skip_part WHAT REASON  one part of it (the script goes on): "SKIP NAME (WHAT): REASON".
# NAME is the script's path under the checkout, tests/integration/ left out (citus.sh,
# bench/run.sh). When SEEN_BLOOM_SKIP_LOG names a file (scripts/test.sh sets it), each skip is
# appended there as a line NAME<TAB>PG_MAJOR<TAB>REASON: test.sh lists them in its closing
# summary and, in CI, fails on one that is not on its allowed list.
skip_name() {
    local path
    path="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
    path="${path#"$ROOT"/}"
    echo "${path#tests/integration/}"
}
record_skip() { # NAME REASON
    printf '    SKIP %s: %s\n' "$1" "$2"
    if [ -n "${SEEN_BLOOM_SKIP_LOG:-}" ]; then
        printf '%s\t%s\t%s\n' "$1" "$PG_MAJOR" "$2" >>"$SEEN_BLOOM_SKIP_LOG"
    fi
}
skip() { # REASON...
    record_skip "$(skip_name)" "$*"
    exit 0
}
skip_part() { # WHAT REASON...
    local what="$1"
    shift
    record_skip "$(skip_name) ($what)" "$*"
}

# A directory for files that another user (the postgres user, when we are root) must read or
# run, outside the checkout: a checkout may sit in a directory only its owner can enter (/root,
# a Debian 12 home directory). As root /var/cache/seen_bloom/NAME (beside the PostgreSQL
# builds of scripts/pg_majors.sh; every component readable), otherwise (everything then runs
# as ourselves) ~/.cache/seen_bloom/NAME. Fresh clones on one machine share it.
shared_cache_dir() { # NAME
    local dir
    if [ "$(id -u)" -eq 0 ]; then
        dir="/var/cache/seen_bloom/$1"
        mkdir -p "$dir"
        chmod a+rx /var/cache/seen_bloom "$dir"
    else
        dir="${XDG_CACHE_HOME:-$HOME/.cache}/seen_bloom/$1"
        mkdir -p "$dir"
    fi
    echo "$dir"
}

# apt packages: the server, its headers (pgrx builds against them), clang for bindgen, sudo
# (cargo pgrx test --runas uses it), sqlsmith and pg_repack (tests/integration/sqlsmith.sh,
# repack.sh), shellcheck (test.sh's lint step).
ensure_packages() {
    # PostgreSQL 15 is Debian 12's; the other majors come from scripts/pg_majors.sh.
    local wanted=(postgresql-15 postgresql-server-dev-15 libclang-dev clang sudo sqlsmith postgresql-15-repack shellcheck)
    local missing=()
    for p in "${wanted[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        note "apt packages present: ${wanted[*]}"
        return
    fi
    step "Installing apt packages: ${missing[*]}"
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
}

ensure_cargo_pgrx() {
    if cargo pgrx --version 2>/dev/null | grep -q "${PGRX_VERSION}"; then
        note "cargo-pgrx ${PGRX_VERSION} present"
    else
        step "Installing cargo-pgrx ${PGRX_VERSION} (about 10 minutes on 2 cores)"
        cargo install cargo-pgrx --version "${PGRX_VERSION}" --locked
    fi
    # Every major that is set up, PostgreSQL 15 included (init rewrites the whole config).
    pgrx_init_majors
}

# Free space where target/ lives. A fresh clone's whole test run writes about 8 GiB there
# (builds, throwaway clusters, WAL); a disk that fills mid-run crashes a test server, which
# then reads as a failing test. Below SEEN_BLOOM_MIN_FREE_GIB (default 4) we stop before
# starting; below twice that we warn.
check_free_space() {
    local need="${SEEN_BLOOM_MIN_FREE_GIB:-4}" free_kib free_gib
    free_kib="$(df -Pk "$ROOT" | awk 'NR == 2 {print $4}')"
    free_gib=$((free_kib / 1024 / 1024))
    if [ "$free_gib" -lt "$need" ]; then
        echo "only ${free_gib} GiB free on the filesystem of $ROOT; the tests need about 8 GiB" \
            "(set SEEN_BLOOM_MIN_FREE_GIB to change this check)" >&2
        exit 1
    elif [ "$free_gib" -lt $((need * 2)) ]; then
        note "warning: only ${free_gib} GiB free on the filesystem of $ROOT (a full test run writes about 8 GiB)"
    else
        note "disk: ${free_gib} GiB free"
    fi
}

setup() {
    step "Checking prerequisites"
    command -v cargo >/dev/null || { echo "cargo not found: install Rust with rustup first" >&2; exit 1; }
    check_free_space
    ensure_packages
    ensure_cargo_pgrx
}

install_extension() {
    step "Building (release) and installing seen_bloom into PostgreSQL ${PG_MAJOR}"
    (cd "$ROOT" && cargo pgrx install --release --pg-config "${PG_CONFIG}" | sed -n '/Installing\|Finished\|Copying/p')
    # cargo pgrx writes the current version's install script and copies the upgrade scripts
    # sql/seen_bloom--A--B.sql; the install scripts of released versions (sql/archive/) are
    # ours to copy, so that CREATE EXTENSION seen_bloom VERSION 'A' and the update path work.
    local extdir
    extdir="$("${PG_CONFIG}" --sharedir)/extension"
    for script in "$ROOT"/sql/archive/seen_bloom--*.sql; do
        [ -e "$script" ] || continue
        as_root install -m 644 "$script" "$extdir/"
        note "installed $(basename "$script") (archived release)"
    done
}

# A throwaway cluster under target/, owned and run by the postgres user when we are root
# (initdb refuses root), listening on 127.0.0.1 only.
CLUSTER_DIR=""
CLUSTER_PORT=""
# Commands run without RUST_BACKTRACE; start_cluster starts the server with RUST_BACKTRACE=1,
# as a production environment may, so that the tests see that no Rust backtrace reaches a
# client (the library turns pgrx's capture off, see src/lib.rs).
# As root the command runs in the current directory when the postgres user may enter it, else
# in / (a checkout under a private home directory, say: PostgreSQL's programs complain when
# they cannot return to their working directory).
run_pg() {
    if [ "$(id -u)" -eq 0 ]; then
        # shellcheck disable=SC2016 # $1 and $@ are the inner shell's
        runuser -u postgres -- sh -c 'cd "$1" 2>/dev/null || cd /; shift; exec "$@"' run_pg "$PWD" \
            env -u RUST_BACKTRACE -u RUST_LIB_BACKTRACE "$@"
    else
        env -u RUST_BACKTRACE -u RUST_LIB_BACKTRACE "$@"
    fi
}

# Where a throwaway cluster lives: under target/ when the postgres user can reach it, else
# (a checkout under a private home directory, say) under /tmp/seen_bloom-clusters
# (SEEN_BLOOM_CLUSTER_FALLBACK: another directory).
cluster_dir() {
    local name="$1"
    if [ "$(id -u)" -ne 0 ] || runuser -u postgres -- test -x "$ROOT/target" 2>/dev/null; then
        echo "$ROOT/target/$name"
    else
        echo "${SEEN_BLOOM_CLUSTER_FALLBACK:-/tmp/seen_bloom-clusters}/$name"
    fi
}

start_cluster() {
    CLUSTER_DIR="$1"
    CLUSTER_PORT="$2"
    shift 2
    rm -rf "$CLUSTER_DIR"
    mkdir -p "$CLUSTER_DIR"
    chmod a+rx "$(dirname "$CLUSTER_DIR")"
    if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$CLUSTER_DIR"; fi
    note "initdb ${CLUSTER_DIR}"
    run_pg "$PG_BIN/initdb" -D "$CLUSTER_DIR/data" -U postgres --auth=trust --no-sync -E UTF8 --locale=C.UTF-8 >"$CLUSTER_DIR.initdb.log" 2>&1 ||
        { cat "$CLUSTER_DIR.initdb.log"; exit 1; }
    {
        echo "listen_addresses = '127.0.0.1'"
        echo "port = ${CLUSTER_PORT}"
        echo "unix_socket_directories = '${CLUSTER_DIR}'"
        echo "fsync = off"
        for opt in "$@"; do echo "$opt"; done
    } | run_pg tee -a "$CLUSTER_DIR/data/postgresql.conf" >/dev/null
    note "starting PostgreSQL ${PG_MAJOR} on 127.0.0.1:${CLUSTER_PORT}"
    pg_start "$PG_BIN" "$CLUSTER_DIR"
}

# pg_start BIN DIR: pg_ctl start -w of DIR/data (log DIR/server.log), with RUST_BACKTRACE=1.
# Our ports (25433-25710) lie below Linux's ephemeral range (32768-60999), from which any
# client connection takes its local port: at 55466 something held the port through all the
# retries of a CI run. A start that
# fails on "Address already in use" is still tried again, 5 times 2 s apart (a server of an
# earlier script may be closing). Any other failure prints the log's tail and returns 1.
pg_start() {
    local bin="$1" dir="$2" try
    for try in 1 2 3 4 5 6; do
        if run_pg env RUST_BACKTRACE=1 "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null; then
            return 0
        fi
        if [ "$try" -lt 6 ] && tail -5 "$dir/server.log" 2>/dev/null | grep -q "Address already in use"; then
            note "the port is taken for now (log: $(tail -5 "$dir/server.log" | grep -m1 "Address already in use")); again in 2 s"
            sleep 2
            continue
        fi
        echo "pg_ctl could not start the server in $dir/data; the end of $dir/server.log:" >&2
        tail -20 "$dir/server.log" 2>/dev/null | sed 's/^/    log: /' >&2
        return 1
    done
}

stop_cluster() {
    if [ -n "$CLUSTER_DIR" ] && [ -f "$CLUSTER_DIR/data/postmaster.pid" ]; then
        note "stopping the cluster in ${CLUSTER_DIR}"
        run_pg "$PG_BIN/pg_ctl" -D "$CLUSTER_DIR/data" -m fast -w stop >/dev/null || true
    fi
}

cluster_psql() {
    "$PG_BIN/psql" -X -h 127.0.0.1 -p "$CLUSTER_PORT" -U postgres "$@"
}

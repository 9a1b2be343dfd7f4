#!/usr/bin/env bash
# The integration scripts' shared helpers. Each script sources this file first:
#     # shellcheck source-path=SCRIPTDIR
#     source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
# It sources scripts/common.sh (ROOT, PG_MAJOR, use_pg_major, cluster_dir, run_pg, step, note,
# install_extension, ...), turns on set -euo pipefail, and provides:
#   arguments  PG_BIN: $1 when given (scripts/test.sh passes the major's bin dir), else
#              common.sh's (that of $PG_MAJOR). PORT: $2, the port of the running cluster with
#              seen_bloom installed that scripts/test.sh passes; require_port stops with a usage
#              line when it is missing (scripts that start clusters of their own ignore it).
#   failing    fail MESSAGE...: prints "FAIL: MESSAGE" (then the last 30 lines of each log named
#              by show_log_on_fail FILE) and exits 1.
#   skipping   (common.sh) skip REASON...: the script cannot run here; prints "SKIP NAME: REASON",
#              records it for scripts/test.sh's summary and exits 0. skip_part WHAT REASON...:
#              one part of the script did not run (recorded the same way; the script goes on).
#              Never exit 0 without either: test.sh fails CI on a skip not on its allowed list.
#   clean-up   on_exit COMMAND [ARGS...]: run when the script exits (whatever the reason: INT
#              and TERM exit through it too), the last registered first; a failing step does
#              not stop the others, and the exit status stays the script's. make_work_dir: a
#              scratch directory in $WORK, removed at exit. stop_process PID...: ends those
#              still running (with their child processes: a backgrounded shell function is a
#              subshell); empty PIDs are skipped.
#   clients    psql_at PORT [DB] [ARGS...]: psql -X -q -v ON_ERROR_STOP=1 as postgres on
#              127.0.0.1:PORT (DB: the database, when the second argument is not an option).
#              client_at PORT PROGRAM [ARGS...]: another client program of PG_BIN (pgbench,
#              pg_dump, pg_restore, pg_repack) with -h 127.0.0.1 -p PORT -U postgres.
#              recreate_database PORT DB...: drops (if there) and creates each.
#              pgbench_insert_script USERS STRIDE: a pgbench script inserting one 20-row batch
#              of impressions, over users (u + k * STRIDE) % USERS + 1 for a random u.
#              pgbench_transactions FILE: the transactions a pgbench output reports processed.
#              IMPRESSIONS_SEEN_SQL: a query of one row, "impressions|not reported seen|users",
#              over table impressions (user_id, post_id): one unseen call per user of all its
#              items, so every impression is checked in seconds where has_seen per row takes
#              minutes.
#   clusters   Throwaway clusters of their own, each in a directory DIR (data in DIR/data, log
#              in DIR/server.log, socket in DIR), listening on 127.0.0.1:PORT only, run by the
#              postgres user when we are root and by the bin dir PG_BIN was when they were made.
#              cluster_new DIR PORT [CONF...]: cluster_init then cluster_start (common.sh's
#              start_cluster, for any number of clusters). cluster_init DIR PORT [CONF...]:
#              initdb, then the listen/port/socket lines, fsync = off and CONF in
#              postgresql.conf. cluster_prepare_dir DIR: an empty DIR (for pg_basebackup, say).
#              cluster_configure DIR LINE...: appended to postgresql.conf. cluster_start DIR
#              (common.sh's pg_start: pg_ctl start -w with RUST_BACKTRACE=1, again while the port is taken), cluster_stop DIR
#              (pg_ctl stop -m fast, when it runs). Every cluster made or started here (or
#              adopted with cluster_register DIR) is stopped at exit by its data directory, so
#              a script stops only the servers it started.
#   waits      wait_until SECONDS COMMAND [ARGS...]: runs COMMAND every 0.2 s until it succeeds
#              (returns 0), or returns 1 after SECONDS. The others fail the script after their
#              SECONDS (default 60): wait_for_server PORT [DB] [SECONDS] (accepts connections
#              and answers a query); wait_for_replay PRIMARY_PORT STANDBY_PORT DB [SECONDS] (the
#              standby replayed up to the primary's current WAL position);
#              wait_for_subscription PUB_PORT PUB_DB SUB_PORT SUB_DB SQL [SECONDS] (SQL answers
#              on the subscriber as on the publisher, and every subscribed table is ready).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    echo "    $(basename "$0"): the integration scripts' shared helpers (they source it); nothing to run"
    exit 0
fi
# (Not followed by shellcheck: its names would mix with the scripts' own.)
# shellcheck source=/dev/null
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/common.sh"
set -euo pipefail

# --- arguments ---------------------------------------------------------------------------------
if [ -n "${1:-}" ]; then PG_BIN="$1"; fi
PORT="${2:-}"
require_port() {
    if [ -z "$PORT" ]; then
        echo "usage: $(basename "$0") PG_BIN PORT (PORT: a running cluster with seen_bloom installed)" >&2
        exit 2
    fi
}

# --- failing -----------------------------------------------------------------------------------
FAIL_LOGS=()
show_log_on_fail() { FAIL_LOGS+=("$@"); }
fail() {
    echo "FAIL: $*"
    local log
    for log in "${FAIL_LOGS[@]}"; do
        if [ -f "$log" ]; then tail -30 "$log" | sed 's/^/    log: /'; fi
    done
    exit 1
}

# --- clean-up ----------------------------------------------------------------------------------
EXIT_STEPS=()
on_exit() { EXIT_STEPS+=("$(printf '%q ' "$@")"); }
run_exit_steps() {
    local status=$? i
    set +e
    for ((i = ${#EXIT_STEPS[@]} - 1; i >= 0; i--)); do
        eval "${EXIT_STEPS[i]}"
    done
    exit "$status"
}
trap run_exit_steps EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

WORK=""
make_work_dir() {
    WORK="$(mktemp -d)"
    on_exit rm -rf "$WORK"
}

stop_process() {
    local pid child child_pids
    for pid in "$@"; do
        if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then continue; fi
        mapfile -t child_pids < <(ps -o pid= --ppid "$pid" 2>/dev/null || true)
        for child in "${child_pids[@]}"; do kill "$child" 2>/dev/null || true; done
        kill "$pid" 2>/dev/null || true
    done
}

# --- clients -----------------------------------------------------------------------------------
psql_at() { # PORT [DB] [ARGS...]
    local port="$1" db=()
    shift
    if [ "$#" -gt 0 ] && [[ "$1" != -* ]]; then
        db=(-d "$1")
        shift
    fi
    "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres "${db[@]}" "$@"
}

client_at() { # PORT PROGRAM [ARGS...]
    local port="$1" program="$2"
    shift 2
    "$PG_BIN/$program" -h 127.0.0.1 -p "$port" -U postgres "$@"
}

recreate_database() { # PORT DB...
    local port="$1" db sql=(-c "SET client_min_messages = warning")
    shift
    for db in "$@"; do sql+=(-c "DROP DATABASE IF EXISTS $db"); done
    for db in "$@"; do sql+=(-c "CREATE DATABASE $db"); done
    psql_at "$port" postgres "${sql[@]}"
}

pgbench_insert_script() { # USERS STRIDE
    local users="$1" stride="$2" k
    echo "\\set u random(1, $users)"
    echo '\set p random(1, 1000000000)'
    printf 'INSERT INTO impressions (user_id, post_id) VALUES '
    for k in $(seq 0 19); do
        if [ "$k" -gt 0 ]; then printf ', '; fi
        printf '((:u + %d * %d) %% %d + 1, :p + %d)' "$k" "$stride" "$users" "$k"
    done
    echo ';'
}

pgbench_transactions() { # FILE
    sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$1"
}

# shellcheck disable=SC2034 # read by the scripts that source this file
IMPRESSIONS_SEEN_SQL="SELECT sum(n), coalesce(sum(cardinality(seen_bloom.unseen('impressions', user_id, items))), 0), count(*)
FROM (SELECT user_id, count(*) AS n, array_agg(post_id) AS items FROM impressions GROUP BY user_id) per_user"

# --- clusters ----------------------------------------------------------------------------------
declare -gA CLUSTER_BIN=() # cluster dir -> the bin dir that runs it

cluster_prepare_dir() { # DIR
    local dir="$1"
    rm -rf "$dir"
    mkdir -p "$dir"
    chmod a+rx "$(dirname "$dir")"
    if [ "$(id -u)" -eq 0 ]; then chown postgres:postgres "$dir"; fi
}

cluster_register() { # DIR
    local dir="$1"
    if [ -z "${CLUSTER_BIN[$dir]:-}" ]; then
        CLUSTER_BIN[$dir]="$PG_BIN"
        on_exit cluster_stop_at_exit "$dir"
    fi
}

cluster_configure() { # DIR LINE...
    local dir="$1"
    shift
    printf '%s\n' "$@" | run_pg tee -a "$dir/data/postgresql.conf" >/dev/null
}

cluster_init() { # DIR PORT [CONF...]
    local dir="$1" port="$2"
    shift 2
    cluster_prepare_dir "$dir"
    cluster_register "$dir"
    note "initdb ${dir}"
    run_pg "$PG_BIN/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync -E UTF8 --locale=C.UTF-8 >"$dir.initdb.log" 2>&1 ||
        { cat "$dir.initdb.log"; exit 1; }
    cluster_configure "$dir" "listen_addresses = '127.0.0.1'" "port = ${port}" "unix_socket_directories = '${dir}'" "fsync = off" "$@"
}

cluster_start() { # DIR
    local dir="$1"
    cluster_register "$dir"
    pg_start "${CLUSTER_BIN[$dir]}" "$dir"
}

cluster_new() { # DIR PORT [CONF...]
    local dir="$1" port="$2"
    cluster_init "$@"
    note "starting PostgreSQL ${PG_MAJOR} on 127.0.0.1:${port}"
    cluster_start "$dir"
}

# WAL checked as PostgreSQL's developers check it: seen_bloom preloaded (its WAL resource
# manager on 15 and later), every record carrying a page image that replay compares with
# (wal_consistency_checking = 'all'), and data checksums (cluster_enable_checksums).
# shellcheck disable=SC2034 # used by the scripts that source this file
# (The maintenance worker off: at a generation's end it would compact users between a
# script's writes and its comparisons; maintenance.sh tests it.)
CHECKED_WAL_CONF=("shared_preload_libraries = 'seen_bloom'" "wal_consistency_checking = 'all'" "seen_bloom.maintenance = off")

cluster_enable_checksums() { # DIR (stopped)
    local dir="$1"
    # (PostgreSQL 18's initdb enables them already, and pg_checksums --enable then fails.)
    if ! run_pg "${CLUSTER_BIN[$dir]:-$PG_BIN}/pg_controldata" -D "$dir/data" | grep -q '^Data page checksum version: *[1-9]'; then
        run_pg "${CLUSTER_BIN[$dir]:-$PG_BIN}/pg_checksums" --enable -D "$dir/data" >/dev/null 2>&1
    fi
}

# wal_records_report PORT DB SQL DATA: runs SQL (writes to a tracked table) and reports the
# WAL records it wrote: on 15 and later by resource manager (pg_walinspect), failing when a
# preloaded seen_bloom's in-place writes were not logged under its own; on 13 and 14 the
# generic records (pg_waldump of DATA's pg_wal), failing unless they are full page images.
wal_records_report() {
    local port="$1" db="$2" statement="$3" data="$4" start end counts
    if [ "${PG_MAJOR}" -ge 15 ]; then
        psql_at "$port" "$db" -c "CREATE EXTENSION IF NOT EXISTS pg_walinspect" >/dev/null
    fi
    start="$(psql_at "$port" "$db" -At -c "SELECT pg_current_wal_insert_lsn()")"
    psql_at "$port" "$db" -c "$statement" >/dev/null
    if [ "${PG_MAJOR}" -lt 15 ]; then
        end="$(psql_at "$port" "$db" -At -c "SELECT pg_current_wal_flush_lsn()")"
        run_pg "$PG_BIN/pg_waldump" -p "$data/pg_wal" -s "$start" -e "$end" --rmgr=Generic >"$WORK/waldump" 2>/dev/null || true
        # (" FPW for WAL verification": the image a checked record carries only to compare with)
        local generic images
        generic="$(grep -c '^rmgr: Generic' "$WORK/waldump" || true)"
        images="$(grep '^rmgr: Generic' "$WORK/waldump" | sed 's/ FPW for WAL verification//g' | grep -c ' FPW' || true)"
        echo "    WAL records of in-place writes (\"$statement\"): $generic generic, $images of them full page images (no custom resource managers before 15)"
        if [ "$generic" -eq 0 ] || [ "$images" -ne "$generic" ]; then fail "expected generic records that are full page images"; fi
        return 0
    fi
    counts="$(psql_at "$port" "$db" -At -F ' ' -c "SELECT resource_manager, count(*), min(record_type), min(description) FROM pg_get_wal_records_info('$start', pg_current_wal_flush_lsn()) WHERE resource_manager IN ('seen_bloom', 'Generic') GROUP BY 1 ORDER BY 1")"
    echo "    WAL records of in-place writes (\"$statement\"): ${counts:-none}"
    grep -q '^seen_bloom [1-9]' <<<"$counts" || fail "no record of the seen_bloom resource manager in the WAL"
    if grep -q '^Generic ' <<<"$counts"; then fail "generic records in the WAL where seen_bloom's were expected"; fi
}

cluster_stop() { # DIR
    local dir="$1"
    if [ -f "$dir/data/postmaster.pid" ]; then
        run_pg "${CLUSTER_BIN[$dir]:-$PG_BIN}/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    fi
}

cluster_stop_at_exit() { # DIR
    if [ -f "$1/data/postmaster.pid" ]; then
        note "stopping the cluster in $1"
        cluster_stop "$1"
    fi
}

# --- waits -------------------------------------------------------------------------------------
wait_until() { # SECONDS COMMAND [ARGS...]
    local tries=$(($1 * 5)) i
    shift
    for ((i = 0; i < tries; i++)); do
        if "$@"; then return 0; fi
        sleep 0.2
    done
    return 1
}

server_ready() { # PORT [DB]
    "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$1" -U postgres -d "${2:-postgres}" &&
        psql_at "$1" "${2:-postgres}" -c "SELECT 1" >/dev/null 2>&1
}

wait_for_server() { # PORT [DB] [SECONDS]
    local seconds="${3:-60}"
    wait_until "$seconds" server_ready "$1" "${2:-postgres}" ||
        fail "the server on 127.0.0.1:$1 did not accept connections within $seconds s"
}

replayed_up_to() { # STANDBY_PORT DB LSN
    [ "$(psql_at "$1" "$2" -At -c "SELECT pg_last_wal_replay_lsn() >= '$3'::pg_lsn")" = t ]
}

wait_for_replay() { # PRIMARY_PORT STANDBY_PORT DB [SECONDS]
    local seconds="${4:-60}" lsn
    lsn="$(psql_at "$1" "$3" -At -c "SELECT pg_current_wal_lsn()")"
    wait_until "$seconds" replayed_up_to "$2" "$3" "$lsn" ||
        fail "the standby (127.0.0.1:$2) did not replay up to $lsn within $seconds s"
}

subscription_caught_up() { # SUB_PORT SUB_DB SQL WANT
    [ "$(psql_at "$1" "$2" -At -c "$3")" = "$4" ] &&
        [ "$(psql_at "$1" "$2" -At -c "SELECT count(*) FROM pg_subscription_rel WHERE srsubstate <> 'r'")" = 0 ]
}

wait_for_subscription() { # PUB_PORT PUB_DB SUB_PORT SUB_DB SQL [SECONDS]
    local seconds="${6:-60}" want
    want="$(psql_at "$1" "$2" -At -c "$5")"
    wait_until "$seconds" subscription_caught_up "$3" "$4" "$5" "$want" ||
        fail "the subscriber (127.0.0.1:$3, database $4) did not reach the publisher's $want within $seconds s:" \
            "it has $(psql_at "$3" "$4" -At -c "$5" 2>&1)," \
            "tables not ready: $(psql_at "$3" "$4" -At -c "SELECT count(*) FROM pg_subscription_rel WHERE srsubstate <> 'r'" 2>&1)"
}

#!/usr/bin/env bash
# test.sh: one major (a long fault or replication test; SEEN_BLOOM_ALL_INTEGRATION=1 runs it on every major)
# The background maintenance worker, on a cluster of its own (127.0.0.1:25467) with seen_bloom
# preloaded and every maintenance setting at its default. A table tracked with a '30 seconds'
# window and 3 generations (10 s each) takes impressions from a light and a heavy user, a
# second table of another owner as well; then no maintenance call at all:
#   - within a few generations the worker has expired every filter row of generations that
#     left the window, run at least once per generation (seen_bloom.maintenance), compacted
#     the heavy user's closed generation, and seen_bloom.health() is quiet; it acted as each
#     table's owner (the other owner's table too);
#   - a session holding a table's maintenance lock (as a manual run does) makes the worker
#     skip it; released, the worker runs it again;
#   - statement_timeout (ALTER DATABASE) cuts a step: the run records the error (57014) in
#     seen_bloom.maintenance and health() reports it; reset, the next run clears it;
#   - busy: the clean run's users compacted, rows expired and seconds; idle (nothing tracked):
#     the postmaster's and the launcher's CPU time over 20 s, seen_bloom.maintenance on beside
#     off (reloaded; short-lived workers' time is counted in the postmaster's children's);
#   - pg_terminate_backend of the launcher, and a server restart: it comes back.
# Usage: maintenance.sh PG_BIN PORT (PORT unused: the test runs its own cluster)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
port=25467
db=seen_bloom_maintenance
make_work_dir
cluster="$(cluster_dir rel-maintenance)"
log="$cluster/server.log"
show_log_on_fail "$log"
q() { psql_at "$port" "$db" -At "$@"; }
# (the test's own sessions never time out: the database's statement_timeout below is for the worker)
export PGOPTIONS="-c statement_timeout=0"

cluster_new "$cluster" "$port" "shared_preload_libraries = 'seen_bloom'"
psql_at "$port" postgres -c "CREATE DATABASE $db" >/dev/null
q -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE ROLE maint_owner LOGIN;
GRANT CREATE ON SCHEMA public TO maint_owner;
CREATE TABLE impressions (user_id bigint NOT NULL, post_id bigint NOT NULL, seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at', "window" => '30 seconds', generations => 3);
SET ROLE maint_owner;
CREATE TABLE owned (user_id bigint NOT NULL, post_id bigint NOT NULL, seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('owned', 'user_id', 'post_id', 'seen_at', "window" => '30 seconds', generations => 3);
RESET ROLE;
SQL
[ "$(q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'seen_bloom maintenance launcher'")" = 1 ] ||
    fail "no seen_bloom maintenance launcher in pg_stat_activity"

# Impressions over two generations: a light user, a heavy one (layer rows), the other table.
insert_round() {
    q -o /dev/null -c "INSERT INTO impressions (user_id, post_id) SELECT 1, $1 + k FROM generate_series(1, 5) k" \
        -c "INSERT INTO impressions (user_id, post_id) SELECT 2, $1 + k FROM generate_series(1, 400) k" \
        -c "INSERT INTO owned (user_id, post_id) SELECT 7, $1 + k FROM generate_series(1, 50) k"
}
insert_round 1000
sleep 11
insert_round 2000
rows_before="$(q -c "SELECT count(*) FROM impressions_seen")"
note "impressions in two generations ($rows_before filter rows); no maintenance call from now on"

# Wait for every filter row to have expired and been reclaimed (the window is 30 s, a
# generation 10 s, a round 10 s: at most about 60 s after the last insert).
gone() { [ "$(q -c "SELECT (SELECT count(*) FROM impressions_seen) + (SELECT count(*) FROM owned_seen)")" = 0 ]; }
wait_until 120 gone || fail "filter rows left after 120 s: $(q -c "SELECT count(*) FROM impressions_seen")"
runs="$(q -c "SELECT runs || ' runs, ' || rows_expired || ' rows expired by the last' FROM seen_bloom.maintenance WHERE impressions = 'impressions'::regclass")"
all_compacted="$(q -c "SELECT coalesce(sum(users_compacted), 0) FROM seen_bloom.maintenance")"
owned_runs="$(q -c "SELECT runs FROM seen_bloom.maintenance WHERE impressions = 'owned'::regclass")"
health="$(q -c "SELECT count(*) FROM seen_bloom.health()")"
[ "$health" = 0 ] || { q -c "SELECT * FROM seen_bloom.health()"; fail "health() is not quiet"; }
[ "${owned_runs:-0}" -ge 1 ] || fail "the other owner's table was not maintained"
errors="$(q -c "SELECT count(*) FROM seen_bloom.maintenance WHERE last_error IS NOT NULL")"
[ "$errors" = 0 ] || { q -c "SELECT * FROM seen_bloom.maintenance"; fail "maintenance errors"; }
echo "    no call: every expired filter row reclaimed by the worker ($runs; the other owner's table: $owned_runs runs), health() quiet"

# Compaction: a heavy user with layered rows of a closed generation is compacted.
insert_round 3000
compacted_row() { [ "$(q -c "SELECT count(*) FROM impressions_seen WHERE layer = -2")" -gt 0 ]; }
wait_until 60 compacted_row || fail "the heavy user was not compacted within 60 s"
compacted="$(q -c "SELECT users_compacted FROM seen_bloom.maintenance WHERE impressions = 'impressions'::regclass")"
echo "    compaction: the heavy user's closed generation compacted by the worker (users compacted in all: $((all_compacted + compacted)) or more)"

# A manual run's lock: the worker skips the table while a session holds it.
runs_at() { q -c "SELECT runs FROM seen_bloom.maintenance WHERE impressions = 'impressions'::regclass"; }
q -c "SELECT seen_bloom._maintenance_lock('impressions', true), pg_sleep(15)" >/dev/null &
holder=$!
on_exit stop_process "$holder"
sleep 2
held_runs="$(runs_at)"
sleep 12 # (checked while the lock is still held: once it is released, the worker may run at once)
[ "$(runs_at)" = "$held_runs" ] || fail "the worker ran while a session held the table's maintenance lock"
wait "$holder"
holder=""
ran_again() { [ "$(runs_at)" -gt "$held_runs" ]; }
wait_until 30 ran_again || fail "the worker did not run the table again after the lock was released"
echo "    a session held the maintenance lock for 15 s (over a generation): the worker skipped the table ($held_runs runs), then ran it ($(runs_at) runs)"

# statement_timeout cuts a step: recorded, reported by health(), cleared by the next good run.
q -c "ALTER DATABASE $db SET statement_timeout = '1ms'" >/dev/null
q -o /dev/null -c "INSERT INTO impressions (user_id, post_id) SELECT u, 5000 + u FROM generate_series(1, 3000) u"
failed() { [ -n "$(q -c "SELECT last_error FROM seen_bloom.maintenance WHERE impressions = 'impressions'::regclass AND last_error_at >= last_run_started")" ]; }
wait_until 40 failed || fail "statement_timeout = 1ms did not cut a maintenance step within 40 s"
error="$(q -c "SELECT last_error FROM seen_bloom.maintenance WHERE impressions = 'impressions'::regclass")"
[[ "$error" == *57014* ]] || fail "expected SQLSTATE 57014 in the recorded error, got: $error"
problem="$(q -c "SELECT problem FROM seen_bloom.health() WHERE impressions = 'impressions'::regclass AND problem LIKE '%background maintenance%'")"
[ -n "$problem" ] || fail "health() does not report the failed run"
q -c "ALTER DATABASE $db RESET statement_timeout" >/dev/null
cleared() { ! failed; }
wait_until 40 cleared || fail "the failed run is still reported after statement_timeout was reset"
echo "    statement_timeout = 1ms: recorded \"$error\"; health(): \"$problem\"; reset: the next run is clean"
busy="$(q -c "SELECT users_compacted || ' users compacted, ' || rows_expired || ' rows expired in ' || round(seconds::numeric, 2) || ' s' FROM seen_bloom.maintenance WHERE impressions = 'impressions'::regclass")"
echo "    busy: the clean run after the reset: $busy"

# Off (reload): no run over two generations.
set_maintenance() { q -c "ALTER SYSTEM SET seen_bloom.maintenance = $1" -c "SELECT pg_reload_conf()" >/dev/null; sleep 1; }
set_maintenance off
off_runs="$(runs_at)"
sleep 20
[ "$(runs_at)" = "$off_runs" ] || fail "the worker ran with seen_bloom.maintenance = off"
set_maintenance on
ran_since_off() { [ "$(runs_at)" -gt "$off_runs" ]; }
wait_until 30 ran_since_off || fail "no run within 30 s of seen_bloom.maintenance = on again"
echo "    seen_bloom.maintenance = off: no run in 20 s (2 generations); on again: a run within 30 s"

# Idle: nothing tracked any more, so each round is a launcher wake-up and a worker that finds
# nothing due; the same 20 s with maintenance off beside it.
q -o /dev/null -c "SELECT seen_bloom.untrack('impressions')" -c "SET ROLE maint_owner" -c "SELECT seen_bloom.untrack('owned')"
cpu_ticks() { # the postmaster's own and reaped children's CPU time, plus the launcher's (clock ticks)
    local pm launcher
    pm="$(head -1 "$cluster/data/postmaster.pid")"
    launcher="$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'seen_bloom maintenance launcher'")"
    awk '{ s += $14 + $15 + $16 + $17 } END { print s }' "/proc/$pm/stat" ${launcher:+"/proc/$launcher/stat"}
}
idle_ticks() { # over 20 s
    local start
    sleep 2
    start="$(cpu_ticks)"
    sleep 20
    echo $(($(cpu_ticks) - start))
}
on_ticks="$(idle_ticks)"
set_maintenance off
off_ticks="$(idle_ticks)"
set_maintenance on
hz="$(getconf CLK_TCK)"
echo "    idle, nothing tracked, CPU over 20 s (postmaster, its reaped workers, the launcher): $((on_ticks * 1000 / hz)) ms with maintenance on (2 rounds), $((off_ticks * 1000 / hz)) ms off"
launcher="$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'seen_bloom maintenance launcher'")"
q -c "SELECT pg_terminate_backend($launcher)" >/dev/null
back() { [ -n "$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'seen_bloom maintenance launcher' AND pid <> $launcher")" ]; }
wait_until 30 back || fail "the launcher did not come back within 30 s of pg_terminate_backend"
echo "    pg_terminate_backend of the launcher: back within 30 s"
cluster_stop "$cluster"
cluster_start "$cluster"
launcher="0"
wait_until 30 back || fail "no launcher within 30 s of a server restart"
echo "    server restart: the launcher is back"
if grep -E "PANIC:  |TRAP:|terminated by signal|server process .* exited with exit code [^01]" "$log"; then
    fail "errors in the server log"
fi
echo "    ok"

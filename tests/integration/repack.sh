#!/usr/bin/env bash
# test.sh: one major (pg_repack is Debian's postgresql-15-repack: PostgreSQL 15 only)
# Rewrites of a filter table while a writer backend keeps folding into it. The writer is one
# session (a procedure that commits after every batch), so it remembers where its users' rows
# were across the rewrites.
#   - pg_repack of the filter table is refused up front (its trigger would miss the fold's
#     direct writes and lose them at its swap: 17,795 of 206,760 impressions were lost when
#     it was allowed) and leaves the table and the writer as they were;
#   - VACUUM FULL and CLUSTER run in a loop; afterwards every committed impression is seen;
#   - pg_repack of the impressions table itself works.
# Usage: repack.sh PG_BIN PORT
set -euo pipefail
# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh" "$@"
require_port
db=seen_bloom_repack
seconds="${REPACK_SECONDS:-10}"
[ "${SEEN_BLOOM_LONG:-0}" = 1 ] && seconds="${REPACK_SECONDS:-60}"
if [ "$PG_MAJOR" != 15 ] || ! [ -x "$PG_BIN/pg_repack" ]; then
    skip "pg_repack for PostgreSQL $PG_MAJOR is not installed (Debian packages it for 15)"
fi
make_work_dir
repack_err="$WORK/pg_repack.err"
writer=""
stop_writer() { stop_process "$writer"; }
on_exit stop_writer
recreate_database "$PORT" "$db"
psql_at "$PORT" "$db" -o /dev/null <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION seen_bloom;
CREATE EXTENSION pg_repack;
CREATE TABLE impressions (id bigserial PRIMARY KEY, user_id bigint NOT NULL, post_id bigint NOT NULL,
                          seen_at timestamptz NOT NULL DEFAULT now());
SELECT seen_bloom.track('impressions', 'user_id', 'post_id', 'seen_at');
INSERT INTO impressions (user_id, post_id) SELECT u, u * 1000 + k FROM generate_series(1, 50) u, generate_series(1, 300) k;
CREATE PROCEDURE write_for(seconds float8) LANGUAGE plpgsql AS $$
DECLARE
    stop timestamptz := clock_timestamp() + seconds * interval '1 second';
    i bigint := 0;
BEGIN
    WHILE clock_timestamp() < stop LOOP
        INSERT INTO impressions (user_id, post_id)
        SELECT 1 + (i * 7 + k) % 50, 100000000 + i * 20 + k FROM generate_series(1, 20) k;
        i := i + 1;
        COMMIT;
    END LOOP;
END $$;
SQL
note "one writer backend for ${seconds}s while pg_repack, VACUUM FULL and CLUSTER rewrite the filter table"
psql_at "$PORT" "$db" -c "CALL write_for($seconds)" &
writer=$!
rewrites=0
if client_at "$PORT" pg_repack -d "$db" --table=impressions_seen >/dev/null 2>"$repack_err"; then
    fail "pg_repack of a filter table was not refused"
fi
grep -q "seen_bloom filter table" "$repack_err" || { cat "$repack_err"; fail "pg_repack failed for another reason"; }
note "pg_repack of the filter table refused: $(grep -o 'cannot create a trigger on [^,]*' "$repack_err" | head -1)"
end=$((SECONDS + seconds - 1))
while [ "$SECONDS" -lt "$end" ]; do
    psql_at "$PORT" "$db" -c "VACUUM FULL impressions_seen" -c "CLUSTER impressions_seen USING impressions_seen_pkey"
    rewrites=$((rewrites + 2))
done
wait "$writer" || fail "the writer failed"
writer=""
missed="$(psql_at "$PORT" "$db" -At -c "SELECT count(*) FROM impressions i WHERE NOT seen_bloom.has_seen('impressions', i.user_id, i.post_id)")"
total="$(psql_at "$PORT" "$db" -At -c "SELECT count(*) FROM impressions")"
note "$rewrites rewrites of the filter table; $total impressions, $missed not seen"
[ "$missed" = 0 ] || fail "$missed committed impressions are not seen after the rewrites"
client_at "$PORT" pg_repack -d "$db" --table=impressions >/dev/null 2>"$repack_err" ||
    { cat "$repack_err"; fail "pg_repack of the impressions table"; }
psql_at "$PORT" "$db" -o /dev/null -c "INSERT INTO impressions (user_id, post_id) VALUES (1, 999999999)"
[ "$(psql_at "$PORT" "$db" -At -c "SELECT seen_bloom.has_seen('impressions', 1::bigint, 999999999)")" = t ] ||
    fail "an impression inserted after pg_repack of the impressions table is not seen"
[ "$(psql_at "$PORT" "$db" -At -c "SELECT count(*) FROM seen_bloom.health()")" = 0 ] || fail "health() after pg_repack: $(psql_at "$PORT" "$db" -At -c "SELECT * FROM seen_bloom.health()")"
echo "OK: pg_repack of the filter table refused; $rewrites rewrites (VACUUM FULL, CLUSTER) under a writer, every impression seen; pg_repack of the impressions table keeps tracking"

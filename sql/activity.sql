-- seen_bloom.activity (src/activity.rs): per tracked table, what the read path and the fold
-- did since the last reset. Counters are kept in shared memory when seen_bloom is in
-- shared_preload_libraries; otherwise the view is empty and a NOTICE says how to turn them on.

CREATE FUNCTION seen_bloom._activity(counters int) RETURNS bigint[]
    AS 'MODULE_PATHNAME', 'seen_bloom__activity' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION seen_bloom._activity(int) IS 'Internal: the activity counters of this database''s tracked tables, per table its OID and the first `counters` counters';

CREATE FUNCTION seen_bloom.activity_reset(impressions regclass DEFAULT NULL) RETURNS void
    AS 'MODULE_PATHNAME', 'seen_bloom_activity_reset' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION seen_bloom.activity_reset(regclass) IS 'Zeroes the seen_bloom.activity counters of a tracked table (of every table of this database when NULL)';
REVOKE ALL ON FUNCTION seen_bloom.activity_reset(regclass) FROM PUBLIC;

-- The table's OID is shown as regclass only while the table exists (a dropped table's
-- counters stay until the server restarts, but are not shown).
CREATE VIEW seen_bloom.activity AS
SELECT a[k + 1]::oid::regclass AS impressions,
       a[k + 2] AS unseen_calls,
       a[k + 3] AS has_seen_calls,
       a[k + 4] AS candidates_in,
       a[k + 5] AS candidates_seen,
       a[k + 6] AS candidates_returned,
       CASE WHEN a[k + 4] > 0 THEN a[k + 5]::float8 / a[k + 4] END AS seen_share,
       a[k + 7] AS folds,
       a[k + 8] AS impressions_folded,
       a[k + 9] AS rows_skipped,
       a[k + 10] / 1000.0 AS fold_ms,
       a[k + 11] / 1000.0 AS read_ms,
       a[k + 12] AS impressions_capped,
       a[k + 13] AS capped_folds
FROM (SELECT seen_bloom._activity(12) AS a) s,
     generate_series(0, coalesce(cardinality(s.a), 0) - 1, 13) k
WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = a[k + 1]::oid)
  -- Only the tables the reader has a right on (as seen_bloom.tracked shows them).
  AND pg_catalog.has_table_privilege(a[k + 1]::oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER');
COMMENT ON VIEW seen_bloom.activity IS
    'Per tracked table since the last seen_bloom.activity_reset: unseen/has_seen calls, candidates in, seen (removed), returned and the seen share; statement folds, impressions folded, rows skipped (NULL user or item, outside the window); time folding and reading; impressions the per-user cap (seen_bloom.set_user_cap) kept out of the filter, and the user-generation folds that refused any (needs seen_bloom in shared_preload_libraries)';
GRANT SELECT ON seen_bloom.activity TO PUBLIC;

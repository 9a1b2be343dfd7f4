//! Server-side properties that pg_regress output cannot express well: no false negatives,
//! measured false-positive rates, parallel aggregates equal to serial ones, and the per-row
//! read path fetching a stored filter once instead of once per row.

use pgrx::prelude::*;

fn one<T: pgrx::datum::FromDatum + pgrx::datum::IntoDatum>(sql: &str) -> T {
    Spi::get_one::<T>(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .unwrap_or_else(|| panic!("{sql}: NULL"))
}

#[pg_schema]
mod tests {
    use super::one;
    use pgrx::prelude::*;

    /// The item types' storage constants (read without a catalog lookup) are pg_type's.
    #[pg_test]
    fn item_storage_matches_the_catalog() {
        use crate::pg::item_type::ItemType;
        use pgrx::pg_sys;
        for oid in [
            pg_sys::INT2OID,
            pg_sys::INT4OID,
            pg_sys::INT8OID,
            pg_sys::TEXTOID,
            pg_sys::VARCHAROID,
            pg_sys::BYTEAOID,
            pg_sys::UUIDOID,
        ] {
            let (mut len, mut byval, mut align) = (0i16, false, 0 as std::ffi::c_char);
            // SAFETY: a syscache lookup by type OID into three locals.
            unsafe { pg_sys::get_typlenbyvalalign(oid, &mut len, &mut byval, &mut align) };
            let item_type = ItemType::from_oid(oid).expect("a supported item type");
            assert_eq!(item_type.storage(), (len, byval, align), "type {oid:?}");
        }
    }

    #[pg_test]
    fn no_false_negative_after_random_inserts() {
        Spi::run(
            "CREATE TEMP TABLE items AS
               SELECT (random() * 9e18)::bigint AS id, md5(random()::text) AS name, gen_random_uuid() AS u
               FROM generate_series(1, 30000)",
        )
        .unwrap();
        // Built by the aggregate (scaling past a small capacity) and by bloom_add one at a time.
        Spi::run(
            "CREATE TEMP TABLE f AS SELECT
               bloom_agg(id, 5000, 0.01) AS by_id, bloom_agg(name) AS by_name, bloom_agg(u) AS by_uuid
             FROM items",
        )
        .unwrap();
        let missing: i64 = one("SELECT count(*) FROM items, f
             WHERE NOT bloom_contains(by_id, id) OR NOT bloom_contains(by_name, name)
                OR NOT bloom_contains(by_uuid, u)");
        assert_eq!(missing, 0);
        let layers: i64 = one("SELECT (bloom_info(by_id)->>'layers')::bigint FROM f");
        assert!(
            layers >= 3,
            "30,000 items at capacity 5,000 should have scaled, got {layers} layers"
        );

        Spi::run(
            "DO $$ DECLARE f bloom := bloom_empty(2000, 0.01); r record; BEGIN
               FOR r IN SELECT id FROM items LIMIT 3000 LOOP f := bloom_add(f, r.id); END LOOP;
               CREATE TEMP TABLE one_by_one AS SELECT f;
             END $$",
        )
        .unwrap();
        let missing: i64 = one(
            "SELECT count(*) FROM (SELECT id FROM items LIMIT 3000) i, one_by_one o
             WHERE NOT bloom_contains(o.f, i.id)",
        );
        assert_eq!(missing, 0);
    }

    #[pg_test]
    fn measured_false_positive_rate_within_target() {
        for (error_rate, scaling) in [(0.01, true), (0.01, false), (0.001, true)] {
            let fpr: f64 = one(&format!(
                "WITH f AS (SELECT bloom_add(bloom_empty(100000, {error_rate}, {scaling}),
                                              array_agg(g)) AS filter
                            FROM generate_series(1, 100000) g)
                 SELECT count(*) FILTER (WHERE bloom_contains(filter, g))::float8 / count(*)
                 FROM f, generate_series(10000001, 10400000) g"
            ));
            assert!(
                fpr <= 1.1 * error_rate,
                "target {error_rate} scaling {scaling}: measured {fpr}"
            );
        }
    }

    fn force_parallel(on: bool) {
        if on {
            Spi::run(
                "SET LOCAL max_parallel_workers_per_gather = 2;
                 SET LOCAL parallel_setup_cost = 0; SET LOCAL parallel_tuple_cost = 0;
                 SET LOCAL min_parallel_table_scan_size = 0; SET LOCAL parallel_leader_participation = off",
            )
            .unwrap();
        } else {
            Spi::run("SET LOCAL max_parallel_workers_per_gather = 0").unwrap();
        }
    }

    #[pg_test]
    fn parallel_aggregates_equal_serial_ones() {
        Spi::run(
            "CREATE TABLE impressions AS
               SELECT g % 7 AS user_id, (g::bigint * 7919) % 150000 AS item FROM generate_series(1, 300000) g;
             ANALYZE impressions",
        )
        .unwrap();
        let queries = [
            "SELECT bloom_agg(item)::bytea FROM impressions",
            "SELECT bloom_agg(item::text, 1000, 0.01)::bytea FROM impressions",
            "SELECT bloom_union_agg(f)::bytea FROM (SELECT bloom_add(NULL::bloom, item) AS f FROM impressions) s",
        ];
        for q in queries {
            force_parallel(true);
            let plan: pgrx::Json = one(&format!("EXPLAIN (ANALYZE, FORMAT JSON) {q}"));
            let plan_text = plan.0.to_string();
            assert!(
                plan_text.contains("\"Finalize\""),
                "no parallel plan for {q}: {plan_text}"
            );
            let launched = plan.0[0]["Plan"]["Plans"][0]["Workers Launched"]
                .as_i64()
                .unwrap_or(0);
            assert!(launched >= 1, "no parallel worker ran for {q}: {plan_text}");
            let parallel: Vec<u8> = one(q);
            force_parallel(false);
            let plan: pgrx::Json = one(&format!("EXPLAIN (FORMAT JSON) {q}"));
            assert!(
                !plan.0.to_string().contains("Gather"),
                "parallel plan for {q}"
            );
            let serial: Vec<u8> = one(q);
            assert_eq!(
                parallel, serial,
                "parallel and serial results differ for {q}"
            );
        }
    }

    #[pg_test]
    fn per_row_contains_fetches_a_stored_filter_once() {
        Spi::run(
            "CREATE TABLE feed_seen (user_id int PRIMARY KEY, seen bloom);
             INSERT INTO feed_seen SELECT 1, bloom_agg(g) FROM generate_series(1, 100000) g;
             CREATE TABLE candidates AS SELECT g AS id FROM generate_series(99501, 100500) g;
             ANALYZE feed_seen; ANALYZE candidates",
        )
        .unwrap();
        let stored_out_of_line: bool = one(
            "SELECT pg_column_size(seen) > 100000 AND
                    (SELECT reltoastrelid <> 0 FROM pg_class WHERE relname = 'feed_seen') FROM feed_seen",
        );
        assert!(stored_out_of_line);
        let plan: pgrx::Json = one("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)
             SELECT c.id FROM feed_seen f, candidates c
             WHERE f.user_id = 1 AND NOT bloom_contains(f.seen, c.id)");
        let hits = plan.0[0]["Plan"]["Shared Hit Blocks"].as_i64().unwrap()
            + plan.0[0]["Plan"]["Shared Read Blocks"].as_i64().unwrap();
        // One fetch of a ~130 KB value touches about 20 TOAST pages; 1,000 fetches would touch 20,000+.
        assert!(
            hits < 500,
            "per-row contains touched {hits} buffers for 1,000 rows"
        );
        let kept: i64 = one("SELECT count(*) FROM feed_seen f, candidates c
             WHERE f.user_id = 1 AND NOT bloom_contains(f.seen, c.id)");
        // 500 candidates were added, 500 were not: those stay, less a few false positives.
        assert!(
            (480..=500).contains(&kept),
            "kept {kept} of 500 unseen candidates"
        );
    }
}

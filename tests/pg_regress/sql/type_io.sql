-- The bloom type's ways in and out: text, binary (COPY BINARY), bytea casts.
-- Every way in validates the whole value; malformed input is 22P02.

-- Text round trip, for the exact and the split-block representations.
CREATE TABLE io (id int, f bloom);
INSERT INTO io VALUES
    (1, bloom_empty()),
    (2, bloom_add(bloom_empty(), ARRAY[1, 2, 3])),
    (3, bloom_add(bloom_empty(10, 0.01, false), ARRAY[1, 2, 3, 4, 5, 6, 7, 8, 9, 10])),
    (4, (SELECT bloom_agg(g, 1000, 0.01) FROM generate_series(1, 5000) g));
SELECT id, f::text = (f::text)::bloom::text AS text_round_trips,
       bloom_info(f)->>'representation' AS representation
FROM io ORDER BY id;
SELECT f FROM io WHERE id = 2;

-- bytea casts round trip; bloom::bytea is the stored format.
SELECT id, (f::bytea)::bloom::bytea = f::bytea AS bytea_round_trips FROM io ORDER BY id;
SELECT substr(f::bytea, 1, 8) AS magic_version_hash_repr_flags FROM io WHERE id = 2;

-- COPY BINARY goes through bloom_send and bloom_recv.
COPY io TO '/tmp/seen_bloom_regress_io.bin' (FORMAT binary);
CREATE TABLE io_copy (id int, f bloom);
COPY io_copy FROM '/tmp/seen_bloom_regress_io.bin' (FORMAT binary);
SELECT a.id, a.f::bytea = b.f::bytea AS binary_round_trips
FROM io a JOIN io_copy b USING (id) ORDER BY a.id;

-- Malformed text: 22P02.
SELECT ''::bloom;
\echo :SQLSTATE
SELECT 'hello'::bloom;
\echo :SQLSTATE
SELECT '\x'::bloom;
\echo :SQLSTATE
SELECT '\x5'::bloom;
\echo :SQLSTATE
SELECT '\xzz'::bloom;
\echo :SQLSTATE
-- a valid header with the magic changed
SELECT ('\x00' || substr((SELECT f::text FROM io WHERE id = 1), 5))::bloom;
\echo :SQLSTATE
-- truncated: the last hash cut short
SELECT substr((SELECT f::text FROM io WHERE id = 2), 1, 100)::bloom;
\echo :SQLSTATE
-- trailing bytes
SELECT ((SELECT f::text FROM io WHERE id = 2) || '00')::bloom;
\echo :SQLSTATE

-- Malformed bytes through the bytea cast: 22P02, never a crash.
SELECT '\x'::bytea::bloom;
\echo :SQLSTATE
SELECT '\x53424c4d'::bytea::bloom;
\echo :SQLSTATE
-- format version 3 is not known
SELECT set_byte(f::bytea, 4, 3)::bloom FROM io WHERE id = 2;
\echo :SQLSTATE
-- unknown hash algorithm
SELECT set_byte(f::bytea, 5, 9)::bloom FROM io WHERE id = 2;
\echo :SQLSTATE
-- unknown flag bits
SELECT set_byte(f::bytea, 7, 128)::bloom FROM io WHERE id = 2;
\echo :SQLSTATE
-- exact hashes out of order: swap the first and second hash
SELECT (substr(f::bytea, 1, 40) || substr(f::bytea, 49, 8) || substr(f::bytea, 41, 8) || substr(f::bytea, 57))::bloom
FROM io WHERE id = 2;
\echo :SQLSTATE
-- a forged item count claiming a huge value: rejected before any allocation
SELECT set_byte(set_byte(f::bytea, 39, 127), 38, 255)::bloom FROM io WHERE id = 2;
\echo :SQLSTATE
-- a forged block count in a split-block layer
SELECT set_byte(f::bytea, 40 + 24 + 7, 64)::bloom FROM io WHERE id = 3;
\echo :SQLSTATE
-- capacity 0 in the header
SELECT overlay(f::bytea placing '\x0000000000000000'::bytea from 17 for 8)::bloom FROM io WHERE id = 1;
\echo :SQLSTATE

-- Malformed bytes through COPY BINARY: a bytea column read back as bloom.
CREATE TABLE io_bad (id int, f bytea);
INSERT INTO io_bad VALUES (1, '\x53424c4d01'::bytea);
COPY io_bad TO '/tmp/seen_bloom_regress_bad.bin' (FORMAT binary);
COPY io_copy FROM '/tmp/seen_bloom_regress_bad.bin' (FORMAT binary);
\echo :SQLSTATE
SELECT count(*) AS rows_after_failed_copy FROM io_copy;

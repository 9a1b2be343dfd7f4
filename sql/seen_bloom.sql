-- seen_bloom: the bloom type and its value-level functions.
-- Every object carries a COMMENT so that \dT+, \df+ and \do+ document it.

CREATE TYPE bloom;

CREATE FUNCTION bloom_in(cstring) RETURNS bloom
    AS 'MODULE_PATHNAME', 'bloom_in' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION bloom_out(bloom) RETURNS cstring
    AS 'MODULE_PATHNAME', 'bloom_out' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION bloom_recv(internal) RETURNS bloom
    AS 'MODULE_PATHNAME', 'bloom_recv' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION bloom_send(bloom) RETURNS bytea
    AS 'MODULE_PATHNAME', 'bloom_send' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- STORAGE external: large filters go out of line uncompressed, so a read fetches them
-- without a decompression pass (a filled filter does not compress anyway).
CREATE TYPE bloom (
    INPUT = bloom_in,
    OUTPUT = bloom_out,
    RECEIVE = bloom_recv,
    SEND = bloom_send,
    INTERNALLENGTH = VARIABLE,
    ALIGNMENT = int4,
    STORAGE = external
);

COMMENT ON TYPE bloom IS
    'A set of items (bigint, integer, text, uuid, bytea) answering "probably seen" or "surely not seen": exact while small, then a split-block Bloom filter sized for its capacity and error rate, scaling past capacity unless fixed';
COMMENT ON FUNCTION bloom_in(cstring) IS 'Text input of bloom: \x followed by the value''s bytes in hex; the whole value is validated';
COMMENT ON FUNCTION bloom_out(bloom) IS 'Text output of bloom: \x followed by the value''s bytes in hex';
COMMENT ON FUNCTION bloom_recv(internal) IS 'Binary input of bloom (COPY BINARY, binary parameters); the whole value is validated';
COMMENT ON FUNCTION bloom_send(bloom) IS 'Binary output of bloom: the value''s bytes';

CREATE FUNCTION bloom(bytea) RETURNS bloom
    AS 'MODULE_PATHNAME', 'bloom_from_bytea' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bloom(bytea) IS 'Reads a bloom from its bytes (as given by bloom::bytea), validating the whole value';
CREATE CAST (bytea AS bloom) WITH FUNCTION bloom(bytea);
COMMENT ON CAST (bytea AS bloom) IS 'Validating cast from the byte format (docs/FORMAT.md); malformed bytes raise 22P02';
CREATE CAST (bloom AS bytea) WITHOUT FUNCTION;
COMMENT ON CAST (bloom AS bytea) IS 'The value''s bytes in the versioned, little-endian byte format (docs/FORMAT.md)';

-- Construction. NULL arguments take the defaults from the GUCs, which is why it is STABLE.
CREATE FUNCTION bloom_empty(capacity bigint DEFAULT NULL, error_rate float8 DEFAULT NULL, scaling boolean DEFAULT true)
    RETURNS bloom AS 'MODULE_PATHNAME', 'bloom_empty' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION bloom_empty(bigint, float8, boolean) IS
    'An empty filter for capacity items at error_rate (NULL: seen_bloom.default_capacity, seen_bloom.default_error_rate); scaling filters add layers past capacity, fixed ones refuse new items (54000)';

-- Adding. A NULL filter starts a default one; a NULL item leaves the filter as it is.
CREATE FUNCTION bloom_add(filter bloom, item bigint) RETURNS bloom
    AS 'MODULE_PATHNAME', 'bloom_add_int8' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION bloom_add(filter bloom, item text) RETURNS bloom
    AS 'MODULE_PATHNAME', 'bloom_add_bytes' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION bloom_add(filter bloom, item bytea) RETURNS bloom
    AS 'MODULE_PATHNAME', 'bloom_add_bytes' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION bloom_add(filter bloom, item uuid) RETURNS bloom
    AS 'MODULE_PATHNAME', 'bloom_add_uuid' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION bloom_add(filter bloom, items anyarray) RETURNS bloom
    AS 'MODULE_PATHNAME', 'bloom_add_array' LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION bloom_add(bloom, bigint) IS 'The filter with item added (smallint and integer hash as the equal bigint); a NULL filter starts a default one, a NULL item changes nothing';
COMMENT ON FUNCTION bloom_add(bloom, text) IS 'The filter with item added (hashed as its UTF-8 bytes); a NULL filter starts a default one, a NULL item changes nothing';
COMMENT ON FUNCTION bloom_add(bloom, bytea) IS 'The filter with item added (hashed as its bytes); a NULL filter starts a default one, a NULL item changes nothing';
COMMENT ON FUNCTION bloom_add(bloom, uuid) IS 'The filter with item added (hashed as its 16 bytes); a NULL filter starts a default one, a NULL item changes nothing';
COMMENT ON FUNCTION bloom_add(bloom, anyarray) IS 'The filter with every non-NULL element added (like BF.MADD); elements of smallint, integer, bigint, text, varchar, uuid or bytea';

-- Membership.
CREATE FUNCTION bloom_contains(filter bloom, item bigint) RETURNS boolean
    AS 'MODULE_PATHNAME', 'bloom_contains_int8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION bloom_contains(filter bloom, item text) RETURNS boolean
    AS 'MODULE_PATHNAME', 'bloom_contains_bytes' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION bloom_contains(filter bloom, item bytea) RETURNS boolean
    AS 'MODULE_PATHNAME', 'bloom_contains_bytes' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION bloom_contains(filter bloom, item uuid) RETURNS boolean
    AS 'MODULE_PATHNAME', 'bloom_contains_uuid' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION bloom_contains(filter bloom, items anyarray) RETURNS boolean[]
    AS 'MODULE_PATHNAME', 'bloom_contains_array' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bloom_contains(bloom, bigint) IS 'True if item was probably added, false if surely not; a stored filter is fetched once per call site, not once per row';
COMMENT ON FUNCTION bloom_contains(bloom, text) IS 'True if item was probably added, false if surely not; a stored filter is fetched once per call site, not once per row';
COMMENT ON FUNCTION bloom_contains(bloom, bytea) IS 'True if item was probably added, false if surely not; a stored filter is fetched once per call site, not once per row';
COMMENT ON FUNCTION bloom_contains(bloom, uuid) IS 'True if item was probably added, false if surely not; a stored filter is fetched once per call site, not once per row';
COMMENT ON FUNCTION bloom_contains(bloom, anyarray) IS 'One answer per element, in order, NULL for a NULL element (like BF.MEXISTS)';

CREATE FUNCTION bloom_unseen(filter bloom, candidates anyarray) RETURNS anyarray
    AS 'MODULE_PATHNAME', 'bloom_unseen' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION bloom_unseen(bloom, anyarray) IS
    'The feed filter: candidates in their order without the probably-seen ones, repeats (first kept) and NULLs; a NULL filter means nothing seen';

-- Equality: byte for byte (two filters of the same items built in another order or shape
-- differ), with a hash operator class so that DISTINCT, UNION and GROUP BY work on bloom
-- columns. bloom is binary-coercible to bytea, so bytea's own functions serve.
CREATE FUNCTION bloom_eq(a bloom, b bloom) RETURNS boolean
    AS 'byteaeq' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION bloom_ne(a bloom, b bloom) RETURNS boolean
    AS 'byteane' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;
CREATE FUNCTION bloom_hash(filter bloom) RETURNS integer
    AS 'hashvarlena' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION bloom_hash_extended(filter bloom, seed bigint) RETURNS bigint
    AS 'hashvarlenaextended' LANGUAGE internal IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bloom_eq(bloom, bloom) IS 'True if two filters are the same bytes (the = operator)';
COMMENT ON FUNCTION bloom_ne(bloom, bloom) IS 'True if two filters differ in any byte (the <> operator)';
COMMENT ON FUNCTION bloom_hash(bloom) IS 'Hash of a filter''s bytes (the hash operator class)';
COMMENT ON FUNCTION bloom_hash_extended(bloom, bigint) IS 'Seeded 64-bit hash of a filter''s bytes (the hash operator class)';
CREATE OPERATOR = (LEFTARG = bloom, RIGHTARG = bloom, FUNCTION = bloom_eq, COMMUTATOR = =, NEGATOR = <>,
                   RESTRICT = eqsel, JOIN = eqjoinsel, HASHES);
CREATE OPERATOR <> (LEFTARG = bloom, RIGHTARG = bloom, FUNCTION = bloom_ne, COMMUTATOR = <>, NEGATOR = =,
                    RESTRICT = neqsel, JOIN = neqjoinsel);
COMMENT ON OPERATOR = (bloom, bloom) IS 'Byte equality of two filters';
COMMENT ON OPERATOR <> (bloom, bloom) IS 'Byte inequality of two filters';
CREATE OPERATOR CLASS bloom_hash_ops DEFAULT FOR TYPE bloom USING hash AS
    OPERATOR 1 = (bloom, bloom),
    FUNCTION 1 bloom_hash(bloom),
    FUNCTION 2 bloom_hash_extended(bloom, bigint);
COMMENT ON OPERATOR CLASS bloom_hash_ops USING hash IS 'Hashing of bloom values by their bytes: DISTINCT, UNION, GROUP BY and hash joins';
COMMENT ON OPERATOR FAMILY bloom_hash_ops USING hash IS 'Hashing of bloom values by their bytes (the family of bloom_hash_ops)';

-- Combining and inspecting.
CREATE FUNCTION bloom_union(a bloom, b bloom) RETURNS bloom
    AS 'MODULE_PATHNAME', 'bloom_union' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bloom_union(bloom, bloom) IS 'A filter holding the items of both; both must have the same shape (capacity, error rate, scaling), else 22000';
CREATE OPERATOR || (LEFTARG = bloom, RIGHTARG = bloom, FUNCTION = bloom_union);
COMMENT ON OPERATOR || (bloom, bloom) IS 'Union of two filters of the same shape (bloom_union)';

CREATE FUNCTION bloom_cardinality(filter bloom) RETURNS bigint
    AS 'MODULE_PATHNAME', 'bloom_cardinality' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bloom_cardinality(bloom) IS 'Distinct items added: exact while the filter is exact, then the count of adds that were new (an estimate after unions)';
CREATE FUNCTION bloom_info(filter bloom) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'bloom_info' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION bloom_info(bloom) IS
    'The filter described as jsonb: format_version, representation, hash, seed, capacity, error_rate, scaling, layers, items, bytes, fill_ratio, estimated_fpr and layer_details';

-- bloom_agg(item [, capacity, error_rate]): collects hashes, builds the filter once at the end.
CREATE FUNCTION bloom_agg_add(state internal, item bigint) RETURNS internal
    AS 'MODULE_PATHNAME', 'bloom_agg_add_int8' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION bloom_agg_add(state internal, item text) RETURNS internal
    AS 'MODULE_PATHNAME', 'bloom_agg_add_bytes' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION bloom_agg_add(state internal, item bytea) RETURNS internal
    AS 'MODULE_PATHNAME', 'bloom_agg_add_bytes' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION bloom_agg_add(state internal, item uuid) RETURNS internal
    AS 'MODULE_PATHNAME', 'bloom_agg_add_uuid' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION bloom_agg_add(state internal, item bigint, capacity bigint, error_rate float8) RETURNS internal
    AS 'MODULE_PATHNAME', 'bloom_agg_add_int8' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION bloom_agg_add(state internal, item text, capacity bigint, error_rate float8) RETURNS internal
    AS 'MODULE_PATHNAME', 'bloom_agg_add_bytes' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION bloom_agg_add(state internal, item bytea, capacity bigint, error_rate float8) RETURNS internal
    AS 'MODULE_PATHNAME', 'bloom_agg_add_bytes' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION bloom_agg_add(state internal, item uuid, capacity bigint, error_rate float8) RETURNS internal
    AS 'MODULE_PATHNAME', 'bloom_agg_add_uuid' LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION bloom_agg_combine(internal, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'bloom_agg_combine' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION bloom_agg_serialize(internal) RETURNS bytea
    AS 'MODULE_PATHNAME', 'bloom_agg_serialize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION bloom_agg_deserialize(bytea, internal) RETURNS internal
    AS 'MODULE_PATHNAME', 'bloom_agg_deserialize' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION bloom_agg_final(internal) RETURNS bloom
    AS 'MODULE_PATHNAME', 'bloom_agg_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION bloom_agg_add(internal, bigint) IS 'Transition function of bloom_agg(bigint)';
COMMENT ON FUNCTION bloom_agg_add(internal, text) IS 'Transition function of bloom_agg(text)';
COMMENT ON FUNCTION bloom_agg_add(internal, bytea) IS 'Transition function of bloom_agg(bytea)';
COMMENT ON FUNCTION bloom_agg_add(internal, uuid) IS 'Transition function of bloom_agg(uuid)';
COMMENT ON FUNCTION bloom_agg_add(internal, bigint, bigint, float8) IS 'Transition function of bloom_agg(bigint, capacity, error_rate)';
COMMENT ON FUNCTION bloom_agg_add(internal, text, bigint, float8) IS 'Transition function of bloom_agg(text, capacity, error_rate)';
COMMENT ON FUNCTION bloom_agg_add(internal, bytea, bigint, float8) IS 'Transition function of bloom_agg(bytea, capacity, error_rate)';
COMMENT ON FUNCTION bloom_agg_add(internal, uuid, bigint, float8) IS 'Transition function of bloom_agg(uuid, capacity, error_rate)';
COMMENT ON FUNCTION bloom_agg_combine(internal, internal) IS 'Combine function of bloom_agg and bloom_union_agg (parallel aggregation)';
COMMENT ON FUNCTION bloom_agg_serialize(internal) IS 'Serial function of bloom_agg and bloom_union_agg (parallel aggregation)';
COMMENT ON FUNCTION bloom_agg_deserialize(bytea, internal) IS 'Deserial function of bloom_agg and bloom_union_agg (parallel aggregation)';
COMMENT ON FUNCTION bloom_agg_final(internal) IS 'Final function of bloom_agg and bloom_union_agg: builds the filter from the collected hashes';

CREATE AGGREGATE bloom_agg(bigint) (SFUNC = bloom_agg_add, STYPE = internal, FINALFUNC = bloom_agg_final,
    COMBINEFUNC = bloom_agg_combine, SERIALFUNC = bloom_agg_serialize, DESERIALFUNC = bloom_agg_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE bloom_agg(text) (SFUNC = bloom_agg_add, STYPE = internal, FINALFUNC = bloom_agg_final,
    COMBINEFUNC = bloom_agg_combine, SERIALFUNC = bloom_agg_serialize, DESERIALFUNC = bloom_agg_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE bloom_agg(bytea) (SFUNC = bloom_agg_add, STYPE = internal, FINALFUNC = bloom_agg_final,
    COMBINEFUNC = bloom_agg_combine, SERIALFUNC = bloom_agg_serialize, DESERIALFUNC = bloom_agg_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE bloom_agg(uuid) (SFUNC = bloom_agg_add, STYPE = internal, FINALFUNC = bloom_agg_final,
    COMBINEFUNC = bloom_agg_combine, SERIALFUNC = bloom_agg_serialize, DESERIALFUNC = bloom_agg_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE bloom_agg(bigint, bigint, float8) (SFUNC = bloom_agg_add, STYPE = internal, FINALFUNC = bloom_agg_final,
    COMBINEFUNC = bloom_agg_combine, SERIALFUNC = bloom_agg_serialize, DESERIALFUNC = bloom_agg_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE bloom_agg(text, bigint, float8) (SFUNC = bloom_agg_add, STYPE = internal, FINALFUNC = bloom_agg_final,
    COMBINEFUNC = bloom_agg_combine, SERIALFUNC = bloom_agg_serialize, DESERIALFUNC = bloom_agg_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE bloom_agg(bytea, bigint, float8) (SFUNC = bloom_agg_add, STYPE = internal, FINALFUNC = bloom_agg_final,
    COMBINEFUNC = bloom_agg_combine, SERIALFUNC = bloom_agg_serialize, DESERIALFUNC = bloom_agg_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE bloom_agg(uuid, bigint, float8) (SFUNC = bloom_agg_add, STYPE = internal, FINALFUNC = bloom_agg_final,
    COMBINEFUNC = bloom_agg_combine, SERIALFUNC = bloom_agg_serialize, DESERIALFUNC = bloom_agg_deserialize, PARALLEL = SAFE);
COMMENT ON AGGREGATE bloom_agg(bigint) IS 'A scaling filter of the default shape holding every non-NULL item; a parallel plan gives the same filter as a serial one';
COMMENT ON AGGREGATE bloom_agg(text) IS 'A scaling filter of the default shape holding every non-NULL item; a parallel plan gives the same filter as a serial one';
COMMENT ON AGGREGATE bloom_agg(bytea) IS 'A scaling filter of the default shape holding every non-NULL item; a parallel plan gives the same filter as a serial one';
COMMENT ON AGGREGATE bloom_agg(uuid) IS 'A scaling filter of the default shape holding every non-NULL item; a parallel plan gives the same filter as a serial one';
COMMENT ON AGGREGATE bloom_agg(bigint, bigint, float8) IS 'A scaling filter for (item, capacity, error_rate), shape taken from the first row';
COMMENT ON AGGREGATE bloom_agg(text, bigint, float8) IS 'A scaling filter for (item, capacity, error_rate), shape taken from the first row';
COMMENT ON AGGREGATE bloom_agg(bytea, bigint, float8) IS 'A scaling filter for (item, capacity, error_rate), shape taken from the first row';
COMMENT ON AGGREGATE bloom_agg(uuid, bigint, float8) IS 'A scaling filter for (item, capacity, error_rate), shape taken from the first row';

-- bloom_union_agg(bloom): shares bloom_agg's combine, serial, deserial and final functions.
CREATE FUNCTION bloom_union_agg_add(state internal, filter bloom) RETURNS internal
    AS 'MODULE_PATHNAME', 'bloom_union_agg_add' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION bloom_union_agg_add(internal, bloom) IS 'Transition function of bloom_union_agg';

CREATE AGGREGATE bloom_union_agg(bloom) (SFUNC = bloom_union_agg_add, STYPE = internal, FINALFUNC = bloom_agg_final,
    COMBINEFUNC = bloom_agg_combine, SERIALFUNC = bloom_agg_serialize, DESERIALFUNC = bloom_agg_deserialize,
    PARALLEL = SAFE);
COMMENT ON AGGREGATE bloom_union_agg(bloom) IS 'The union of every non-NULL filter (all of the same shape, else 22000); a parallel plan gives the same filter as a serial one';

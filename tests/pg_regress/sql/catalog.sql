-- Every SQL object of the extension is documented and marked as it should be.

-- Objects without a COMMENT: none. Array types and the row types of tables come with their
-- type or table (PostgreSQL 17 and later record them as members too) and are left out.
CREATE TEMP VIEW members AS
SELECT d.classid, d.objid, d.objsubid
FROM pg_depend d
WHERE d.refclassid = 'pg_extension'::regclass
  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'seen_bloom')
  AND d.deptype = 'e'
  AND NOT (d.classid = 'pg_type'::regclass
           AND EXISTS (SELECT 1 FROM pg_type t WHERE t.oid = d.objid AND (t.typelem <> 0 AND t.typlen = -1 OR t.typrelid <> 0)));
SELECT pg_describe_object(classid, objid, objsubid) AS undocumented
FROM members
WHERE obj_description(objid, (SELECT relname FROM pg_class WHERE oid = classid)) IS NULL
ORDER BY 1;

-- What that check covered.
SELECT count(*) FILTER (WHERE classid = 'pg_proc'::regclass) AS functions,
       count(*) FILTER (WHERE classid = 'pg_type'::regclass) AS types,
       count(*) FILTER (WHERE classid = 'pg_cast'::regclass) AS casts,
       count(*) FILTER (WHERE classid = 'pg_operator'::regclass) AS operators
FROM members;

-- Functions with their volatility, strictness and parallel safety.
SELECT p.oid::regprocedure AS function, p.prokind AS kind, p.provolatile AS volatility,
       p.proisstrict AS strict, p.proparallel AS parallel
FROM pg_proc p
JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'seen_bloom')
ORDER BY p.oid::regprocedure::text;

-- The type stores large values out of line without compression.
SELECT typname, typstorage, typlen FROM pg_type WHERE typname = 'bloom';

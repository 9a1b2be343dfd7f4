-- Every SQL object of the extension is documented and marked as it should be.

-- Objects without a COMMENT: none.
SELECT pg_describe_object(classid, objid, objsubid) AS undocumented
FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'seen_bloom')
  AND deptype = 'e'
  AND obj_description(objid, (SELECT relname FROM pg_class WHERE oid = classid)) IS NULL
ORDER BY 1;

-- What that check covered.
SELECT count(*) FILTER (WHERE classid = 'pg_proc'::regclass) AS functions,
       count(*) FILTER (WHERE classid = 'pg_type'::regclass) AS types,
       count(*) FILTER (WHERE classid = 'pg_cast'::regclass) AS casts,
       count(*) FILTER (WHERE classid = 'pg_operator'::regclass) AS operators
FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'seen_bloom')
  AND deptype = 'e';

-- Functions with their volatility, strictness and parallel safety.
SELECT p.oid::regprocedure AS function, p.prokind AS kind, p.provolatile AS volatility,
       p.proisstrict AS strict, p.proparallel AS parallel
FROM pg_proc p
JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'seen_bloom')
ORDER BY p.oid::regprocedure::text;

-- The type stores large values out of line without compression.
SELECT typname, typstorage, typlen FROM pg_type WHERE typname = 'bloom';

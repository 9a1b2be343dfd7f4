// seen_bloom from node-postgres (docs/CLIENTS.md#node-postgres-pg).
//
//     npm install pg pg-copy-streams
//     SEEN_BLOOM_DSN=postgresql://postgres@127.0.0.1:5432/postgres node node_pg.mjs
//
// Creates two impressions tables of its own (bigint users and items; text users and uuid
// items), tracks them, inserts impressions (multi-row and COPY), asks the feed question,
// reads a bloom value, checks the SQLSTATEs of three mistakes, and drops the tables. Exits 1
// when an answer is not the expected one.
//
// node-postgres sends every parameter untyped (type 0: the server infers it), so every
// parameter of a polymorphic or overloaded seen_bloom function needs a cast in the SQL: the
// user ($2::bigint, $2::text, $2::uuid) and the candidates ($3::bigint[], $3::uuid[], ...).
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import copyStreams from 'pg-copy-streams';

class CheckFailed extends Error {}
function check(ok, what) {
  if (!ok) throw new CheckFailed(what);
  console.log(`ok: ${what}`);
}
const same = (a, b) => JSON.stringify(a, (_, v) => (typeof v === 'bigint' ? `${v}n` : v)) ===
  JSON.stringify(b, (_, v) => (typeof v === 'bigint' ? `${v}n` : v));

// Result parsers of this client. By default node-postgres returns bigint (int8) as a string
// and a bloom as its text form ('\x5342...'); here int8 becomes BigInt and bloom a Buffer.
const parsers = new Map([
  [20, (v) => BigInt(v)], // int8
  [1016, (v) => pg.types.arrayParser.create(v, (x) => BigInt(x)).parse()], // int8[]
]);
const types = { getTypeParser: (oid, format) => parsers.get(oid) ?? pg.types.getTypeParser(oid, format) };

async function registerBloom(client) {
  const { rows } = await client.query("SELECT to_regtype('bloom')::oid AS oid");
  if (rows[0].oid == null) throw new Error('type bloom not found: CREATE EXTENSION seen_bloom');
  // Text form: '\x' and hex, as bytea; pg's bytea parser gives a Buffer.
  parsers.set(Number(rows[0].oid), pg.types.getTypeParser(17, 'text'));
}

async function sqlstateOf(client, sql, params) {
  try {
    await client.query(sql, params);
  } catch (err) {
    return err.code; // the SQLSTATE
  }
  return null;
}

async function run(client, impressions, byName) {
  await client.query('CREATE EXTENSION IF NOT EXISTS seen_bloom');

  // --- tracking ------------------------------------------------------------------------------
  await client.query(`CREATE TABLE ${impressions} (user_id bigint, post_id bigint,
                      seen_at timestamptz NOT NULL DEFAULT now(), watch_pct real)`);
  const tracked = await client.query(
    `SELECT seen_bloom.track($1, 'user_id', 'post_id', 'seen_at', "where" => 'watch_pct >= 0.5')::text AS t`,
    [impressions]);
  check(tracked.rows[0].t === `${impressions}_seen`, `track() made ${tracked.rows[0].t}`);
  await client.query(`CREATE TABLE ${byName} (user_name text, item uuid, seen_at timestamptz NOT NULL DEFAULT now())`);
  await client.query("SELECT seen_bloom.track($1, 'user_name', 'item', 'seen_at')", [byName]);

  // --- batch inserts -------------------------------------------------------------------------
  // One multi-row INSERT: ($1, $2, $3), ($4, $5, $6), ...
  const rows = [[7, 1001, 0.9], [7, 1002, 1.0], [7, 1005, 0.1], [8, 1003, 0.7]];
  for (let k = 0; k < 50; k++) rows.push([9, 2000 + k, 1.0]);
  const placeholders = rows.map((_, i) => `($${3 * i + 1}, $${3 * i + 2}, $${3 * i + 3})`).join(', ');
  await client.query('BEGIN');
  await client.query(`INSERT INTO ${impressions} (user_id, post_id, watch_pct) VALUES ${placeholders}`, rows.flat());
  const inTx = await client.query('SELECT seen_bloom.has_seen($1, $2::bigint, $3::bigint) AS s', [impressions, 7, 1001]);
  check(inTx.rows[0].s === true, 'an impression is seen inside its own transaction');
  await client.query('COMMIT');
  // COPY (pg-copy-streams): text format, one line per row.
  const lines = Array.from({ length: 1000 }, (_, k) => `10\t${5000 + k}\t0.8\n`);
  await pipeline(Readable.from(lines),
    client.query(copyStreams.from(`COPY ${impressions} (user_id, post_id, watch_pct) FROM STDIN`)));
  const alice = 'alice';
  const seenItems = [randomUUID(), randomUUID(), randomUUID()];
  await pipeline(Readable.from(seenItems.map((u) => `${alice}\t${u}\n`)),
    client.query(copyStreams.from(`COPY ${byName} (user_name, item) FROM STDIN`)));

  // --- the feed call -------------------------------------------------------------------------
  const feed = 'SELECT seen_bloom.unseen($1, $2::bigint, $3::bigint[]) AS unseen';
  let r = await client.query(feed, [impressions, 7, [1001, 1003, 1002, 1004, 1005, 1003]]);
  check(same(r.rows[0].unseen, [1003n, 1004n, 1005n]), `user 7: unseen ${r.rows[0].unseen}`);
  // A prepared statement by name: parsed and planned once per connection.
  r = await client.query({ name: 'feed', text: feed, values: [impressions, 10, Array.from({ length: 20 }, (_, k) => 5990 + k)] });
  check(same(r.rows[0].unseen, Array.from({ length: 10 }, (_, k) => BigInt(6000 + k))), 'COPY: 5990..5999 seen, 6000..6009 not');
  r = await client.query({ name: 'feed', text: feed, values: [impressions, 9, [2000n, 2049n, 2050n]] });
  check(same(r.rows[0].unseen, [2050n]), 'multi-row INSERT folded (BigInt parameters too)');
  r = await client.query(feed, [impressions, 7, []]);
  check(same(r.rows[0].unseen, []), 'no candidates, no answer');
  r = await client.query(feed, [impressions, null, [1001]]);
  check(same(r.rows[0].unseen, [1001n]), 'a NULL user has seen nothing');
  const newItem = randomUUID();
  r = await client.query('SELECT seen_bloom.unseen($1, $2::text, $3::uuid[]) AS unseen',
    [byName, alice, [seenItems[0], newItem, seenItems[2]]]);
  check(same(r.rows[0].unseen, [newItem]), 'alice: only the new uuid is unseen');
  r = await client.query('SELECT seen_bloom.has_seen($1, $2::text, $3::uuid) AS s', [byName, alice, seenItems[1]]);
  check(r.rows[0].s === true, 'has_seen(alice, item)');

  // --- reading a bloom value -----------------------------------------------------------------
  r = await client.query('SELECT seen_bloom.filter($1, $2::bigint) AS f', [impressions, 7]);
  check(typeof r.rows[0].f === 'string' && r.rows[0].f.startsWith('\\x'), 'without a parser a bloom is hex text');
  await registerBloom(client);
  r = await client.query('SELECT seen_bloom.filter($1, $2::bigint) AS f', [impressions, 7]);
  const value = r.rows[0].f;
  check(Buffer.isBuffer(value) && value.subarray(0, 4).toString() === 'SBLM', `a bloom value of ${value.length} bytes`);
  // A Buffer parameter is sent in binary; cast it to bloom (the server validates the bytes).
  r = await client.query('SELECT bloom_contains($1::bloom, $2::bigint[]) AS c, bloom_cardinality($1::bloom) AS n',
    [value, [1001, 1003]]);
  check(same([r.rows[0].c, r.rows[0].n], [[true, false], 2n]), 'bloom_contains/bloom_cardinality of the value read');

  // --- errors by SQLSTATE --------------------------------------------------------------------
  // 42804: no casts, node-postgres's usual mistake.
  try {
    await client.query('SELECT seen_bloom.unseen($1, $2, $3)', [impressions, 7, [1001]]);
    check(false, 'untyped parameters fail');
  } catch (err) {
    if (err instanceof CheckFailed) throw err;
    check(err.code === '42804' && /polymorphic/.test(err.message), '42804 could not determine polymorphic type');
  }
  // 42804 too: an untyped user resolves to the text overload, and the table's users are bigint.
  check(await sqlstateOf(client, 'SELECT seen_bloom.unseen($1, $2, $3::bigint[])', [impressions, 7, [1001]]) === '42804',
    '42804 an uncast user is text');
  check(await sqlstateOf(client, feed, ['pg_class', 7, [1]]) === '55000', '55000 not tracked');
  check(await sqlstateOf(client, feed, [impressions, 7, [[1, 2], [3, 4]]]) === '22023', '22023 two-dimensional candidates');
  check(await sqlstateOf(client, 'SELECT bloom_empty($1::bigint)', [0]) === '22023', '22023 capacity 0');
}

async function main() {
  const dsn = process.env.SEEN_BLOOM_DSN;
  if (!dsn) {
    console.error('set SEEN_BLOOM_DSN, e.g. postgresql://postgres@127.0.0.1:5432/postgres');
    return 2;
  }
  const suffix = randomUUID().replaceAll('-', '').slice(0, 10);
  const impressions = `impressions_node_${suffix}`;
  const byName = `impressions_by_name_node_${suffix}`;
  const client = new pg.Client({ connectionString: dsn, types });
  await client.connect();
  try {
    await client.query('SET client_min_messages = warning');
    await run(client, impressions, byName);
  } catch (err) {
    if (!(err instanceof CheckFailed)) throw err;
    console.error(`FAIL: ${err.message}`);
    return 1;
  } finally {
    await client.query('ROLLBACK').catch(() => {}); // in case a check failed mid-transaction
    await client.query(`DROP TABLE IF EXISTS ${impressions}, ${byName}`);
    await client.end();
  }
  console.log('node_pg: all checks passed');
  return 0;
}

main().then((code) => { process.exitCode = code; }, (err) => { console.error(err); process.exitCode = 1; });

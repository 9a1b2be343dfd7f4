#!/usr/bin/env python3
"""seen_bloom from asyncpg (docs/CLIENTS.md#asyncpg).

    pip install asyncpg
    SEEN_BLOOM_DSN=postgresql://postgres@127.0.0.1:5432/postgres python3 python_asyncpg.py

Creates two impressions tables of its own (bigint users and items; text users and uuid
items), tracks them, inserts impressions (multi-row and COPY), asks the feed question,
reads a bloom value, checks the SQLSTATEs of three mistakes, and drops the tables. Exits 1
when an answer is not the expected one.

asyncpg prepares every statement and lets the server infer each parameter's type. The
polymorphic arguments of seen_bloom.unseen/has_seen give the server nothing to infer from,
so every such parameter needs a cast in the SQL ($2::bigint, $3::bigint[]).
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

import asyncpg


class CheckFailed(Exception):
    pass


def check(ok: bool, what: str) -> None:
    if not ok:
        raise CheckFailed(what)
    print(f"ok: {what}")


async def register_bloom(conn: asyncpg.Connection) -> None:
    """bloom values as bytes, both ways (binary format: the value's bytes). Pass this as a
    pool's init= to have it on every pooled connection."""
    schema = await conn.fetchval(
        "SELECT typnamespace::regnamespace::text FROM pg_type WHERE oid = to_regtype('bloom')"
    )
    await conn.set_type_codec("bloom", schema=schema, encoder=bytes, decoder=bytes, format="binary")


async def run(conn: asyncpg.Connection, impressions: str, by_name: str) -> None:
    await conn.execute("CREATE EXTENSION IF NOT EXISTS seen_bloom")

    # --- tracking ----------------------------------------------------------------------------
    await conn.execute(
        f"CREATE TABLE {impressions} (user_id bigint, post_id bigint,"
        " seen_at timestamptz NOT NULL DEFAULT now(), watch_pct real)"
    )
    filter_table = await conn.fetchval(
        "SELECT seen_bloom.track($1, 'user_id', 'post_id', 'seen_at', \"where\" => 'watch_pct >= 0.5')::text",
        impressions,
    )
    check(filter_table == f"{impressions}_seen", f"track() made {filter_table}")
    await conn.execute(
        f"CREATE TABLE {by_name} (user_name text, item uuid, seen_at timestamptz NOT NULL DEFAULT now())"
    )
    await conn.execute("SELECT seen_bloom.track($1, 'user_name', 'item', 'seen_at')", by_name)

    # --- batch inserts -----------------------------------------------------------------------
    async with conn.transaction():
        # executemany: one prepared statement, the rows pipelined.
        await conn.executemany(
            f"INSERT INTO {impressions} (user_id, post_id, watch_pct) VALUES ($1, $2, $3)",
            [(7, 1001, 0.9), (7, 1002, 1.0), (7, 1005, 0.1), (8, 1003, 0.7)],
        )
        check(
            await conn.fetchval("SELECT seen_bloom.has_seen($1, $2::bigint, $3::bigint)", impressions, 7, 1001),
            "an impression is seen inside its own transaction",
        )
    # One multi-row INSERT: arrays unnested server-side (one statement, any number of rows).
    await conn.execute(
        f"INSERT INTO {impressions} (user_id, post_id, watch_pct)"
        " SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::real[])",
        [9] * 50, [2000 + k for k in range(50)], [1.0] * 50,
    )
    # COPY (binary): the statement trigger folds the copied rows too.
    await conn.copy_records_to_table(
        impressions, records=[(10, 5000 + k, 0.8) for k in range(1000)], columns=["user_id", "post_id", "watch_pct"]
    )
    alice, bob = "alice", "bob"
    seen_items = [uuid.uuid4() for _ in range(3)]
    await conn.copy_records_to_table(by_name, records=[(alice, i) for i in seen_items], columns=["user_name", "item"])

    # --- the feed call -----------------------------------------------------------------------
    feed = "SELECT seen_bloom.unseen($1, $2::bigint, $3::bigint[])"
    unseen = await conn.fetchval(feed, impressions, 7, [1001, 1003, 1002, 1004, 1005, 1003])
    check(unseen == [1003, 1004, 1005], f"user 7: unseen {unseen}")
    check(await conn.fetchval(feed, impressions, 7, []) == [], "no candidates, no answer")
    unseen = await conn.fetchval(feed, impressions, 10, list(range(5990, 6010)))
    check(unseen == list(range(6000, 6010)), "COPY: 5990..5999 seen, 6000..6009 not")
    check(await conn.fetchval(feed, impressions, 9, [2000, 2049, 2050]) == [2050], "multi-row INSERT folded")
    check(await conn.fetchval(feed, impressions, None, [1001]) == [1001], "a NULL user has seen nothing")
    new_item = uuid.uuid4()
    feed_by_name = "SELECT seen_bloom.unseen($1, $2::text, $3::uuid[])"
    unseen = await conn.fetchval(feed_by_name, by_name, alice, [seen_items[0], new_item, seen_items[2]])
    check(unseen == [new_item], "alice: only the new uuid is unseen")
    check(await conn.fetchval(feed_by_name, by_name, bob, seen_items) == seen_items, "bob saw none of them")
    # A prepared statement for the hot path: parse and plan once per connection.
    stmt = await conn.prepare(feed)
    check(await stmt.fetchval(impressions, 8, [1003, 1004]) == [1004], "prepared feed statement")

    # --- reading a bloom value ---------------------------------------------------------------
    as_text = await conn.fetchval("SELECT seen_bloom.filter($1, $2::bigint)", impressions, 7)
    check(isinstance(as_text, str) and as_text.startswith("\\x"), "without a codec a bloom is hex text")
    await register_bloom(conn)
    value = await conn.fetchval("SELECT seen_bloom.filter($1, $2::bigint)", impressions, 7)
    check(isinstance(value, bytes) and value[:4] == b"SBLM", f"a bloom value of {len(value)} bytes")
    # With the codec, a bytes parameter cast to bloom is sent as the value's binary form.
    answer = await conn.fetchrow(
        "SELECT bloom_contains($1::bloom, $2::bigint[]) AS c, bloom_cardinality($1::bloom) AS n", value, [1001, 1003]
    )
    check((answer["c"], answer["n"]) == ([True, False], 2), "bloom_contains/bloom_cardinality of the value read")

    # --- errors by SQLSTATE ------------------------------------------------------------------
    async def sqlstate_of(sql: str, *args) -> str | None:
        try:
            await conn.fetchval(sql, *args)
        except asyncpg.PostgresError as e:
            return e.sqlstate
        return None

    # 42804: untyped polymorphic parameters (no casts): asyncpg's usual mistake.
    try:
        await conn.fetchval("SELECT seen_bloom.unseen($1, $2, $3)", impressions, 7, [1001])
        check(False, "untyped parameters fail")
    except asyncpg.exceptions.DatatypeMismatchError as e:
        check(e.sqlstate == "42804" and "polymorphic" in str(e), "42804 could not determine polymorphic type")
    check(
        await sqlstate_of("SELECT seen_bloom.unseen($1, $2::bigint, $3::text[])", impressions, 7, ["1001"]) == "42804",
        "42804 wrong item family",
    )
    try:
        await conn.fetchval(feed, "pg_class", 7, [1])
        check(False, "an untracked table fails")
    except asyncpg.exceptions.ObjectNotInPrerequisiteStateError as e:
        check(e.sqlstate == "55000", "55000 not tracked")
    check(await sqlstate_of(feed, impressions, 7, [[1, 2], [3, 4]]) == "22023", "22023 two-dimensional candidates")
    check(await sqlstate_of("SELECT bloom_empty($1::bigint)", 0) == "22023", "22023 capacity 0")


async def main() -> int:
    dsn = os.environ.get("SEEN_BLOOM_DSN")
    if not dsn:
        print("set SEEN_BLOOM_DSN, e.g. postgresql://postgres@127.0.0.1:5432/postgres", file=sys.stderr)
        return 2
    suffix = uuid.uuid4().hex[:10]
    impressions, by_name = f"impressions_apg_{suffix}", f"impressions_by_name_apg_{suffix}"
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("SET client_min_messages = warning")
        await run(conn, impressions, by_name)
    except CheckFailed as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    finally:
        await conn.execute(f"DROP TABLE IF EXISTS {impressions}, {by_name}")
        await conn.close()
    print("python_asyncpg: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

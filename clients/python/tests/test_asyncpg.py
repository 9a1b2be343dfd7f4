"""seen_bloom.asyncpg: the bloom codec, and the casts asyncpg needs."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from seen_bloom import Bloom
from seen_bloom.asyncpg import bloom_schema, register_bloom


def run(coro):
    return asyncio.run(coro)


def test_without_a_codec_a_bloom_is_hex_text(server_dsn, table):
    async def go():
        conn = await asyncpg.connect(server_dsn)
        try:
            return await conn.fetchval("SELECT seen_bloom.filter($1, $2::bigint)", table, 7)
        finally:
            await conn.close()

    value = run(go())
    assert isinstance(value, str) and value.startswith("\\x")


def test_register_bloom_reads_and_sends_bloom(server_dsn, table):
    async def go():
        conn = await asyncpg.connect(server_dsn)
        try:
            await register_bloom(conn)
            assert await bloom_schema(conn)
            f = await conn.fetchval("SELECT seen_bloom.filter($1, $2::bigint)", table, 7)
            contains = await conn.fetchval("SELECT bloom_contains($1::bloom, $2::bigint[])", f, [1001, 1003])
            as_bytes = await conn.fetchval("SELECT seen_bloom.filter($1, 7::bigint)::bytea", table)
            arr = await conn.fetchval("SELECT ARRAY[$1::bloom, NULL]", f)
            return f, contains, as_bytes, arr
        finally:
            await conn.close()

    f, contains, as_bytes, arr = run(go())
    assert isinstance(f, Bloom) and f.items == 2
    assert contains == [True, False]
    assert f == as_bytes
    assert arr == [f, None]


def test_register_bloom_as_pool_init_and_plain_bytes(server_dsn, table):
    async def init(conn):
        await register_bloom(conn, wrap=False)

    async def go():
        async with asyncpg.create_pool(server_dsn, min_size=1, max_size=2, init=init) as pool:
            return await pool.fetchval("SELECT seen_bloom.filter($1, $2::bigint)", table, 7)

    f = run(go())
    assert type(f) is bytes and f[:4] == b"SBLM"


def test_feed_call_needs_casts(server_dsn, table, text_table):
    async def go():
        conn = await asyncpg.connect(server_dsn)
        try:
            with pytest.raises(asyncpg.exceptions.DatatypeMismatchError) as err:
                await conn.fetchval("SELECT seen_bloom.unseen($1, $2, $3)", table, 7, [1001, 1003])
            assert err.value.sqlstate == "42804"
            assert "could not determine polymorphic type" in str(err.value)
            with pytest.raises(asyncpg.exceptions.DatatypeMismatchError):
                await conn.fetchval("SELECT seen_bloom.unseen($1, $2::bigint, $3)", table, 7, [1001, 1003])
            a = await conn.fetchval("SELECT seen_bloom.unseen($1, $2::bigint, $3::bigint[])", table, 7, [1001, 1003])
            b = await conn.fetchval(
                "SELECT seen_bloom.unseen($1, $2::text, $3::text[])", text_table, "alice", ["a", "c", "b", "d"]
            )
            with pytest.raises(asyncpg.exceptions.ObjectNotInPrerequisiteStateError):
                await conn.fetchval("SELECT seen_bloom.unseen('pg_class', $1::bigint, $2::bigint[])", 7, [1])
            with pytest.raises(asyncpg.exceptions.InvalidParameterValueError):
                await conn.fetchval("SELECT seen_bloom.unseen($1, $2::bigint, $3::bigint[])", table, 7, [[1, 2], [3, 4]])
            return a, b
        finally:
            await conn.close()

    assert run(go()) == ([1003], ["c", "d"])

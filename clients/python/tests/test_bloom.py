"""seen_bloom.Bloom: the header of values the server made."""

from __future__ import annotations

import pickle

import pytest
from psycopg.types import TypeInfo

import seen_bloom
from seen_bloom import Bloom


def fetch(conn, sql: str) -> Bloom:
    # bytes through the bytea cast: no loader needed.
    return Bloom(conn.execute(sql).fetchone()[0])


def test_header_of_a_fixed_exact_filter(conn):
    b = fetch(conn, "SELECT bloom_add(bloom_empty(1000, 0.001, false), ARRAY[1, 2, 3]::bigint[])::bytea")
    assert b.format_version == 2
    assert b.representation == "exact"
    assert b.scaling is False
    assert b.capacity == 1000
    assert b.error_rate == pytest.approx(0.001)
    assert b.items == 3
    assert b.layers == 0
    assert b.item_family == "integer"
    assert len(b) == 40 + 8 * 3
    assert "items=3" in repr(b)


def test_item_families_and_split_block(conn):
    assert fetch(conn, "SELECT bloom_empty()::bytea").item_family is None
    assert fetch(conn, "SELECT bloom_add(NULL::bloom, 'x'::text)::bytea").item_family == "text"
    assert fetch(conn, "SELECT bloom_add(NULL::bloom, gen_random_uuid())::bytea").item_family == "uuid"
    big = fetch(conn, "SELECT bloom_agg(g::bigint, 100000, 0.01)::bytea FROM generate_series(1, 20000) g")
    assert big.representation == "split-block"
    assert big.scaling is True
    assert big.layers >= 1
    info = conn.execute("SELECT bloom_info(%s::bytea::bloom)", [bytes(big)]).fetchone()[0]
    assert info["items"] == big.items
    assert info["capacity"] == big.capacity


def test_hex_text_round_trip_and_bytes_behaviour(conn):
    text = conn.execute("SELECT bloom_add(NULL::bloom, 5::bigint)::text").fetchone()[0]
    b = Bloom.from_hex(text)
    assert b.hex_text() == text
    assert isinstance(b, bytes)
    assert b == bytes(b)
    assert pickle.loads(pickle.dumps(b)) == b
    with pytest.raises(ValueError):
        Bloom.from_hex("deadbeef")
    with pytest.raises(ValueError):
        Bloom(b"not a filter").items
    assert "invalid" in repr(Bloom(b"xx"))


def test_sqlstate_constants_match_the_server(conn):
    import psycopg

    cases = {
        seen_bloom.SQLSTATE_INVALID_PARAMETER: "SELECT bloom_empty(0)",
        seen_bloom.SQLSTATE_INVALID_TEXT: "SELECT '\\x00'::bloom",
        seen_bloom.SQLSTATE_DATATYPE_MISMATCH: "SELECT bloom_add(bloom_add(NULL::bloom, 1::bigint), 'x'::text)",
        seen_bloom.SQLSTATE_FILTER_FULL: "SELECT bloom_add(bloom_empty(1, 0.01, false), ARRAY[1, 2]::bigint[])",
        seen_bloom.SQLSTATE_SHAPE_MISMATCH: "SELECT bloom_empty(10) || bloom_empty(20)",
        seen_bloom.SQLSTATE_NULL_VALUE: "SELECT seen_bloom.stats(NULL)",
        seen_bloom.SQLSTATE_NOT_TRACKED: "SELECT seen_bloom.unseen('pg_class', 1::bigint, ARRAY[1]::bigint[])",
    }
    for sqlstate, sql in cases.items():
        with pytest.raises(psycopg.Error) as err:
            conn.execute(sql)
        assert err.value.sqlstate == sqlstate, sql


def test_type_info_exists(conn):
    assert TypeInfo.fetch(conn, "bloom") is not None

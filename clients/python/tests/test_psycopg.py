"""seen_bloom.psycopg: the bloom type's loaders and dumper, and Int8Array."""

from __future__ import annotations

import asyncio
import random

import psycopg
import pytest
from psycopg import errors

from seen_bloom import Bloom
from seen_bloom.psycopg import Int8Array, dump_int8_array, register_bloom, register_bloom_async

FILTER = "SELECT seen_bloom.filter(%s, %s::bigint)"
UNSEEN = "SELECT seen_bloom.unseen(%s, %s::bigint, %s::bigint[])"


def test_without_a_loader_a_bloom_is_hex_text(conn, table):
    value = conn.execute(FILTER, [table, 7]).fetchone()[0]
    assert isinstance(value, str) and value.startswith("\\x")


@pytest.mark.parametrize("binary", [False, True])
def test_register_bloom_loads_both_formats(conn, table, binary):
    register_bloom(conn)
    f = conn.execute(FILTER, [table, 7], binary=binary).fetchone()[0]
    assert isinstance(f, Bloom)
    assert f.items == 2 and f.item_family == "integer"
    # The same bytes as the server's bytea cast.
    assert f == conn.execute("SELECT seen_bloom.filter(%s, 7::bigint)::bytea", [table]).fetchone()[0]


def test_register_bloom_plain_bytes(conn, table):
    register_bloom(conn, wrap=False)
    f = conn.execute(FILTER, [table, 7]).fetchone()[0]
    assert type(f) is bytes and f[:4] == b"SBLM"


def test_bloom_parameter_is_sent_as_bloom(conn, table):
    register_bloom(conn)
    f = conn.execute(FILTER, [table, 7]).fetchone()[0]
    # Untyped overloads resolve with the parameter's type: bloom, no cast needed.
    got = conn.execute(
        "SELECT bloom_contains(%s, ARRAY[1001, 1003, 1002]::bigint[]), pg_typeof(%s)::text", [f, f]
    ).fetchone()
    assert got == ([True, False, True], "bloom")
    # bloom[] results load element by element.
    assert conn.execute("SELECT ARRAY[%s, NULL]::bloom[]", [f]).fetchone()[0] == [f, None]
    # Into a bloom column and back.
    conn.execute("CREATE TEMP TABLE keep (f bloom)")
    conn.execute("INSERT INTO keep VALUES (%s)", [f])
    assert conn.execute("SELECT f FROM keep").fetchone()[0] == f


def test_malformed_bloom_parameter_is_22p02(conn):
    register_bloom(conn)
    with pytest.raises(errors.InvalidTextRepresentation):
        conn.execute("SELECT bloom_cardinality(%s)", [Bloom(b"SBLM-not-a-valid-value")])


def test_register_bloom_missing_type(conn):
    with pytest.raises(LookupError):
        register_bloom(conn, name="no_such_schema_x.bloom")


def test_register_bloom_async(server_dsn, table):
    async def run():
        async with await psycopg.AsyncConnection.connect(server_dsn) as aconn:
            await register_bloom_async(aconn)
            cur = await aconn.execute(FILTER, [table, 7])
            return (await cur.fetchone())[0]

    f = asyncio.run(run())
    assert isinstance(f, Bloom) and f.items == 2


# --- Int8Array --------------------------------------------------------------------------------


def test_int8_array_answers_as_a_list(conn, table):
    rng = random.Random(20)
    conn.execute(
        f"INSERT INTO {table} (user_id, item) SELECT 7, g::bigint * 1000003 FROM generate_series(1, 3000) g"
    )
    for size in (1, 2, 17, 1000, 2500):
        candidates = [rng.randrange(1, 3500) * 1000003 for _ in range(size)]
        want = conn.execute(UNSEEN, [table, 7, candidates]).fetchone()[0]
        got = conn.execute(UNSEEN, [table, 7, Int8Array(candidates)]).fetchone()[0]
        assert got == want
        assert all(c > 3000 * 1000003 for c in got)


def test_int8_array_values_nulls_and_empty(conn):
    values = [0, 1, -1, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63)]
    assert conn.execute("SELECT %s", [Int8Array(values)]).fetchone()[0] == values
    assert conn.execute("SELECT pg_typeof(%s)::text", [Int8Array(values)]).fetchone()[0] == "bigint[]"
    assert conn.execute("SELECT %s", [Int8Array([1, None, 3])]).fetchone()[0] == [1, None, 3]
    assert conn.execute("SELECT %s::text", [Int8Array([])]).fetchone()[0] == "{}"
    assert bytes(dump_int8_array([5])) == bytes.fromhex("00000001 00000000 00000014 00000001 00000001 00000008 0000000000000005")


def test_int8_array_out_of_range_fails_in_the_client(conn):
    with pytest.raises(Exception):
        conn.execute("SELECT %s", [Int8Array([2**63])])
    with pytest.raises(Exception):
        conn.execute("SELECT %s", [Int8Array(["1"])])


def test_int8_array_needs_no_cast(conn, table):
    # The parameter is typed (int8[]), so the polymorphic argument resolves.
    got = conn.execute(
        "SELECT seen_bloom.unseen(%s, %s::bigint, %s)", [table, 7, Int8Array([1001, 1003])]
    ).fetchone()[0]
    assert got == [1003]


def test_int8_array_in_binary_copy(conn):
    conn.execute("CREATE TEMP TABLE arrays (a bigint[])")
    with conn.cursor().copy("COPY arrays (a) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int8[]"])
        copy.write_row([[1, 2, None]])
        copy.write_row([Int8Array(range(100))])
    rows = conn.execute("SELECT a FROM arrays ORDER BY cardinality(a)").fetchall()
    assert rows == [([1, 2, None],), (list(range(100)),)]


# --- what the casts are for (docs/CLIENTS.md) -------------------------------------------------


def test_untyped_parameters_fail_with_42804(conn, table, text_table):
    # A list of str and an empty list are sent untyped: the polymorphic type is unknown.
    with pytest.raises(errors.DatatypeMismatch) as err:
        conn.execute("SELECT seen_bloom.unseen(%s, %s, %s)", [text_table, "alice", ["a", "c"]])
    assert "could not determine polymorphic type" in str(err.value)
    with pytest.raises(errors.DatatypeMismatch):
        conn.execute("SELECT seen_bloom.unseen(%s, %s, %s)", [table, 7, []])
    # The casts fix both.
    assert conn.execute(
        "SELECT seen_bloom.unseen(%s, %s::text, %s::text[])", [text_table, "alice", ["a", "c"]]
    ).fetchone()[0] == ["c"]
    assert conn.execute(UNSEEN, [table, 7, []]).fetchone()[0] == []
    # A list of ints is typed (int2/int4/int8[] by its largest value): no cast needed.
    assert conn.execute("SELECT seen_bloom.unseen(%s, %s, %s)", [table, 7, [1001, 1003]]).fetchone()[0] == [1003]


def test_sqlstates_of_the_feed_call(conn, table, text_table):
    with pytest.raises(errors.DatatypeMismatch):  # 42804: text candidates of bigint items
        conn.execute("SELECT seen_bloom.unseen(%s, %s::bigint, %s::text[])", [table, 7, ["1001"]])
    with pytest.raises(errors.DatatypeMismatch):  # 42804: a bigint user of text users
        conn.execute("SELECT seen_bloom.unseen(%s, %s::bigint, %s::text[])", [text_table, 7, ["a"]])
    with pytest.raises(errors.ObjectNotInPrerequisiteState):  # 55000: not tracked
        conn.execute(UNSEEN, ["pg_class", 7, [1]])
    with pytest.raises(errors.InvalidParameterValue) as err:  # 22023: a 2-D array
        conn.execute(UNSEEN, [table, 7, [[1, 2], [3, 4]]])
    assert err.value.sqlstate == "22023"


def test_null_time_is_23502(conn):
    name = f"sb_test_nulltime_{random.randrange(10**9)}"
    conn.execute(f"CREATE TABLE {name} (user_id bigint, item bigint, seen_at timestamptz)")
    try:
        conn.execute("SET client_min_messages = error")  # track() warns about the nullable time column
        conn.execute("SELECT seen_bloom.track(%s, 'user_id', 'item', 'seen_at')", [name])
        with pytest.raises(errors.NotNullViolation) as err:
            conn.execute(f"INSERT INTO {name} VALUES (%s, %s, NULL)", [7, 1])
        assert err.value.sqlstate == "23502"
    finally:
        conn.execute(f"DROP TABLE {name}")

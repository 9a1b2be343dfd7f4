#!/usr/bin/env python3
"""seen_bloom from psycopg 3 (docs/CLIENTS.md#psycopg-3).

    pip install 'psycopg[binary]'
    SEEN_BLOOM_DSN=postgresql://postgres@127.0.0.1:5432/postgres python3 python_psycopg.py

Creates two impressions tables of its own (bigint users and items; text users and uuid
items), tracks them, inserts impressions (multi-row and COPY), asks the feed question,
reads a bloom value, checks the SQLSTATEs of three mistakes, and drops the tables. Exits 1
when an answer is not the expected one. The role needs CREATE on the database's public
schema (and to be a superuser the first time, for CREATE EXTENSION).
"""

from __future__ import annotations

import os
import sys
import uuid

import psycopg
from psycopg import errors
from psycopg.adapt import Loader
from psycopg.types import TypeInfo


class CheckFailed(Exception):
    pass


def check(ok: bool, what: str) -> None:
    if not ok:
        raise CheckFailed(what)
    print(f"ok: {what}")


# Reading a bloom value: without a loader psycopg returns its text form ('\x5342...') as a
# str. A loader per format, registered by the type's oid, makes it bytes.
class BloomBinaryLoader(Loader):
    format = psycopg.pq.Format.BINARY

    def load(self, data):
        return bytes(data)


class BloomTextLoader(Loader):
    format = psycopg.pq.Format.TEXT

    def load(self, data):
        return bytes.fromhex(bytes(data[2:]).decode())  # '\x' then hex, like bytea


def register_bloom(conn: psycopg.Connection) -> None:
    info = TypeInfo.fetch(conn, "bloom")
    if info is None:
        raise RuntimeError("type bloom not found: CREATE EXTENSION seen_bloom")
    conn.adapters.register_loader(info.oid, BloomBinaryLoader)
    conn.adapters.register_loader(info.oid, BloomTextLoader)


def run(conn: psycopg.Connection, impressions: str, by_name: str) -> None:
    conn.execute("CREATE EXTENSION IF NOT EXISTS seen_bloom")

    # --- tracking ----------------------------------------------------------------------------
    conn.execute(
        f"CREATE TABLE {impressions} (user_id bigint, post_id bigint,"
        " seen_at timestamptz NOT NULL DEFAULT now(), watch_pct real)"
    )
    filter_table = conn.execute(
        "SELECT seen_bloom.track(%s, 'user_id', 'post_id', 'seen_at', \"where\" => 'watch_pct >= 0.5')",
        [impressions],
    ).fetchone()[0]
    check(filter_table == f"{impressions}_seen", f"track() made {filter_table}")
    conn.execute(f"CREATE TABLE {by_name} (user_name text, item uuid, seen_at timestamptz NOT NULL DEFAULT now())")
    conn.execute("SELECT seen_bloom.track(%s, 'user_name', 'item', 'seen_at')", [by_name])

    # --- batch inserts -----------------------------------------------------------------------
    # executemany: psycopg 3 pipelines the statements (one round trip per batch).
    with conn.transaction():
        conn.cursor().executemany(
            f"INSERT INTO {impressions} (user_id, post_id, watch_pct) VALUES (%s, %s, %s)",
            [(7, 1001, 0.9), (7, 1002, 1.0), (7, 1005, 0.1), (8, 1003, 0.7)],
        )
        # The inserting transaction sees its impressions at once (the filter rows are written
        # by the INSERT's trigger, in the same transaction).
        check(
            conn.execute("SELECT seen_bloom.has_seen(%s, %s::bigint, %s::bigint)", [impressions, 7, 1001]).fetchone()[0],
            "an impression is seen inside its own transaction",
        )
    # One multi-row INSERT statement.
    rows = [(9, 2000 + k, 1.0) for k in range(50)]
    values = ", ".join(["(%s, %s, %s)"] * len(rows))
    conn.execute(f"INSERT INTO {impressions} (user_id, post_id, watch_pct) VALUES {values}", [v for r in rows for v in r])
    # COPY: the fastest bulk path; the statement trigger folds the copied rows too.
    with conn.cursor().copy(f"COPY {impressions} (user_id, post_id, watch_pct) FROM STDIN") as copy:
        for k in range(1000):
            copy.write_row((10, 5000 + k, 0.8))
    # Binary COPY with declared types.
    with conn.cursor().copy(f"COPY {impressions} (user_id, post_id, watch_pct) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["int8", "int8", "float4"])
        copy.write_row((11, 7000, 1.0))
    alice, bob = "alice", "bob"
    seen_items = [uuid.uuid4() for _ in range(3)]
    with conn.cursor().copy(f"COPY {by_name} (user_name, item) FROM STDIN") as copy:
        for item in seen_items:
            copy.write_row((alice, item))

    # --- the feed call -----------------------------------------------------------------------
    # Cast both parameters. psycopg sends a list of ints typed (int2/int4/int8[] by its largest
    # value), but an empty list and a list of str untyped: without the casts those fail with
    # 42804 "could not determine polymorphic type".
    feed = "SELECT seen_bloom.unseen(%s, %s::bigint, %s::bigint[])"
    unseen = conn.execute(feed, [impressions, 7, [1001, 1003, 1002, 1004, 1005, 1003]]).fetchone()[0]
    # 1005 was watched 10%: not an impression under the `where` predicate. Repeats go.
    check(unseen == [1003, 1004, 1005], f"user 7: unseen {unseen}")
    check(conn.execute(feed, [impressions, 7, []]).fetchone()[0] == [], "no candidates, no answer")
    unseen = conn.execute(feed, [impressions, 10, list(range(5990, 6010))]).fetchone()[0]
    check(unseen == list(range(6000, 6010)), "COPY: 5990..5999 seen, 6000..6009 not")
    unseen = conn.execute(feed, [impressions, 9, [2000, 2049, 2050]]).fetchone()[0]
    check(unseen == [2050], "multi-row INSERT: 2000 and 2049 seen")
    check(conn.execute(feed, [impressions, 11, [7000, 7001]]).fetchone()[0] == [7001], "binary COPY folded")
    check(conn.execute(feed, [impressions, None, [1001]]).fetchone()[0] == [1001], "a NULL user has seen nothing")
    # text users, uuid items: the casts name those types.
    new_item = uuid.uuid4()
    unseen = conn.execute(
        "SELECT seen_bloom.unseen(%s, %s::text, %s::uuid[])", [by_name, alice, [seen_items[0], new_item, seen_items[2]]]
    ).fetchone()[0]
    check(unseen == [new_item], "alice: only the new uuid is unseen")
    unseen = conn.execute("SELECT seen_bloom.unseen(%s, %s::text, %s::uuid[])", [by_name, bob, seen_items]).fetchone()[0]
    check(unseen == seen_items, "bob saw none of alice's items")
    check(
        conn.execute("SELECT seen_bloom.has_seen(%s, %s::text, %s::uuid)", [by_name, alice, seen_items[1]]).fetchone()[0],
        "has_seen(alice, item)",
    )

    # --- reading a bloom value ---------------------------------------------------------------
    as_text = conn.execute("SELECT seen_bloom.filter(%s, %s::bigint)", [impressions, 7]).fetchone()[0]
    check(isinstance(as_text, str) and as_text.startswith("\\x"), "without a loader a bloom is hex text")
    register_bloom(conn)
    value = conn.execute("SELECT seen_bloom.filter(%s, %s::bigint)", [impressions, 7]).fetchone()[0]
    binary = conn.execute("SELECT seen_bloom.filter(%s, %s::bigint)", [impressions, 7], binary=True).fetchone()[0]
    check(isinstance(value, bytes) and value[:4] == b"SBLM" and value == binary, f"a bloom value of {len(value)} bytes")
    # Back to the server: bytes are bytea; cast them to bloom (the bytes are validated).
    answer = conn.execute(
        "SELECT bloom_contains(%s::bloom, %s::bigint[]), bloom_cardinality(%s::bloom)", [value, [1001, 1003], value]
    ).fetchone()
    check(answer == ([True, False], 2), f"bloom_contains/bloom_cardinality of the value read: {answer}")

    # --- errors by SQLSTATE ------------------------------------------------------------------
    def sqlstate_of(sql: str, params: list) -> str | None:
        try:
            conn.execute(sql, params)
        except psycopg.Error as e:
            return e.sqlstate
        return None

    # 42804: untyped anyarray (a list of str, no cast), text candidates of bigint items.
    try:
        conn.execute("SELECT seen_bloom.unseen(%s, %s, %s)", [by_name, alice, ["x"]])
        check(False, "an untyped list of str fails")
    except errors.DatatypeMismatch as e:
        check(e.sqlstate == "42804" and "polymorphic" in str(e), "42804 could not determine polymorphic type")
    check(sqlstate_of(feed.replace("bigint[]", "text[]"), [impressions, 7, ["1001"]]) == "42804", "42804 wrong item family")
    # 55000: a table that is not tracked.
    try:
        conn.execute(feed, ["pg_class", 7, [1]])
        check(False, "an untracked table fails")
    except errors.ObjectNotInPrerequisiteState as e:
        check(e.sqlstate == "55000", "55000 not tracked")
    # 22023: a bad argument (a two-dimensional candidates array; a capacity of 0).
    check(sqlstate_of(feed, [impressions, 7, [[1, 2], [3, 4]]]) == "22023", "22023 two-dimensional candidates")
    check(sqlstate_of("SELECT bloom_empty(%s::bigint)", [0]) == "22023", "22023 capacity 0")
    # A failed statement aborts a transaction: roll it back (conn.transaction() does) or use a
    # savepoint; in autocommit mode, as here, the next statement just runs.
    check(conn.execute(feed, [impressions, 8, [1003, 1004]]).fetchone()[0] == [1004], "the connection still works")


def main() -> int:
    dsn = os.environ.get("SEEN_BLOOM_DSN")
    if not dsn:
        print("set SEEN_BLOOM_DSN, e.g. postgresql://postgres@127.0.0.1:5432/postgres", file=sys.stderr)
        return 2
    suffix = uuid.uuid4().hex[:10]
    impressions, by_name = f"impressions_py_{suffix}", f"impressions_by_name_py_{suffix}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        try:
            run(conn, impressions, by_name)
        except CheckFailed as e:
            print(f"FAIL: {e}", file=sys.stderr)
            return 1
        finally:
            # DROP TABLE takes the tracking with it (filter table, triggers, configuration).
            conn.execute(f"DROP TABLE IF EXISTS {impressions}, {by_name}")
    print("python_psycopg: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Fixtures: a live server given by SEEN_BLOOM_DSN (a postgresql:// URL), with seen_bloom
available; each test that needs one gets a tracked impressions table of its own."""

from __future__ import annotations

import os
import uuid

import psycopg
import pytest


def dsn() -> str:
    value = os.environ.get("SEEN_BLOOM_DSN")
    if not value:
        pytest.fail("set SEEN_BLOOM_DSN to a postgresql:// URL of a server with seen_bloom available")
    return value


def sqlalchemy_url(driver: str) -> str:
    """The DSN as a SQLAlchemy URL for ``driver`` (psycopg, asyncpg)."""
    value = dsn()
    scheme, sep, rest = value.partition("://")
    if not sep or scheme not in ("postgresql", "postgres"):
        pytest.fail("SEEN_BLOOM_DSN must be a postgresql:// URL")
    return f"postgresql+{driver}://{rest}"


@pytest.fixture(scope="session")
def server_dsn() -> str:
    value = dsn()
    with psycopg.connect(value, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        conn.execute("CREATE EXTENSION IF NOT EXISTS seen_bloom")
    return value


@pytest.fixture
def conn(server_dsn):
    with psycopg.connect(server_dsn, autocommit=True) as c:
        yield c


def make_table(conn, user_type: str = "bigint", item_type: str = "bigint") -> str:
    name = f"sb_test_{uuid.uuid4().hex[:12]}"
    conn.execute(
        f"CREATE TABLE {name} (user_id {user_type}, item {item_type}, seen_at timestamptz NOT NULL DEFAULT now())"
    )
    conn.execute("SELECT seen_bloom.track(%s, 'user_id', 'item', 'seen_at')", [name])
    return name


@pytest.fixture
def table(conn):
    """A tracked table (bigint users and items); user 7 saw 1001 and 1002."""
    name = make_table(conn)
    conn.execute(f"INSERT INTO {name} (user_id, item) VALUES (7, 1001), (7, 1002)")
    yield name
    conn.execute(f"DROP TABLE IF EXISTS {name}")


@pytest.fixture
def text_table(conn):
    """A tracked table (text users and items); 'alice' saw 'a' and 'b'."""
    name = make_table(conn, "text", "text")
    conn.execute(f"INSERT INTO {name} (user_id, item) VALUES ('alice', 'a'), ('alice', 'b')")
    yield name
    conn.execute(f"DROP TABLE IF EXISTS {name}")

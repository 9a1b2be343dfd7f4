"""asyncpg support: the ``bloom`` type as a binary codec.

::

    import asyncpg
    from seen_bloom.asyncpg import register_bloom

    conn = await asyncpg.connect(dsn)
    await register_bloom(conn)
    f = await conn.fetchval("SELECT seen_bloom.filter('impressions', $1::bigint)", 7)
    # f is a seen_bloom.Bloom (bytes); a Bloom or bytes parameter is sent as a bloom value

    pool = await asyncpg.create_pool(dsn, init=register_bloom)   # every pooled connection

asyncpg prepares every statement and asks the server for the parameter types, so
polymorphic parameters need casts in the SQL: ``$1::bigint`` for the user and
``$2::bigint[]`` (``text[]``, ``uuid[]``) for the candidates of ``seen_bloom.unseen``.
Without the cast the server answers 42804 "could not determine polymorphic type".
"""

from __future__ import annotations

from typing import Any

from . import Bloom

__all__ = ["register_bloom", "bloom_schema"]


async def bloom_schema(conn: Any, name: str = "bloom") -> str:
    """The schema of the ``bloom`` type visible on the search path (where the extension was
    created). Raises LookupError when there is none."""
    schema = await conn.fetchval(
        "SELECT n.nspname FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace "
        "WHERE t.oid = pg_catalog.to_regtype($1::text)",
        name,
    )
    if schema is None:
        raise LookupError(f"type {name!r} not found: CREATE EXTENSION seen_bloom in this database")
    return schema


def _encode(value: Any) -> bytes:
    return bytes(value)


async def register_bloom(conn: Any, *, wrap: bool = True, schema: str | None = None) -> None:
    """Register a binary codec for ``bloom`` on ``conn``: values read as
    :class:`seen_bloom.Bloom` (``wrap=False``: ``bytes``), parameters are any bytes-like
    object. Usable as a pool's ``init``."""
    if schema is None:
        schema = await bloom_schema(conn)
    await conn.set_type_codec(
        "bloom",
        schema=schema,
        encoder=_encode,
        decoder=Bloom if wrap else bytes,
        format="binary",
    )

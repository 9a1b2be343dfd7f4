"""psycopg 3 support: the ``bloom`` type and a fast binary ``int8[]`` dumper.

Reading a ``bloom`` value::

    import psycopg
    from seen_bloom.psycopg import register_bloom

    conn = psycopg.connect(dsn)
    register_bloom(conn)              # or await register_bloom_async(aconn)
    f = conn.execute("SELECT seen_bloom.filter('impressions', %s::bigint)", [7]).fetchone()[0]
    # f is a seen_bloom.Bloom (bytes), in text and in binary results alike

Sending candidates fast::

    from seen_bloom.psycopg import Int8Array

    conn.execute(
        "SELECT seen_bloom.unseen('impressions', %s::bigint, %s::bigint[])",
        [7, Int8Array(candidates)],
    )

psycopg adapts a ``list`` of ints element by element (it looks for the smallest integer type
that fits, then writes each element); :class:`Int8Array` is sent as one binary ``int8[]``
packed by one cached ``struct.Struct``. It is registered on psycopg's global adapters when
this module is imported (it is a new type: nothing else changes). Import this module before
opening connections: a connection whose adapters were customised (SQLAlchemy's dialect does
that) keeps its own copy of the map, and would dump an Int8Array as a plain list.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any, Sequence

from psycopg import adapt, adapters, pq
from psycopg.abc import AdaptContext
from psycopg.types import TypeInfo

from . import Bloom

__all__ = [
    "Int8Array",
    "Int8ArrayBinaryDumper",
    "register_bloom",
    "register_bloom_async",
    "register_bloom_info",
]

INT8_OID = 20
INT8_ARRAY_OID = 1016

# Array binary format: ndim, has-null flag, element type, then per dimension its size and
# lower bound; then each element as a 4-byte length (-1 for NULL) and its bytes.
_ARRAY_HEADER = struct.Struct(">iiiii")


class Int8Array(list):
    """A list of ints (None for NULL) sent to PostgreSQL as a binary ``int8[]``."""

    __slots__ = ()


@lru_cache(maxsize=32)
def _int8_array_struct(n: int) -> struct.Struct:
    # The array header, then n elements: a 4-byte length (written below) and the value.
    return struct.Struct(">iiiii" + "4xq" * n)


def dump_int8_array(items: Sequence[int | None]) -> bytearray:
    """The binary ``int8[]`` form of ``items`` (a one-dimensional array, lower bound 1)."""
    n = len(items)
    if n == 0:
        # ndim 0: the empty array, whatever the element type.
        return bytearray(struct.pack(">iii", 0, 0, INT8_OID))
    layout = _int8_array_struct(n)
    out = bytearray(layout.size)
    try:
        layout.pack_into(out, 0, 1, 0, INT8_OID, n, 1, *items)
    except struct.error:
        return _dump_with_nulls(list(items))  # NULLs (or a bad element: it raises there)
    # Every element's length is 8: a big-endian int4 whose last byte is 8.
    out[23::12] = b"\x08" * n
    return out


def _dump_with_nulls(items: list) -> bytearray:
    n = len(items)
    out = bytearray(_ARRAY_HEADER.pack(1, int(None in items), INT8_OID, n, 1))
    null = struct.pack(">i", -1)
    one = struct.Struct(">iq")
    for v in items:
        out += null if v is None else one.pack(8, v)
    return out


class Int8ArrayBinaryDumper(adapt.Dumper):
    """Dumps any sequence of ints (None for NULL) as binary ``int8[]``.

    Registered for :class:`Int8Array`; by its oid it is also what psycopg uses for a binary
    ``int8[]`` whose Python type is not known in advance (``Copy.set_types(["int8[]"])``).
    """

    format = pq.Format.BINARY
    oid = INT8_ARRAY_OID

    def dump(self, obj: Any) -> bytearray:
        return dump_int8_array(obj)


adapters.register_dumper(Int8Array, Int8ArrayBinaryDumper)


# --- the bloom type ---------------------------------------------------------------------------


class _BloomBinaryLoader(adapt.Loader):
    format = pq.Format.BINARY

    def load(self, data: Any) -> Bloom:
        return Bloom(data)


class _BloomTextLoader(adapt.Loader):
    format = pq.Format.TEXT

    def load(self, data: Any) -> Bloom:
        # Text form: "\x" and hex digits (as bytea's hex output).
        return Bloom(bytes.fromhex(bytes(data[2:]).decode("ascii")))


class _BytesBinaryLoader(_BloomBinaryLoader):
    def load(self, data: Any) -> bytes:  # type: ignore[override]
        return bytes(data)


class _BytesTextLoader(_BloomTextLoader):
    def load(self, data: Any) -> bytes:  # type: ignore[override]
        return bytes.fromhex(bytes(data[2:]).decode("ascii"))


class _BloomBinaryDumper(adapt.Dumper):
    format = pq.Format.BINARY

    def dump(self, obj: Any) -> bytes:
        return bytes(obj)


def register_bloom_info(info: TypeInfo, context: AdaptContext | None = None, *, wrap: bool = True) -> None:
    """Register ``bloom`` with ``context`` (a connection, a cursor, or None: psycopg's global
    adapters), given its :class:`~psycopg.types.TypeInfo`.

    Loaders for both result formats return :class:`seen_bloom.Bloom` (``wrap=False``: plain
    ``bytes``); a binary dumper sends a :class:`seen_bloom.Bloom` as a ``bloom`` parameter
    (plain ``bytes`` stay ``bytea``: cast them, ``%s::bloom``).
    """
    amap = adapters if context is None else context.adapters
    if wrap:
        amap.register_loader(info.oid, _BloomBinaryLoader)
        amap.register_loader(info.oid, _BloomTextLoader)
    else:
        amap.register_loader(info.oid, _BytesBinaryLoader)
        amap.register_loader(info.oid, _BytesTextLoader)
    dumper = type("BloomBinaryDumper", (_BloomBinaryDumper,), {"oid": info.oid})
    amap.register_dumper(Bloom, dumper)
    if info.array_oid:
        info.register(context)  # bloom[] results load as lists of the above


def register_bloom(conn: Any, *, name: str = "bloom", wrap: bool = True, globally: bool = False) -> TypeInfo:
    """Look ``bloom`` up on the (sync) connection ``conn`` and register it there
    (``globally=True``: on psycopg's global adapters, for connections made afterwards).
    ``name`` may be schema-qualified when the extension's schema is not on the search path.
    Raises LookupError when the type does not exist (the extension is not installed)."""
    info = TypeInfo.fetch(conn, name)
    if info is None:
        raise LookupError(f"type {name!r} not found: CREATE EXTENSION seen_bloom in this database")
    register_bloom_info(info, None if globally else conn, wrap=wrap)
    return info


async def register_bloom_async(aconn: Any, *, name: str = "bloom", wrap: bool = True, globally: bool = False) -> TypeInfo:
    """:func:`register_bloom` for a :class:`psycopg.AsyncConnection`."""
    info = await TypeInfo.fetch(aconn, name)
    if info is None:
        raise LookupError(f"type {name!r} not found: CREATE EXTENSION seen_bloom in this database")
    register_bloom_info(info, None if globally else aconn, wrap=wrap)
    return info

"""Client helpers for the seen_bloom PostgreSQL extension.

The package has no compiled code and no required dependency; each driver module imports its
driver when it is imported:

- :mod:`seen_bloom.psycopg`: register the ``bloom`` type with psycopg 3 (loaders and a
  dumper), and :class:`~seen_bloom.psycopg.Int8Array`, a list of ints sent as binary
  ``int8[]`` (a 1,000-candidate ``seen_bloom.unseen`` call about 4.4 times faster end to end
  than psycopg's default list adaptation, docs/CLIENTS.md).
- :mod:`seen_bloom.asyncpg`: register the ``bloom`` type with asyncpg (``set_type_codec``).
- :mod:`seen_bloom.sqlalchemy`: a SQLAlchemy 2 ``Bloom`` column type and typed ``unseen`` /
  ``has_seen`` expressions.

This module holds what is driver-independent: :class:`Bloom`, the value a ``bloom`` column
reads as once a loader is registered, and the SQLSTATEs seen_bloom raises.
"""

from __future__ import annotations

import struct

__all__ = [
    "Bloom",
    "SQLSTATE_DATATYPE_MISMATCH",
    "SQLSTATE_NOT_TRACKED",
    "SQLSTATE_INVALID_PARAMETER",
    "SQLSTATE_INVALID_TEXT",
    "SQLSTATE_FILTER_FULL",
    "SQLSTATE_SHAPE_MISMATCH",
    "SQLSTATE_NULL_VALUE",
]

__version__ = "0.4.0"

# The SQLSTATEs of README.md's "Errors" table that a feed service meets most.
SQLSTATE_DATATYPE_MISMATCH = "42804"  # untyped anyarray parameter, another item family or user type
SQLSTATE_NOT_TRACKED = "55000"  # seen_bloom.unseen/has_seen/... of a table that is not tracked
SQLSTATE_INVALID_PARAMETER = "22023"  # capacity/error rate/window out of range, a 2-D array
SQLSTATE_INVALID_TEXT = "22P02"  # malformed bloom bytes or text
SQLSTATE_FILTER_FULL = "54000"  # a fixed filter is full, a value too large
SQLSTATE_SHAPE_MISMATCH = "22000"  # union of filters of different shapes
SQLSTATE_NULL_VALUE = "22004"  # a NULL table or column

# docs/FORMAT.md: the 40-byte little-endian header of every value.
_HEADER = struct.Struct("<4sBBBBIIQdQ")
_MAGIC = b"SBLM"
_REPRESENTATIONS = {1: "exact", 2: "split-block"}
_FAMILIES = {0b0010: "integer", 0b0100: "text", 0b1000: "uuid"}


class Bloom(bytes):
    """A ``bloom`` value as bytes (its binary form, docs/FORMAT.md), with its header decoded.

    It is ``bytes``: it compares, hashes, pickles and is sent back to the server as the bytes
    it holds (the registered dumpers send it as a ``bloom`` parameter; as plain ``bytes`` it
    is ``bytea``, which casts with ``::bloom``). The server validates the whole value on the
    way in (22P02); here only the header is read, on demand.
    """

    __slots__ = ()

    @classmethod
    def from_hex(cls, text: str | bytes) -> Bloom:
        """A value from its text form, ``\\x`` and hex digits (as ``bytea``)."""
        if isinstance(text, (bytes, bytearray, memoryview)):
            text = bytes(text).decode("ascii")
        if not text.startswith("\\x"):
            raise ValueError("a bloom value's text form starts with \\x")
        return cls(bytes.fromhex(text[2:]))

    def hex_text(self) -> str:
        """The text form the server prints: ``\\x`` and lower-case hex."""
        return "\\x" + self.hex()

    def _header(self) -> tuple:
        if len(self) < _HEADER.size or self[:4] != _MAGIC:
            raise ValueError("not a bloom value (no SBLM header)")
        return _HEADER.unpack_from(self)

    @property
    def format_version(self) -> int:
        return self._header()[1]

    @property
    def representation(self) -> str:
        """``exact`` (a sorted list of hashes) or ``split-block`` (Bloom filter layers)."""
        return _REPRESENTATIONS.get(self._header()[3], "unknown")

    @property
    def scaling(self) -> bool:
        return bool(self._header()[4] & 1)

    @property
    def item_family(self) -> str | None:
        """``integer``, ``text``, ``uuid``, or None before the first item (and in version 1)."""
        return _FAMILIES.get(self._header()[4] & 0b1110)

    @property
    def layers(self) -> int:
        return self._header()[6]

    @property
    def capacity(self) -> int:
        return self._header()[7]

    @property
    def error_rate(self) -> float:
        return self._header()[8]

    @property
    def items(self) -> int:
        """Distinct items added (exact), or the sum of the layers' items."""
        return self._header()[9]

    def __repr__(self) -> str:
        try:
            return (
                f"Bloom({self.representation}, items={self.items}, capacity={self.capacity}, "
                f"error_rate={self.error_rate:g}, {len(self)} bytes)"
            )
        except ValueError:
            return f"Bloom(<invalid>, {len(self)} bytes)"

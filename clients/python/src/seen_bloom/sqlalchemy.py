"""SQLAlchemy 2 support: a ``Bloom`` column type and typed seen_bloom expressions.

::

    from sqlalchemy import BigInteger
    from sqlalchemy.orm import Mapped, mapped_column
    import seen_bloom
    from seen_bloom import sqlalchemy as sb

    class UserFilter(Base):
        __tablename__ = "user_filters"
        user_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
        seen: Mapped[seen_bloom.Bloom | None] = mapped_column(sb.Bloom)

    session.scalar(select(sb.unseen("impressions", 7, [1001, 1002])))   # -> [1002]

The type works whatever the driver and whether or not a driver-level loader is registered:
values are sent as ``bytea`` parameters cast to ``bloom`` (``CAST(:p AS bloom)``) and
selected as ``CAST(col AS BYTEA)``, so they arrive as bytes; it reads them as
:class:`seen_bloom.Bloom`. ``LargeBinary`` alone fails (42804: bytea is not bloom without a
cast) and reflection alone gives ``NullType``: importing this module teaches the PostgreSQL
dialect's reflection that ``bloom`` is this type.

:func:`unseen`, :func:`has_seen` and :func:`filter_of` build the calls with the casts
polymorphic parameters need (42804 "could not determine polymorphic type" otherwise, with
most drivers); on psycopg 3, :func:`unseen` sends bigint candidates as one binary ``int8[]``.
"""

from __future__ import annotations

from typing import Any, Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.types import TypeEngine, UserDefinedType

import seen_bloom

try:  # Int8Array's dumper must be on psycopg's global adapters before a connection copies them
    from seen_bloom.psycopg import Int8Array as _Int8Array
except ImportError:  # psycopg is not installed: no fast path to take
    _Int8Array = None

__all__ = ["Bloom", "unseen", "has_seen", "filter_of"]


class Bloom(UserDefinedType):
    """The ``bloom`` column type; Python values are :class:`seen_bloom.Bloom` (any bytes-like
    value is accepted as a parameter)."""

    cache_ok = True

    def __init__(self, wrap: bool = True) -> None:
        self.wrap = wrap

    def get_col_spec(self, **kw: Any) -> str:
        return "bloom"

    @property
    def python_type(self) -> type:
        return seen_bloom.Bloom if self.wrap else bytes

    # Parameters: bytes as bytea, then the explicit bytea -> bloom cast (validated).
    def bind_expression(self, bindvalue: Any) -> Any:
        return sa.cast(sa.type_coerce(bindvalue, sa.LargeBinary()), self)

    # Results: the bytes, whatever the driver knows of the type (still read through this
    # type's result_processor).
    def column_expression(self, colexpr: Any) -> Any:
        return sa.type_coerce(sa.cast(colexpr, sa.LargeBinary()), self)

    def bind_processor(self, dialect: Any) -> Any:
        def process(value: Any) -> Any:
            return None if value is None else bytes(value)

        return process

    def result_processor(self, dialect: Any, coltype: Any) -> Any:
        cls = seen_bloom.Bloom if self.wrap else bytes

        def process(value: Any) -> Any:
            if value is None:
                return None
            if isinstance(value, str):  # text-format result without a loader: "\x..."
                return cls(bytes.fromhex(value[2:]))
            return cls(value)

        return process

    class comparator_factory(UserDefinedType.Comparator):
        def contains_item(self, item: Any, item_type: TypeEngine | type = sa.BigInteger) -> Any:
            """``bloom_contains(col, item)`` with the item cast to ``item_type``."""
            return sa.func.bloom_contains(self.expr, _typed(item, item_type), type_=sa.Boolean)


# Reflection: a reflected bloom column is this type, not NullType.
postgresql.base.ischema_names["bloom"] = Bloom


def _typed(value: Any, type_: TypeEngine | type) -> Any:
    """``value`` (a Python value or a SQL expression) as an explicit ``CAST(... AS type_)``."""
    if not isinstance(value, sa.ColumnElement):
        value = sa.bindparam(None, value, type_=type_)
    return sa.cast(value, type_)


def _table(impressions: Any) -> Any:
    if isinstance(impressions, sa.Table):
        impressions = impressions.fullname
    elif hasattr(impressions, "__table__"):
        impressions = impressions.__table__.fullname
    return sa.cast(sa.literal(impressions, sa.Text()), postgresql.REGCLASS)


class _Int8ArrayParam(UserDefinedType):
    """The candidates parameter of :func:`unseen` for bigint items: on psycopg 3 a list of ints
    is sent as :class:`seen_bloom.psycopg.Int8Array` (one binary ``int8[]``), where
    ``ARRAY(BigInteger)`` would have psycopg adapt it element by element as text; on other
    drivers a plain list."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "BIGINT[]"

    def bind_processor(self, dialect: Any) -> Any:
        if dialect.driver == "psycopg" and _Int8Array is not None:
            Int8Array = _Int8Array

            def process(value: Any) -> Any:
                if value is None or isinstance(value, Int8Array):
                    return value
                value = list(value)
                if value and isinstance(value[0], (list, tuple)):
                    return value  # a nested list: psycopg's own adaptation (the server says 22023)
                return Int8Array(value)

            return process

        def plain(value: Any) -> Any:
            return None if value is None else list(value)

        return plain


def _is_bigint(type_: TypeEngine | type) -> bool:
    return type_ is sa.BigInteger or type(type_) is sa.BigInteger


def unseen(
    impressions: Any,
    user: Any,
    candidates: Sequence[Any] | Any,
    *,
    user_type: TypeEngine | type = sa.BigInteger,
    item_type: TypeEngine | type = sa.BigInteger,
) -> Any:
    """``seen_bloom.unseen(impressions, CAST(user AS user_type), CAST(candidates AS item_type[]))``.

    ``impressions`` is a table name, a :class:`~sqlalchemy.Table` or a mapped class. The
    result type is ``ARRAY(item_type)``, so ``session.scalar(select(unseen(...)))`` is a list.
    For text or uuid users or items pass ``sa.Text`` / ``sa.Uuid``. Bigint candidates go to
    psycopg 3 as one binary ``int8[]`` (:class:`seen_bloom.psycopg.Int8Array`).
    """
    array_type = postgresql.ARRAY(item_type)
    param_type = _Int8ArrayParam() if _is_bigint(item_type) else array_type
    return sa.func.seen_bloom.unseen(
        _table(impressions), _typed(user, user_type), _typed(candidates, param_type), type_=array_type
    )


def has_seen(
    impressions: Any,
    user: Any,
    item: Any,
    *,
    user_type: TypeEngine | type = sa.BigInteger,
    item_type: TypeEngine | type = sa.BigInteger,
) -> Any:
    """``seen_bloom.has_seen(impressions, CAST(user AS user_type), CAST(item AS item_type))``."""
    return sa.func.seen_bloom.has_seen(
        _table(impressions), _typed(user, user_type), _typed(item, item_type), type_=sa.Boolean
    )


def filter_of(impressions: Any, user: Any, *, user_type: TypeEngine | type = sa.BigInteger) -> Any:
    """``seen_bloom.filter(impressions, CAST(user AS user_type))``: the user's window as one
    ``bloom`` value."""
    return sa.func.seen_bloom.filter(_table(impressions), _typed(user, user_type), type_=Bloom())

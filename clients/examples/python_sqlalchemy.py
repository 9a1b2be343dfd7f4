#!/usr/bin/env python3
"""seen_bloom from SQLAlchemy 2 (docs/CLIENTS.md#sqlalchemy-2), on psycopg 3.

    pip install 'psycopg[binary]' sqlalchemy ./clients/python
    SEEN_BLOOM_DSN=postgresql://postgres@127.0.0.1:5432/postgres python3 python_sqlalchemy.py

ORM models of an impressions table and of a table with a bloom column (the seen-bloom
package's Bloom type); tracking, batch inserts (ORM bulk INSERT, which SQLAlchemy sends as
multi-row VALUES, and COPY through the driver connection), the feed call (typed expressions,
and text() with casts), a bloom column that round-trips, and SQLSTATEs. The tables get
unique names and are dropped at the end. Exits 1 when an answer is not the expected one.
"""

from __future__ import annotations

import os
import sys
import uuid
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import seen_bloom
from seen_bloom import sqlalchemy as sb

SUFFIX = uuid.uuid4().hex[:10]


class CheckFailed(Exception):
    pass


def check(ok: bool, what: str) -> None:
    if not ok:
        raise CheckFailed(what)
    print(f"ok: {what}")


class Base(DeclarativeBase):
    pass


class Impression(Base):
    __tablename__ = f"impressions_sa_{SUFFIX}"
    id: Mapped[int] = mapped_column(sa.BigInteger, sa.Identity(), primary_key=True)
    user_id: Mapped[int] = mapped_column(sa.BigInteger)
    post_id: Mapped[int] = mapped_column(sa.BigInteger)
    seen_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True), server_default=sa.func.now())
    watch_pct: Mapped[float] = mapped_column(sa.REAL)


class SavedFilter(Base):
    """A filter kept in a column of your own: the Bloom type reads and writes it."""

    __tablename__ = f"saved_filters_sa_{SUFFIX}"
    user_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)
    seen: Mapped[seen_bloom.Bloom | None] = mapped_column(sb.Bloom)


def run(engine: sa.Engine) -> None:
    impressions = Impression.__tablename__
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS seen_bloom"))
        Base.metadata.create_all(conn)
        # --- tracking --------------------------------------------------------------------
        filter_table = conn.scalar(
            sa.text("SELECT seen_bloom.track(:t, 'user_id', 'post_id', 'seen_at', \"where\" => 'watch_pct >= 0.5')::text"),
            {"t": impressions},
        )
    check(filter_table == f"{impressions}_seen", f"track() made {filter_table}")

    with Session(engine) as session:
        # --- batch inserts ---------------------------------------------------------------
        # ORM bulk INSERT: a list of dicts; SQLAlchemy batches them into multi-row VALUES.
        session.execute(
            sa.insert(Impression),
            [
                {"user_id": 7, "post_id": 1001, "watch_pct": 0.9},
                {"user_id": 7, "post_id": 1002, "watch_pct": 1.0},
                {"user_id": 7, "post_id": 1005, "watch_pct": 0.1},
                {"user_id": 9, "post_id": 2000, "watch_pct": 1.0},
            ],
        )
        check(session.scalar(sb.has_seen(Impression, 7, 1001).select()) is True, "seen inside its own transaction")
        session.commit()

        # COPY through the driver's connection (psycopg's cursor.copy), in the session's
        # transaction.
        raw = session.connection().connection.driver_connection
        with raw.cursor().copy(f"COPY {impressions} (user_id, post_id, watch_pct) FROM STDIN") as copy:
            for k in range(1000):
                copy.write_row((10, 5000 + k, 0.8))
        session.commit()

        # --- the feed call ---------------------------------------------------------------
        # Typed expressions: seen-bloom's unseen() casts the user and the candidates.
        unseen = session.scalar(sa.select(sb.unseen(Impression, 7, [1001, 1003, 1002, 1004, 1005, 1003])))
        check(unseen == [1003, 1004, 1005], f"user 7: unseen {unseen}")
        unseen = session.scalar(sa.select(sb.unseen(Impression, 10, list(range(5990, 6010)))))
        check(unseen == list(range(6000, 6010)), "COPY: 5990..5999 seen, 6000..6009 not")
        check(session.scalar(sa.select(sb.unseen(Impression, 7, []))) == [], "no candidates, no answer")
        # text(): write the casts yourself.
        unseen = session.scalar(
            sa.text("SELECT seen_bloom.unseen(:t, CAST(:u AS bigint), CAST(:c AS bigint[]))"),
            {"t": impressions, "u": 9, "c": [2000, 2001]},
        )
        check(unseen == [2001], "text() with casts")

        # --- reading a bloom value, a bloom column ---------------------------------------
        value = session.scalar(sa.select(sb.filter_of(Impression, 7)))
        check(isinstance(value, seen_bloom.Bloom) and value.items == 2, f"seen_bloom.filter: {value!r}")
        session.add(SavedFilter(user_id=7, seen=value))
        session.add(SavedFilter(user_id=8, seen=None))
        session.commit()
        session.expire_all()
        saved = session.get(SavedFilter, 7)
        check(saved.seen == value, "a bloom column round-trips through the ORM")
        # Add an item server-side, then ask the column.
        session.execute(
            sa.update(SavedFilter)
            .where(SavedFilter.user_id == 7)
            .values(seen=sa.func.bloom_add(SavedFilter.seen, sa.cast(1003, sa.BigInteger), type_=sb.Bloom))
        )
        session.commit()
        session.expire_all()
        check(session.get(SavedFilter, 7).seen.items == 3, "bloom_add through an UPDATE")
        check(
            session.scalars(sa.select(SavedFilter.user_id).where(SavedFilter.seen.contains_item(1003))).all() == [7],
            "bloom_contains in a WHERE clause",
        )
        unseen = session.scalar(
            sa.select(sa.func.bloom_unseen(SavedFilter.seen, sa.cast([1001, 1004], sa.ARRAY(sa.BigInteger)),
                                           type_=sa.ARRAY(sa.BigInteger))).where(SavedFilter.user_id == 7)
        )
        check(unseen == [1004], "bloom_unseen over the column")

        # --- errors by SQLSTATE ----------------------------------------------------------
        def sqlstate_of(statement, params=None) -> str | None:
            try:
                session.execute(statement, params)
            except sa.exc.DBAPIError as e:
                session.rollback()  # the failed statement aborted the transaction
                return e.orig.sqlstate  # psycopg's (asyncpg's: e.orig.sqlstate too)
            return None

        # 42804: text() with a list of str, no cast (psycopg sends it untyped).
        check(
            sqlstate_of(sa.text("SELECT seen_bloom.unseen(:t, :u, :c)"), {"t": impressions, "u": 7, "c": ["1001"]})
            == "42804",
            "42804 could not determine polymorphic type",
        )
        # 42804 too: a LargeBinary value into a bloom column (bytea is not bloom without a cast).
        naive = sa.table(SavedFilter.__tablename__, sa.column("user_id"), sa.column("seen", sa.LargeBinary))
        check(sqlstate_of(sa.insert(naive).values(user_id=9, seen=bytes(value))) == "42804", "42804 bytea into bloom")
        check(sqlstate_of(sa.select(sb.unseen("pg_class", 7, [1]))) == "55000", "55000 not tracked")
        check(sqlstate_of(sa.select(sb.unseen(Impression, 7, [[1, 2], [3, 4]]))) == "22023", "22023 2-D array")
        # 22P02: bytes that are not a bloom value (the server validates every value).
        session.add(SavedFilter(user_id=10, seen=b"not a bloom"))
        try:
            session.commit()
            check(False, "invalid bytes are refused")
        except sa.exc.DataError as e:
            session.rollback()
            check(e.orig.sqlstate == "22P02", "22P02 invalid bloom bytes")


def main() -> int:
    dsn = os.environ.get("SEEN_BLOOM_DSN")
    if not dsn or "://" not in dsn:
        print("set SEEN_BLOOM_DSN to a URL, e.g. postgresql://postgres@127.0.0.1:5432/postgres", file=sys.stderr)
        return 2
    engine = sa.create_engine("postgresql+psycopg://" + dsn.split("://", 1)[1])
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SET client_min_messages = warning"))
        run(engine)
    except CheckFailed as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    finally:
        # Dropping the impressions table takes its tracking with it.
        Base.metadata.drop_all(engine)
        engine.dispose()
    print("python_sqlalchemy: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

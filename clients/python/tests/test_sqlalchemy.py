"""seen_bloom.sqlalchemy: the Bloom column type in an ORM model, reflection, and the typed
unseen / has_seen / filter_of expressions, on psycopg and on asyncpg."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import seen_bloom
from seen_bloom import sqlalchemy as sb

from conftest import sqlalchemy_url

SUFFIX = uuid.uuid4().hex[:10]


class Base(DeclarativeBase):
    pass


class UserFilter(Base):
    __tablename__ = f"sb_test_filters_{SUFFIX}"
    user_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)
    seen: Mapped[seen_bloom.Bloom | None] = mapped_column(sb.Bloom)


@pytest.fixture
def engine(server_dsn):
    eng = sa.create_engine(sqlalchemy_url("psycopg"))
    Base.metadata.create_all(eng)
    yield eng
    Base.metadata.drop_all(eng)
    eng.dispose()


def test_orm_round_trip(engine, conn):
    made = seen_bloom.Bloom(conn.execute("SELECT bloom_add(NULL::bloom, ARRAY[1, 2, 3]::bigint[])::bytea").fetchone()[0])
    with Session(engine) as session:
        session.add_all([UserFilter(user_id=1, seen=made), UserFilter(user_id=2, seen=None)])
        session.commit()
    with Session(engine) as session:
        one = session.get(UserFilter, 1)
        assert isinstance(one.seen, seen_bloom.Bloom)
        assert one.seen == made and one.seen.items == 3
        assert session.get(UserFilter, 2).seen is None
        # Plain bytes are accepted as a parameter too; the server validates them.
        session.get(UserFilter, 2).seen = bytes(made)
        session.commit()
        # SQL-side updates: bloom_add typed as Bloom, then read back through the type.
        session.execute(
            sa.update(UserFilter)
            .where(UserFilter.user_id == 1)
            .values(seen=sa.func.bloom_add(UserFilter.seen, sa.cast(4, sa.BigInteger), type_=sb.Bloom))
        )
        session.commit()
        session.expire_all()
        assert session.get(UserFilter, 1).seen.items == 4
        assert session.get(UserFilter, 2).seen == made
        # The comparator: bloom_contains with a typed item.
        hits = session.scalars(
            sa.select(UserFilter.user_id).where(UserFilter.seen.contains_item(4)).order_by(UserFilter.user_id)
        ).all()
        assert hits == [1]


def test_invalid_bytes_are_refused_by_the_server(engine):
    with Session(engine) as session:
        session.add(UserFilter(user_id=3, seen=b"garbage"))
        with pytest.raises(sa.exc.DBAPIError) as err:
            session.commit()
        assert err.value.orig.sqlstate == seen_bloom.SQLSTATE_INVALID_TEXT


def test_large_binary_alone_fails_and_reflection_gives_bloom(engine):
    table = UserFilter.__table__.name
    reflected = sa.Table(table, sa.MetaData(), autoload_with=engine)
    assert isinstance(reflected.c.seen.type, sb.Bloom)
    naive = sa.Table(table, sa.MetaData(), sa.Column("user_id", sa.BigInteger), sa.Column("seen", sa.LargeBinary))
    with engine.connect() as c:
        with pytest.raises(sa.exc.ProgrammingError) as err:
            c.execute(sa.insert(naive).values(user_id=5, seen=b"\x00"))
        assert err.value.orig.sqlstate == "42804"


def test_typed_expressions(engine, table, text_table):
    with engine.connect() as c:
        assert c.scalar(sa.select(sb.unseen(table, 7, [1001, 1003, 1002, 1004]))) == [1003, 1004]
        assert c.scalar(sa.select(sb.unseen(table, 7, []))) == []
        assert c.scalar(sa.select(sb.has_seen(table, 7, 1001))) is True
        assert c.scalar(sa.select(sb.has_seen(table, 7, 1003))) is False
        got = c.scalar(sa.select(sb.unseen(text_table, "alice", ["a", "c"], user_type=sa.Text, item_type=sa.Text)))
        assert got == ["c"]
        f = c.scalar(sa.select(sb.filter_of(table, 7)))
        assert isinstance(f, seen_bloom.Bloom) and f.items == 2
        # text() with a list of str and no cast: 42804, as with the driver.
        with pytest.raises(sa.exc.ProgrammingError) as err:
            c.execute(sa.text("SELECT seen_bloom.unseen(:t, :u, :c)"), {"t": text_table, "u": "alice", "c": ["a"]})
        assert err.value.orig.sqlstate == "42804"


def test_unseen_sends_bigint_candidates_as_int8array(engine, table):
    from seen_bloom.psycopg import Int8Array

    sent = []

    def capture(conn, cursor, statement, parameters, context, executemany):
        sent.extend(type(v) for v in parameters.values())

    sa.event.listen(engine, "before_cursor_execute", capture)
    try:
        with engine.connect() as c:
            assert c.scalar(sa.select(sb.unseen(table, 7, (1001, 1003, 1002, 1004)))) == [1003, 1004]
            assert Int8Array in sent
            # a nested list is left to psycopg, so the server answers it (22023)
            with pytest.raises(sa.exc.DataError) as err:
                c.execute(sa.select(sb.unseen(table, 7, [[1, 2], [3, 4]])))
            assert err.value.orig.sqlstate == "22023"
    finally:
        sa.event.remove(engine, "before_cursor_execute", capture)


def test_text_users_uuid_items(engine, conn):
    from conftest import make_table

    name = make_table(conn, "text", "uuid")
    try:
        seen = [uuid.uuid4() for _ in range(3)]
        fresh = uuid.uuid4()
        with conn.cursor().copy(f"COPY {name} (user_id, item) FROM STDIN") as copy:
            for item in seen:
                copy.write_row(("alice", item))
        with engine.connect() as c:
            got = c.scalar(
                sa.select(sb.unseen(name, "alice", [seen[0], fresh, seen[2]], user_type=sa.Text, item_type=sa.Uuid))
            )
            assert got == [fresh]
            assert c.scalar(sa.select(sb.has_seen(name, "alice", seen[1], user_type=sa.Text, item_type=sa.Uuid))) is True
            f = c.scalar(sa.select(sb.filter_of(name, "alice", user_type=sa.Text)))
            assert f.item_family == "uuid" and f.items == 3
    finally:
        conn.execute(f"DROP TABLE {name}")


def test_reflection_without_the_module_is_nulltype(server_dsn):
    # What the module fixes: run in a fresh interpreter that never imports it.
    import subprocess
    import sys

    code = (
        "import sys, warnings, sqlalchemy as sa\n"
        "warnings.simplefilter('ignore')\n"
        "e = sa.create_engine(sys.argv[1])\n"
        "with e.begin() as c:\n"
        "    c.execute(sa.text('CREATE TEMP TABLE r (f bloom)'))\n"
        "    print(type(sa.Table('r', sa.MetaData(), autoload_with=c).c.f.type).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, sqlalchemy_url("psycopg")], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "NullType"


def test_asyncpg_dialect(server_dsn, table):
    async def go():
        eng = create_async_engine(sqlalchemy_url("asyncpg"))
        try:
            async with eng.connect() as c:
                a = await c.scalar(sa.select(sb.unseen(table, 7, [1001, 1003])))
                f = await c.scalar(sa.select(sb.filter_of(table, 7)))
                back = await c.scalar(sa.select(sa.func.bloom_cardinality(sa.cast(sa.literal(f, sb.Bloom()), sb.Bloom()))))
                # text() on asyncpg: every polymorphic parameter untyped without CAST.
                with pytest.raises(sa.exc.ProgrammingError) as err:
                    await c.execute(sa.text(f"SELECT seen_bloom.unseen('{table}', :u, :c)"), {"u": 7, "c": [1001]})
                assert err.value.orig.sqlstate == "42804"
                await c.rollback()
                cast = await c.scalar(
                    sa.text(f"SELECT seen_bloom.unseen('{table}', CAST(:u AS bigint), CAST(:c AS bigint[]))"),
                    {"u": 7, "c": [1001, 1003]},
                )
                assert cast == [1003]
                return a, f, back
        finally:
            await eng.dispose()

    a, f, back = asyncio.run(go())
    assert a == [1003]
    assert isinstance(f, seen_bloom.Bloom) and f.items == 2
    assert back == 2

"""The SQLAlchemy driver beyond the contract suite: PostgreSQL dying under
a page in progress answers 503 (never 500), the vote it held counted
nothing; what the site's account may not do in its schema; a new local
cluster gets its tables and the data set as server.py opens it."""
import asyncio
import os
import shutil
import tempfile
from dataclasses import replace

import pytest

pytest.importorskip('sqlalchemy')
pytestmark = pytest.mark.db     # some start a PostgreSQL of their own

from sqlalchemy import text  # noqa: E402

from conftest import TEST_PACKS, free_port, small_data_set  # noqa: E402
from data_interface import DataUnavailable  # noqa: E402
from data_interface.orm.models import SCHEMA  # noqa: E402
from data_interface.orm.sqlalchemy_data import SqlalchemyData  # noqa: E402
from runtime.databases import open_databases  # noqa: E402
from runtime.engines import BY_NAME  # noqa: E402
from runtime.settings import DEFAULTS  # noqa: E402
from test_site import (Relay, get, new_ballots, started, stopped,  # noqa: E402
                       text as body_text, vote)


def relayed(server, port):
    return SqlalchemyData(server.dsn.replace(
        ':%d/' % server.port, ':%d/' % port), timeout=2)


async def test_the_database_dying_under_a_vote_answers_503(postgres_orm):
    """The link goes silent while a vote waits on it, then dies: the vote
    answers 503, and so do pages while the database is away; once it is
    back, the vote's ballots still vote (its transaction was rolled back,
    not half applied)."""
    relay = Relay(postgres_orm.port)
    await relay.open()
    site = await started(relayed(postgres_orm, relay.port))
    try:
        assert (await get(site, '/good')).status == 200
        cookie, ((_, win, lose), _) = await new_ballots(site)
        relay.silence()
        voting = asyncio.ensure_future(vote(site, cookie, win, lose))
        await asyncio.sleep(0.3)
        assert not voting.done()    # in the database
        await relay.cut()
        answer = await voting
        assert answer.status == 503 and 'unavailable' in body_text(answer)
        answer = await get(site, '/good')
        assert answer.status == 503 and 'unavailable' in body_text(answer)
        await relay.open()
        for _ in range(100):
            if (await get(site, '/good')).status == 200:
                break
            await asyncio.sleep(0.1)
        assert (await vote(site, cookie, win, lose)).status == 200
    finally:
        await stopped(site)
        await relay.cut()


async def test_a_database_not_there_is_unavailable():
    data = SqlalchemyData('postgresql://u:p@127.0.0.1:%d/db' % free_port(),
                          timeout=1)
    with pytest.raises(DataUnavailable, match='cannot start'):
        await data.start()
    with pytest.raises(DataUnavailable, match='not connected'):
        await data.top_stickers(9)


async def test_the_sites_account_writes_only_what_pages_write(postgres_orm):
    data = SqlalchemyData(postgres_orm.dsn)
    await data.start()
    try:
        for statement in (
                'UPDATE {s}.limits SET max_ballots = 0',
                'UPDATE {s}.stickers SET image = image',
                'INSERT INTO {s}.packs VALUES (\'x\', \'x\')',
                'DELETE FROM {s}.stickers',
                'TRUNCATE {s}.counters',
                'CREATE TABLE {s}.mine (x int)'):
            async with data._sessions() as session:
                with pytest.raises(Exception, match='permission denied'):
                    await session.execute(text(statement.format(s=SCHEMA)))
    finally:
        await data.close()


async def test_a_new_local_cluster_gets_its_tables_and_the_data_set():
    """As server.py opens the engine's database: the local cluster
    created, the owner's account makes the schema before the site's
    connects, the loader loads the data set into it."""
    root = tempfile.mkdtemp(prefix='stickers-test-orm-')
    os.chmod(root, 0o755)     # the postgres account passes through
    settings = replace(DEFAULTS, root=root, packs=TEST_PACKS,
                       postgres_port=free_port())
    try:
        async with open_databases(BY_NAME['fastapi-sqlalchemy-pool'],
                                  settings) as data:
            assert isinstance(data, SqlalchemyData)
            expected = small_data_set()
            assert (await data.stats())[:2] == (len(expected.packs),
                                                len(expected.stickers))
            assert len(await data.top_stickers(9)) == 9
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def test_no_connection_free_in_time_is_unavailable(postgres_orm):
    """The pool's wait is bounded: past it, DataUnavailable (503)."""
    data = SqlalchemyData(postgres_orm.dsn, max_size=1, timeout=0.3)
    await data.start()
    try:
        async with data._engine.connect():      # the pool's one connection
            with pytest.raises(DataUnavailable, match='TimeoutError'):
                await data.top_stickers(9)
        assert len(await data.top_stickers(9)) == 9
    finally:
        await data.close()

"""Tarantool on vinyl: server.py's local instance on it, data directories
kept to the engine they were made with, and its caps, which are settings
rather than what memory holds. The contract suite runs on vinyl too."""
import asyncio
import os
import subprocess
import sys
import uuid

import pytest

import dataset
from conftest import (TEST_PACKS, ServerProcess, free_port, start_tarantool,
                      tarantool_address)
from data_interface import DataUnavailable, Visit, VoteOutcome
from data_interface.address import as_admin
from data_interface.tarantool.asynctnt_data import AsynctntData
from runtime.databases.table import BY_NAME
from runtime.databases.tarantool import ManagedTarantool
from runtime.settings import DEFAULTS, replace
from test_supervision import ports
from test_site import get, started, stopped
from test_tarantool import first_vote

# Each test starts its own databases or server.py processes.
pytestmark = [pytest.mark.db, pytest.mark.server]


def local_ports():
    return dict(ports(), STICKERS_TARANTOOL_VINYL_PORT=str(free_port()))


async def storage_engine(address):
    admin = AsynctntData(address)
    await admin.start()
    try:
        return await admin.storage_engine()
    finally:
        await admin.close()


async def test_server_starts_its_tarantool_on_vinyl(bare_checkout, tmp_path):
    env = local_ports()
    site = ServerProcess('aiohttp-tarantool-one', ['--tarantool-engine', 'vinyl'],
                         str(tmp_path / 'server.log'), root=bare_checkout,
                         env=env)
    try:
        _, voted = await first_vote(site.url)
        assert voted['votes_plus'] >= 1
        from conftest import fetch
        status, _, text = await fetch(site.url + '/good')
        assert status == 200 and 'rating' in text
        s = replace(DEFAULTS, root=bare_checkout, tarantool_engine='vinyl',
                    tarantool_vinyl_port=int(env['STICKERS_TARANTOOL_VINYL_PORT']))
        server = ManagedTarantool(BY_NAME['tarantool'].directory(s),
                                  settings=s)
        assert await storage_engine(server.admin_address) == 'vinyl'
    finally:
        assert site.stop() == 0, site.output()
    assert 'starting Tarantool on 127.0.0.1:%s' % env[
        'STICKERS_TARANTOOL_VINYL_PORT'] in site.output()
    var = os.path.join(bare_checkout, 'var')
    assert os.path.isdir(os.path.join(var, 'tarantool-vinyl'))
    assert not os.path.exists(os.path.join(var, 'tarantool'))


def test_a_data_directory_keeps_its_engine(tmp_path):
    """memtx's spaces opened as vinyl (or the reverse): the instance refuses
    to start, and says why."""
    directory = str(tmp_path / 'db')
    start_tarantool(directory, TNT_ENGINE='memtx').stop()
    with pytest.raises(RuntimeError, match='on memtx, not vinyl'):
        start_tarantool(directory, TNT_ENGINE='vinyl')
    directory = str(tmp_path / 'db2')
    start_tarantool(directory, TNT_ENGINE='vinyl').stop()
    with pytest.raises(RuntimeError, match='on vinyl, not memtx'):
        start_tarantool(directory, TNT_ENGINE='memtx')


def test_a_tarantool_found_on_the_other_engine_is_refused(bare_checkout):
    """A memtx instance answers at the local vinyl port, with the passwords
    of var/tarantool-vinyl (managed by another process, so not adopted):
    server.py --tarantool-engine vinyl says so and exits, serving nothing."""
    env = local_ports()
    s = replace(DEFAULTS, root=bare_checkout, tarantool_engine='vinyl')
    db = ManagedTarantool(BY_NAME['tarantool'].directory(s), port=int(
        env['STICKERS_TARANTOOL_VINYL_PORT']), env={'TNT_ENGINE': 'memtx'})
    db.start()
    try:
        result = subprocess.run(
            [sys.executable, os.path.join(bare_checkout, 'server.py'), '-e',
             'aiohttp-tarantool-one', '-p', str(free_port()),
             '--tarantool-engine', 'vinyl'],
            cwd=bare_checkout, capture_output=True, text=True, timeout=60,
            env=dict(os.environ, **env))
    finally:
        db.stop()
    assert result.returncode == 1, result.stderr
    assert 'keeps the site on memtx, not vinyl' in result.stderr
    assert 'Traceback' not in result.stderr


async def test_vinyl_caps_are_settings(tmp_path):
    """By default 1,000,000 sessions and ballots; given ones are kept, and
    concurrent calls past them (which may conflict on the oldest rows) all
    succeed and leave the tables at the caps; the counts survive a restart,
    where they are counted again."""
    directory = str(tmp_path / 'db')
    db = start_tarantool(directory, TNT_ENGINE='vinyl')
    try:
        admin = AsynctntData(as_admin(tarantool_address(db)))
        await admin.start()
        try:
            assert (await admin._call('limits', []))[1:] == [10 ** 6, 10 ** 6]
        finally:
            await admin.close()
    finally:
        db.stop()
    db = start_tarantool(directory, TNT_ENGINE='vinyl', TNT_MAX_SESSIONS='300',
                         TNT_MAX_BALLOTS='400')
    try:
        admin = AsynctntData(as_admin(tarantool_address(db)))
        await admin.start()
        try:
            await admin.load(dataset.generate(packs=TEST_PACKS))
        finally:
            await admin.close()
        data = AsynctntData(tarantool_address(db))
        await data.start()
        try:
            for _ in range(4):
                visits = [Visit(str(uuid.uuid4()), '127.0.0.1', 'test')
                          for _ in range(100)]
                await asyncio.gather(*[data.record_visits(visits[i::5])
                                       for i in range(5)])
                await asyncio.gather(*[data.sticker_pair(
                    v.session, (uuid.uuid4().hex[:22], uuid.uuid4().hex[:22]),
                    600) for v in visits])
            stats = await data.stats()
            assert (stats.sessions, stats.ballots) == (300, 400)
            v = visits[-1]
            win, lose = uuid.uuid4().hex[:22], uuid.uuid4().hex[:22]
            await data.sticker_pair(v.session, (win, lose), 600)
            assert await data.cast_vote(v.session, win, lose) == VoteOutcome.OK
            before = await data.stats()
        finally:
            await data.close()
    finally:
        db.stop()
    # A snapshot at start (the log is past the threshold) writes the rows
    # to disk and no cache keeps them: reads yield, so the transactions
    # below overlap, and may conflict and run again (that they do, and are
    # counted: test_conflicting_transactions_run_again_or_fail_with_503).
    db = start_tarantool(directory, TNT_ENGINE='vinyl', TNT_MAX_SESSIONS='300',
                         TNT_MAX_BALLOTS='400', TNT_VINYL_CACHE='0',
                         TNT_CHECKPOINT_WAL_THRESHOLD=str(64 * 1024))
    try:
        data = AsynctntData(tarantool_address(db))
        await data.start()
        try:
            assert await data.stats() == before
            await asyncio.gather(*[data.record_visits(visits[i:] + visits[:i])
                                   for i in range(0, 100, 10)])
            after = await data.stats()
            assert (after.users, after.views, after.sessions) == (
                before.users, before.views + 1000, 300)
        finally:
            await data.close()
    finally:
        db.stop()


async def admin_call(db, name, *args):
    admin = AsynctntData(as_admin(tarantool_address(db)))
    await admin.start()
    try:
        return await admin._call(name, list(args))
    finally:
        await admin.close()


async def new_visitors(site, count):
    """The statuses of `count` new visitors' GET / at once, and the page
    of a 503 among them (None if none)."""
    answers = await asyncio.gather(*[get(site, '/') for _ in range(count)])
    refused = [r for r in answers if r.status == 503]
    return ([r.status for r in answers],
            refused[0].body.decode() if refused else None)


async def test_conflicting_transactions_run_again_or_fail_with_503(tmp_path):
    """New visitors at once at the ballots' cap each drop the oldest ballot,
    read from disk (no cache), so their transactions overlap and conflict:
    the instance counts each run again, and every visitor is served. With
    one run allowed, a visitor whose run conflicts gets a 503."""
    directory = str(tmp_path / 'db')
    caps = dict(TNT_ENGINE='vinyl', TNT_MAX_BALLOTS='400')
    db = start_tarantool(directory, **caps)
    try:
        admin = AsynctntData(as_admin(tarantool_address(db)))
        await admin.start()
        try:
            await admin.load(dataset.generate(packs=TEST_PACKS))
        finally:
            await admin.close()
        site = await started(AsynctntData(tarantool_address(db)))
        try:
            for _ in range(20):
                statuses, _ = await new_visitors(site, 20)
                assert statuses == [200] * 20
        finally:
            await stopped(site)
    finally:
        db.stop()
    # A snapshot at start puts the ballots on disk, where no cache keeps
    # them: make_room's read of the oldest yields.
    db = start_tarantool(directory, TNT_VINYL_CACHE='0',
                         TNT_CHECKPOINT_WAL_THRESHOLD=str(16 * 1024), **caps)
    try:
        site = await started(AsynctntData(tarantool_address(db)))
        try:
            assert await admin_call(db, 'conflicts') == [0, 0, 100]
            for name, args in [('conflicts', []), ('set_retries', [1])]:
                with pytest.raises(DataUnavailable, match='denied'):
                    await site.data._call(name, args)     # the app's account
            for _ in range(5):
                statuses, _ = await new_visitors(site, 20)
                assert statuses == [200] * 20
                retried, failed, _ = await admin_call(db, 'conflicts')
                if retried:
                    break
            assert retried > 0 and failed == 0
            assert await admin_call(db, 'set_retries', 1) == 1
            for _ in range(5):
                statuses, page = await new_visitors(site, 20)
                assert set(statuses) <= {200, 503}, statuses
                if page:
                    break
            assert page and 'The database is unavailable' in page
            _, failed, _ = await admin_call(db, 'conflicts')
            assert failed >= statuses.count(503)
        finally:
            await stopped(site)
    finally:
        db.stop()

"""A hot standby of the local cluster: it follows the primary within a
second and refuses writes, comes back rebuilt and caught up after a crash,
leaves no process and only private files when stopped, ends a postmaster
left running in its directory, and says why when the primary is down."""
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid

import pytest

from conftest import (free_port, load_small_dataset, remove_postgres,
                      start_postgres, until, wait_until)
from data_interface import DataUnavailable, Visit
from data_interface.postgres.asyncpg_data import PostgresData
from runtime.databases import postgres_layout as layout
from runtime.databases import postgres_standby
from runtime.databases.postgres import bindir
from runtime.databases.postgres_standby import (ManagedPostgresStandby,
                                                children)
from runtime.processes import launcher, spawn, state
from runtime.settings import DEFAULTS, replace
from plugins.checkouts import processes_of
from test_local_databases import mode, wait_ended

# Each test starts its own databases.
pytestmark = pytest.mark.db

CAUGHT_UP = 1.0     # seconds for a write on the primary to reach the standby


@pytest.fixture(scope='module')
def primary():
    """A cluster of this module's own (one test stops it), loaded."""
    server = start_postgres()
    try:
        load_small_dataset(PostgresData(server.owner_dsn))
        yield server
    finally:
        remove_postgres(server)


@pytest.fixture
def settings():
    """Settings whose var/ the postgres account may pass through, on free
    ports."""
    root = tempfile.mkdtemp(prefix='stickers-test-standby-')
    os.chmod(root, 0o755)
    yield replace(DEFAULTS, root=root, postgres_port=free_port())
    for pid in processes_of(root):   # a failed test's
        os.kill(pid, 9)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def standby(primary, settings):
    server = ManagedPostgresStandby(primary, 1, settings=settings)
    try:
        server.start()
        yield server
    finally:
        server.stop()


async def visit(dsn):
    """Record a visit of a new session through the site's account."""
    data = PostgresData(dsn, min_size=1)
    await data.start()
    try:
        await data.record_visits([Visit(str(uuid.uuid4()), '203.0.113.9',
                                        'a browser')])
    finally:
        await data.close()


async def sessions(data):
    return (await data.stats()).sessions


async def wait_sessions(data, count, timeout):
    """Seconds until data holds `count` sessions; fails after timeout."""
    started = time.monotonic()

    async def caught_up():
        return await sessions(data) == count
    await until(caught_up, timeout, 0.01, 'not caught up')
    return time.monotonic() - started


async def test_follows_the_primary_and_refuses_writes(primary, standby):
    assert standby.name == 'PostgreSQL replica 1'
    assert standby.port != primary.port
    assert ':%d/' % standby.port in standby.dsn
    assert standby.owner_dsn.replace(str(standby.port), '') == \
        primary.owner_dsn.replace(str(primary.port), '')
    on_primary = PostgresData(primary.dsn, min_size=1)
    on_standby = PostgresData(standby.dsn, min_size=1)
    await on_primary.start()
    await on_standby.start()
    try:
        assert len(await on_standby.top_stickers(9)) == 9
        assert await on_standby.top_stickers(9) == \
            await on_primary.top_stickers(9)
        before = await sessions(on_standby)
        assert before == await sessions(on_primary)
        await visit(primary.dsn)
        lag = await wait_sessions(on_standby, before + 1, CAUGHT_UP)
        print('caught up in %.3f s' % lag)
        with pytest.raises(DataUnavailable, match='read-only transaction'):
            await on_standby.record_visits([Visit(
                str(uuid.uuid4()), '203.0.113.9', 'a browser')])
    finally:
        await on_primary.close()
        await on_standby.close()


async def test_a_killed_standby_comes_back_rebuilt(primary, standby):
    stale = os.path.join(standby.data, 'from-before')
    open(stale, 'w').close()
    pid = standby.pid
    family = [pid] + children(pid)
    assert len(family) > 3, family
    assert standby.death() is None
    standby.kill()
    assert wait_ended(family, timeout=1)
    assert standby.death() == 'died with signal 9'
    await visit(primary.dsn)     # while it is dead
    expected = await sessions_of(primary.dsn)
    standby.restart()
    assert standby.death() is None
    assert standby.pid != pid
    assert not os.path.exists(stale)
    on_standby = PostgresData(standby.dsn, min_size=1)
    await on_standby.start()
    try:
        assert await sessions(on_standby) == expected
    finally:
        await on_standby.close()


async def sessions_of(dsn):
    data = PostgresData(dsn, min_size=1)
    await data.start()
    try:
        return await sessions(data)
    finally:
        await data.close()


def test_a_stopped_standby_leaves_nothing_running_and_private_files(
        standby):
    family = [standby.pid] + children(standby.pid)
    standby.stop()
    assert wait_ended(family, timeout=1)
    assert not processes_of(standby.data)
    assert standby.death() is not None
    # The postgres group (root's case) may pass through to the cluster.
    assert mode(standby.directory) == (0o710 if os.geteuid() == 0 else 0o700)
    for top, directories, names in os.walk(standby.home):
        assert mode(top) == 0o700, top
        for name in names:
            assert mode(os.path.join(top, name)) == 0o600, (top, name)
    for name in os.listdir(standby.directory):
        if name != 'cluster':
            assert mode(os.path.join(standby.directory, name)) == 0o600, name
    conninfo = os.path.join(standby.data, 'postgresql.auto.conf')
    with open(conninfo) as f:
        assert 'primary_conninfo' in f.read()
    if os.geteuid() == 0:
        assert os.stat(conninfo).st_uid == os.stat(standby.home).st_uid != 0


def silent_port():
    """A listening socket that never answers (a hung primary)."""
    listener = socket.socket()
    listener.bind(('127.0.0.1', 0))
    listener.listen()
    return listener


def test_processes_left_running_are_ended(primary, standby):
    """A postmaster and a pg_basebackup no server stops any more (no
    parent-death signal) are in the way of the next start: ended first."""
    standby.stop()
    postmaster = spawn(launcher(user=layout.owner(), log=standby.log_file)
                       + [os.path.join(bindir(), 'postgres'), '-D',
                          standby.data, '-p', str(standby.port)],
                       stdin=subprocess.DEVNULL, cwd='/',
                       start_new_session=True)
    with silent_port() as hung:
        copy = spawn(launcher(user=layout.owner(), log=standby.log_file)
                     + [os.path.join(bindir(), 'pg_basebackup'), '-D',
                        standby.data, '-h',
                        '127.0.0.1', '-p', str(hung.getsockname()[1]),
                        '-w', '-U', 'postgres'],
                     stdin=subprocess.DEVNULL, cwd='/', start_new_session=True)
        wait_until(standby.running, 30, 0.05, process=postmaster)
        assert copy.poll() is None
        standby.start()
        assert postmaster.poll() is not None
        assert copy.poll() is not None
    assert standby.pid != postmaster.pid
    assert state(standby.pid) not in (None, 'Z')


def test_no_primary_no_standby(settings, monkeypatch):
    """Its start fails soon, saying why, with the primary stopped or hung;
    the watcher retries later."""
    monkeypatch.setattr(postgres_standby, 'CONNECT_TIMEOUT', '2')
    down = start_postgres()
    try:
        down.stop()
        standby = ManagedPostgresStandby(down, 2, settings=settings)
        started = time.monotonic()
        with pytest.raises(RuntimeError) as failed:
            standby.start()
        assert time.monotonic() - started < 10
        assert 'PostgreSQL replica 2 could not copy the primary at ' \
               '127.0.0.1:%d' % down.port in str(failed.value)
        assert 'Connection refused' in str(failed.value)
        assert standby.death() is None   # never started
        with silent_port() as hung:
            down.port = hung.getsockname()[1]
            started = time.monotonic()
            with pytest.raises(RuntimeError, match='timeout expired'):
                standby.restart()
            assert time.monotonic() - started < 10
        standby.stop()
    finally:
        remove_postgres(down)

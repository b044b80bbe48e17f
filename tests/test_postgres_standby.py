"""A hot standby of the local cluster: it follows the primary within a
second and refuses writes, comes back rebuilt and caught up after a crash,
leaves no process and only private files when stopped, ends a postmaster
left running in its directory, and says why when the primary is down."""
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import pytest

from conftest import (free_port, load_small_dataset, remove_postgres,
                      start_postgres, until, wait_until)
from data_interface import DataUnavailable, Visit
from data_interface import replicated
from data_interface.postgres.asyncpg_data import PostgresData
from data_interface.replicated import Replicated
from runtime.databases import postgres, postgres_layout as layout
from runtime.databases import postgres_standby
from runtime.databases.postgres import bindir
from runtime.databases.postgres_standby import (ManagedPostgresStandby,
                                                children)
from runtime.processes import launcher, spawn, state
from runtime.settings import DEFAULTS, replace
from plugins.checkouts import processes_of
from test_local_databases import mode, wait_ended
from test_postgres import driver  # noqa: F401 (a fixture: each driver)

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


async def test_follows_the_primary_and_refuses_writes(primary, standby,
                                                      driver):
    assert standby.name == 'PostgreSQL replica 1'
    assert standby.port != primary.port
    assert ':%d/' % standby.port in standby.dsn
    assert standby.owner_dsn.replace(str(standby.port), '') == \
        primary.owner_dsn.replace(str(primary.port), '')
    on_primary = driver(primary.dsn, min_size=1)
    on_standby = driver(standby.dsn, min_size=1, replica=True)
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


async def test_reads_go_to_the_standby_and_writes_to_the_primary(
        primary, standby, driver):
    """data_interface.replicated over a real standby, with either driver:
    the standby is in the read set, the writes (which it would refuse)
    reach the primary, and the reads show them within the bound."""
    data = Replicated(driver(primary.dsn, min_size=1),
                      [driver(standby.dsn, min_size=1, replica=True)],
                      max_lag=CAUGHT_UP)
    await data.start()
    try:
        assert data.reading == data.replicas
        before = await data.stats()
        session = str(uuid.uuid4())
        await data.record_visits([Visit(session, '203.0.113.9', 'a browser')])
        tokens = ['g' * 22, 'h' * 22]
        pair = await data.sticker_pair(session, tokens, 60)
        assert await data.cast_vote(session, *tokens) == 'ok'

        async def counted():
            s = await data.stats()
            return (s.votes, s.sessions) == (before.votes + 1,
                                             before.sessions + 1)
        started = time.monotonic()
        while not await counted():
            assert time.monotonic() - started < CAUGHT_UP, 'not caught up'
            await asyncio.sleep(0.01)
        winner = await data.sticker(pair[0].pack, pair[0].id)
        assert winner.votes_plus == pair[0].votes_plus + 1
        assert data.reading == data.replicas
    finally:
        await data.close()


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


async def test_a_standby_down_at_start_joins_once_it_is_up(
        primary, settings, monkeypatch):
    """The standby is not there when the site starts: the start ends soon,
    the primary serves the reads, and the standby once it is up."""
    monkeypatch.setattr(replicated, 'RETRY_FIRST', 0.2)
    standby = ManagedPostgresStandby(primary, 1, settings=settings)
    standby.port = free_port()   # primary's + 10 may be another test's
    data = replicated.Replicated(
        PostgresData(primary.dsn, min_size=1),
        [PostgresData(standby.dsn, min_size=1, replica=True)])
    try:
        await asyncio.wait_for(data.start(), replicated.START_TIMEOUT)
        assert data.reading == []
        assert 'cannot connect' in data.replicas[0].why_out
        assert len(await data.top_stickers(9)) == 9     # from the primary
        port = standby.port
        await asyncio.get_event_loop().run_in_executor(None, standby.start)
        assert standby.port == port, 'the port was taken: the test is void'
        deadline = time.monotonic() + 15
        while data.replicas[0] not in data.reading:
            assert time.monotonic() < deadline, data.replicas[0].why_out
            await asyncio.sleep(0.05)
        assert await data.top_stickers(9) == \
            await data.replicas[0].data.top_stickers(9)
    finally:
        await data.close()
        standby.stop()


async def superuser(server):
    """A connection to `server` as the cluster's superuser."""
    import asyncpg
    password = open(os.path.join(server.home, 'superuser.password')).read()
    return await asyncpg.connect(host=server.host, port=server.port,
                                 user=layout.SUPERUSER, database='postgres',
                                 password=password.strip())


async def test_a_standby_the_primary_no_longer_feeds_is_rebuilt(
        settings, monkeypatch):
    """With the primary keeping no WAL for it (wal_keep_size 0), a standby
    cut off while the primary moves on can never catch up: death() says so,
    and a restart (what the watcher does) rebuilds it, caught up."""
    monkeypatch.setattr(postgres, 'WAL_KEEP', '0')
    primary = start_postgres()
    standby = ManagedPostgresStandby(primary, 1, settings=settings)
    frozen = []
    try:
        load_small_dataset(PostgresData(primary.owner_dsn))
        standby.start()
        conn = await superuser(primary)
        try:
            frozen = [standby.pid] + children(standby.pid)
            for pid in frozen:
                os.kill(pid, signal.SIGSTOP)
            await conn.execute('SELECT pg_terminate_backend(pid) '
                               'FROM pg_stat_replication')
            await conn.execute('CREATE TABLE filler (n int)')
            for _ in range(4):
                await conn.execute('INSERT INTO filler VALUES (1)')
                await conn.execute('SELECT pg_switch_wal()')
                await conn.execute('CHECKPOINT')
        finally:
            await conn.close()
        await visit(primary.dsn)
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        frozen = []
        deadline = time.monotonic() + 30
        while standby.death() is None:
            assert time.monotonic() < deadline, standby._log_tail()
            await asyncio.sleep(0.1)
        assert standby.death() == ('fell behind the primary, which no '
                                   'longer has the WAL it needs')
        standby.restart()
        assert standby.death() is None
        assert await sessions_of(standby.dsn) == \
            await sessions_of(primary.dsn)
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        standby.stop()
        remove_postgres(primary)

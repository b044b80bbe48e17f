"""What only Redis has: its accounts' rights, its memory bound, and its
files (the contract, durability and supervision suites cover the rest)."""
import asyncio
import os
import secrets
import stat
import uuid

import pytest
import redis.asyncio
from redis.exceptions import AuthenticationError, NoPermissionError, ResponseError

from conftest import configure_redis, own_loaded, start_redis
from data_interface import DataUnavailable, Visit
from data_interface.redis.redis_data import RedisData

# Each test starts its own databases or server.py processes.
pytestmark = [pytest.mark.db, pytest.mark.server]


def client(address, **credentials):
    options = dict(username=address.user, password=address.password)
    options.update(credentials)
    return redis.asyncio.Redis(host=address.host, port=address.port,
                               **options)


async def test_no_one_logs_in_without_an_account(redis):
    c = client(redis.address, username=None, password=None)
    try:
        with pytest.raises((AuthenticationError, ResponseError),
                           match='(?i)auth'):
            await c.get('st:counters')
    finally:
        await c.aclose()
    c = client(redis.address, username='default', password='')
    try:
        with pytest.raises((AuthenticationError, ResponseError)):
            await c.ping()
    finally:
        await c.aclose()


@pytest.mark.parametrize('command', [
    ('FLUSHALL',), ('FUNCTION', 'FLUSH'), ('CONFIG', 'SET', 'maxmemory', '0'),
    ('KEYS', '*'), ('HSET', 'st:limits', 'max_sessions', '0'),
    ('HSET', 'st:pack:x', 'title', 'x'), ('SET', 'other', '1'),
    ('SHUTDOWN',), ('ACL', 'LIST'), ('EVAL', 'return 1', '0'),
    ('FCALL', 'set_limits', '1', 'st:admin', '0', '0', '0'),
])
async def test_the_app_runs_only_what_the_site_needs(redis, command):
    c = client(redis.address)
    try:
        with pytest.raises(NoPermissionError):
            await c.execute_command(*command)
        assert await c.execute_command('FCALL_RO', 'site_stats', 0)
    finally:
        await c.aclose()


async def test_the_loader_cannot_empty_redis(redis):
    c = client(redis.admin_address)
    try:
        for command in [('FLUSHALL',), ('FUNCTION', 'FLUSH'),
                        ('CONFIG', 'SET', 'maxmemory', '0'), ('SHUTDOWN',)]:
            with pytest.raises(NoPermissionError):
                await c.execute_command(*command)
    finally:
        await c.aclose()


async def test_full_memory_is_503_for_writes_and_reads_go_on(tmp_path):
    """Caps below maxmemory keep sessions and ballots in bounds; past the
    bound (here, limits set above what fits), a write is refused as
    DataUnavailable, the pages' 503, and the ranked lists still read."""
    async with own_loaded(start_redis(str(tmp_path), memory=8 * 1024 * 1024),
                          configure_redis, RedisData) as (server, data):
        admin = RedisData(server.admin_address)
        await admin.start()
        await admin._admin('set_limits', [900, 10 ** 7, 10 ** 7])
        await admin.close()
        agent = 'a' * 256
        with pytest.raises(DataUnavailable, match='maxmemory'):
            for _ in range(200):
                await data.record_visits([
                    Visit(str(uuid.uuid4()), '1.2.3.4', agent)
                    for _ in range(500)])
        assert len(await data.top_stickers(9)) == 9
        with pytest.raises(DataUnavailable, match='maxmemory'):
            for _ in range(100000):
                await data.sticker_pair(str(uuid.uuid4()), (
                    secrets.token_urlsafe(16),
                    secrets.token_urlsafe(16)), 60)


def test_its_files_are_private_and_passwords_hashed(tmp_path):
    from runtime.databases.redis import ManagedRedis
    from runtime.processes import free_port
    redis = ManagedRedis(str(tmp_path / 'redis'), port=free_port())
    redis.start()
    try:
        private(redis)
    finally:
        redis.stop()


def private(redis):
    directory = redis.directory
    assert len(redis.address.password) >= 20
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    for root, dirs, files in os.walk(directory):
        for name in files:
            mode = stat.S_IMODE(os.stat(os.path.join(root, name)).st_mode)
            assert mode & 0o077 == 0, (name, oct(mode))
    with open(os.path.join(directory, 'redis.conf')) as f:
        conf = f.read()
    assert redis.address.password not in conf
    assert 'appendfsync always' in conf and 'bind 127.0.0.1' in conf
    with open('/proc/%d/cmdline' % redis.pid, 'rb') as f:
        assert redis.address.password.encode() not in f.read()


async def test_a_new_redis_without_functions_is_refused_to_the_app(tmp_path):
    server = start_redis(str(tmp_path))
    try:
        data = RedisData(server.address)
        with pytest.raises(DataUnavailable, match="loader's account"):
            await data.start()
        configure_redis(server)
        await data.start()
        await data.close()
    finally:
        server.stop()


async def test_an_idle_shared_connection_stays_open(redis):
    """redis-py's reads time out after 5 s by default: the shared
    connection's reader must wait for replies however idle the site is."""
    data = RedisData(redis.address, 'one')
    await data.start()
    try:
        link = data._client._link
        await asyncio.sleep(6)
        assert data._client._link is link
        assert len(await data.top_stickers(9)) == 9
        assert data._client._link is link
    finally:
        await data.close()


async def test_redis_keeps_the_pace_of_the_sweep(tmp_path):
    """However many servers call expire(), a sweep that ended less than
    sweep_every seconds ago is not begun again; the loader's still runs."""
    async with own_loaded(start_redis(str(tmp_path)), configure_redis,
                          RedisData, sweep_every=3600) as (server, data):
        async def expired_pair():
            await data.sticker_pair(str(uuid.uuid4()), (
                secrets.token_urlsafe(16), secrets.token_urlsafe(16)), 0.1)
            await asyncio.sleep(0.3)
        await expired_pair()
        assert await data.expire() == (2, 0)
        await expired_pair()
        assert await data.expire() == (0, 0)
        assert (await data.stats()).ballots == 2
        admin = RedisData(server.admin_address)
        await admin.start()
        try:
            assert await admin.expire_below(3600, 10 ** 9, 10 ** 9) == (2, 0)
        finally:
            await admin.close()


REWRITING = 'Background append only file rewriting started'


@pytest.mark.parametrize('at_start', [False, True])
async def test_with_snapshots_at_start_redis_rewrites_its_file_at_start(
        tmp_path, at_start):
    """--snapshots-at-start (the bench): appending past the threshold
    makes no rewrite while serving, where the default makes one; the next
    start makes it, and keeps the data."""
    from runtime.settings import DEFAULTS, replace
    settings = replace(DEFAULTS, snapshots_at_start=at_start)
    threshold = 256 * 1024

    def start():
        return start_redis(str(tmp_path), settings=settings,
                           rewrite_after=threshold)

    def rewrites(server):
        with open(server.log_file) as f:
            return f.read().count(REWRITING)
    async with own_loaded(start(), configure_redis, RedisData) as (
            server, data):
        before = rewrites(server)
        while server.appended() < 4 * threshold and rewrites(server) == before:
            await data.record_visits([
                Visit(str(uuid.uuid4()), '127.0.0.1', 'x' * 200)
                for _ in range(100)])
        await asyncio.sleep(1)     # Redis checks its threshold each 100 ms
        assert (rewrites(server) > before) is not at_start
        sessions = (await data.stats()).sessions
    if not at_start:
        return
    assert server.appended() >= 4 * threshold
    server = start()
    try:
        assert rewrites(server) == before + 1
        assert server.appended() < threshold
        data = RedisData(server.address)
        await data.start()
        try:
            assert (await data.stats()).sessions == sessions
        finally:
            await data.close()
    finally:
        server.stop()


def test_a_failed_rewrite_at_start_leaves_redis_serving(tmp_path, caplog,
                                                        monkeypatch):
    """A rewrite that fails at start is logged; Redis starts and serves
    (every write is in its file all the same)."""
    from runtime.databases.redis import ManagedRedis
    from runtime.settings import DEFAULTS, replace

    def client(server):
        a = server.admin_address
        return redis.Redis(host=a.host, port=a.port, username=a.user,
                           password=a.password)

    def fail(self):
        raise RuntimeError('the append-only file rewrite failed')
    directory = str(tmp_path)
    server = start_redis(directory)
    try:
        with client(server) as c:
            c.set('st:kept', 'yes')
    finally:
        server.stop()
    monkeypatch.setattr(ManagedRedis, 'rewrite', fail)
    server = start_redis(directory, rewrite_after=1,
                         settings=replace(DEFAULTS, snapshots_at_start=True))
    try:
        assert 'serving without the rewrite: the append-only file rewrite ' \
               'failed' in caplog.text
        with client(server) as c:
            assert c.get('st:kept') == b'yes'
    finally:
        server.stop()


def test_a_port_taken_is_named_when_redis_cannot_start(tmp_path):
    """Redis exits at once on a port something else holds: the error says
    why, from its log."""
    import socket
    from runtime.databases.redis import ManagedRedis
    from runtime.processes import free_port
    with socket.socket() as held:
        held.bind(('127.0.0.1', free_port()))
        held.listen()
        port = held.getsockname()[1]
        server = ManagedRedis(str(tmp_path / 'redis'), port=port)
        with pytest.raises(RuntimeError) as failed:
            server.start()
    assert 'exited with status 1: ' in str(failed.value)
    assert '127.0.0.1:%d: bind: Address already in use' % port \
        in str(failed.value)
    assert str(failed.value).endswith('see %s' % server.log_file)

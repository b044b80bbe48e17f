"""What is Tarantool's own: the app account's privileges, and the local
instance server.py manages when no address is given."""
import asyncio
import os
import time
import uuid

import aiohttp
import asynctnt
import pytest
from asynctnt.exceptions import TarantoolDatabaseError

from conftest import ROOT, ServerProcess, tarantool_address, until
from runtime import settings
from data_interface.address import TarantoolAddress
from runtime.processes import answers
from bench.pagecheck import ballots, stat

# Each test starts its own databases or server.py processes.
pytestmark = [pytest.mark.db, pytest.mark.server]


@pytest.fixture(params=['tarantool', 'tarantool_vinyl'])
async def app_connection(request):
    a = tarantool_address(request.getfixturevalue(request.param))
    conn = asynctnt.Connection(host=a.host, port=a.port, username=a.user,
                               password=a.password)
    await conn.connect()
    yield conn
    await conn.disconnect()


@pytest.mark.parametrize('forbidden', [
    lambda c: c.eval('return 1'),
    lambda c: c.call('load_stickers', [[], []]),
    lambda c: c.call('box.schema.user.grant', ['guest', 'super']),
    # Spaces by id (stickers 512, packs, ballots, sessions, server 516): the
    # ones the app may not read are not even in its view of the schema.
    lambda c: c.select(514),
    lambda c: c.select(515),
    lambda c: c.select(516),
    lambda c: c.insert(512, [999999, 'x', 'x', 0, 0, 0]),
    lambda c: c.delete(514, ['x']),
])
async def test_app_account_may_only_call_site_functions(app_connection, forbidden):
    with pytest.raises(TarantoolDatabaseError) as e:
        await forbidden(app_connection)
    assert 'denied' in str(e.value).lower()


async def test_app_account_reads_what_pages_read(app_connection):
    assert len((await app_connection.select('stickers', [1])).body) == 1
    assert len((await app_connection.call('site_stats', [])).body) == 1


async def first_vote(url):
    """Vote once as a new visitor; return the winner's API path and JSON."""
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as s:
        async with s.get(url + '/') as r:
            cookie = r.headers['Set-Cookie'].split(';')[0]
            (winner, win, lose), _ = ballots(await r.text())
        async with s.post(url + '/', data={'win': win, 'lose': lose},
                          headers={'Cookie': cookie}) as r:
            assert r.status == 200
        async with s.get(url + '/stickers') as r:
            packs = await r.json()
        for p in packs:
            async with s.get(url + p['url']) as r:
                for sticker in (await r.json())['stickers']:
                    if sticker['id'] == winner:
                        return '/stickers/%s/%d' % (p['name'], winner), sticker


async def test_local_instance_is_started_kept_and_stopped(tmp_path):
    d = settings.from_environment()
    d = TarantoolAddress(d.db_host, d.tarantool_port, None, None)
    if answers(d.host, d.port):
        pytest.skip('something already answers at %s:%d' % (d.host, d.port))
    server = ServerProcess('aiohttp-tarantool-one', [], str(tmp_path / 'a.log'),
                           packs=None)
    try:
        winner, voted = await first_vote(server.url)
    finally:
        assert server.stop() == 0, server.output()
    assert 'starting Tarantool' in server.output()
    assert not answers(d.host, d.port), 'the local Tarantool was left running'
    assert os.path.isdir(os.path.join(ROOT, 'var', 'tarantool'))

    server = ServerProcess('sanic-tarantool-one', [], str(tmp_path / 'b.log'),
                           packs=None)
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(server.url + winner) as r:
                assert await r.json() == voted
            async with s.get(server.url + '/about') as r:
                assert stat(await r.text(), 'stickers') == 16200
    finally:
        assert server.stop() == 0, server.output()
    assert 'loading' not in server.output()


def log_since_snapshot(directory):
    """Bytes of write-ahead log newer than the newest snapshot."""
    names = os.listdir(directory)
    newest = max(int(n[:-5]) for n in names if n.endswith('.snap'))
    return sum(os.path.getsize(os.path.join(directory, n)) for n in names
               if n.endswith('.xlog') and int(n[:-5]) >= newest)


async def test_a_start_snapshots_what_short_runs_logged(tmp_path):
    """Tarantool counts checkpoint_wal_threshold from its own start: runs
    that each log less than it make no snapshot, so the start after them
    must, or every start replays every log since the first."""
    from conftest import start_tarantool
    from data_interface import Visit
    from data_interface.tarantool.asynctnt_data import AsynctntData
    threshold = 128 * 1024
    directory = str(tmp_path / 'tnt')

    def snapshots():
        return sorted(n for n in os.listdir(directory) if n.endswith('.snap'))

    for run in range(3):
        server = start_tarantool(directory,
                                 TNT_CHECKPOINT_WAL_THRESHOLD=str(threshold))
        try:
            if run < 2:     # log 0.6 of the threshold, in new sessions
                data = AsynctntData(tarantool_address(server))
                await data.start()
                try:
                    goal = (run + 1) * 0.6 * threshold
                    while log_since_snapshot(directory) < goal:
                        await data.record_visits([
                            Visit(str(uuid.uuid4()), '127.0.0.1', 'test')
                            for _ in range(100)])
                finally:
                    await data.close()
                assert len(snapshots()) == 1, snapshots()
            else:
                await until(lambda: len(snapshots()) >= 2, 20,
                            message=lambda: str(snapshots()))
                assert log_since_snapshot(directory) < threshold
        finally:
            server.stop()
        if run == 1:
            assert log_since_snapshot(directory) >= threshold


async def test_with_snapshots_at_start_none_is_made_while_serving(tmp_path):
    """TNT_SNAPSHOTS=start (server.py --snapshots-at-start, the bench):
    logging past the threshold makes no snapshot while serving, where the
    default makes one; the next start makes it."""
    from conftest import start_tarantool
    from data_interface import Visit
    from data_interface.tarantool.asynctnt_data import AsynctntData
    threshold = 128 * 1024

    def snapshots(directory):
        return [n for n in os.listdir(directory) if n.endswith('.snap')]

    async def serve(directory, when):
        """Log three thresholds; the snapshots then, after a second."""
        server = start_tarantool(directory, TNT_SNAPSHOTS=when,
                                 TNT_CHECKPOINT_WAL_THRESHOLD=str(threshold))
        try:
            data = AsynctntData(tarantool_address(server))
            await data.start()
            try:
                while log_since_snapshot(directory) < 3 * threshold and len(
                        snapshots(directory)) < 2:
                    await data.record_visits([
                        Visit(str(uuid.uuid4()), '127.0.0.1', 'test')
                        for _ in range(100)])
            finally:
                await data.close()
            await asyncio.sleep(1)
            return snapshots(directory)
        finally:
            server.stop()
    assert len(await serve(str(tmp_path / 'always'), 'always')) >= 2
    directory = str(tmp_path / 'start')
    assert len(await serve(directory, 'start')) == 1
    assert log_since_snapshot(directory) >= 3 * threshold
    server = start_tarantool(directory, TNT_SNAPSHOTS='start',
                             TNT_CHECKPOINT_WAL_THRESHOLD=str(threshold))
    try:
        assert len(snapshots(directory)) >= 2
        assert log_since_snapshot(directory) < threshold
    finally:
        server.stop()


def snapshot_seconds(log):
    """[(seconds, bytes)] of each snapshot an instance's log records
    (from 'saving snapshot `PATH.inprogress'' to its 'done'; 0 bytes for
    one removed since)."""
    import datetime
    import re
    found, began = [], None
    for line in log.splitlines():
        at = line[:23]
        if 'saving snapshot' in line:
            began = (datetime.datetime.strptime(at, '%Y-%m-%d %H:%M:%S.%f'),
                     re.search(r"`(.*)\.inprogress'", line).group(1))
        elif began and line.startswith(at) and 'snapshot/' in line \
                and line.rstrip().endswith('done'):
            stop = datetime.datetime.strptime(at, '%Y-%m-%d %H:%M:%S.%f')
            size = (os.path.getsize(began[1])
                    if os.path.exists(began[1]) else 0)   # 0: removed since
            found.append(((stop - began[0]).total_seconds(), size))
            began = None
    return found


async def test_a_snapshot_is_written_at_the_rate_limit(tmp_path):
    """Once started, a snapshot writes at most TNT_SNAP_IO_RATE_LIMIT MB a
    second (docs/databases.md): so a snapshot of N MB at 1 MB/s takes about
    N seconds, where with no limit it takes a fraction of one."""
    from conftest import start_tarantool
    from data_interface import Visit
    from data_interface.tarantool.asynctnt_data import AsynctntData
    took = {}

    def big(server):    # not the one made at bootstrap
        return [s for s in snapshot_seconds(open(server.log_file).read())
                if s[1] > 2 ** 20]
    for limit in ('none', '1'):
        directory = str(tmp_path / ('tnt-' + limit))
        server = start_tarantool(directory, TNT_SNAP_IO_RATE_LIMIT=limit,
                                 TNT_CHECKPOINT_WAL_THRESHOLD=str(2 ** 22))
        try:
            data = AsynctntData(tarantool_address(server))
            await data.start()
            try:    # sessions until a snapshot has been made after 4 MB
                while not big(server):
                    await data.record_visits([
                        Visit(str(uuid.uuid4()), '127.0.0.1', 'x' * 200)
                        for _ in range(100)])
            finally:
                await data.close()
        finally:
            server.stop()
        took[limit] = big(server)[0]
    seconds, size = took['1']
    assert seconds > 0.7 * size / 2 ** 20, took
    assert took['none'][0] < seconds / 3, took
    # The bench reads the same windows (its stall record names them).
    from bench.latency import background
    work = background.windows([server.log_file], 0, time.time())
    assert {w[2] for w in work} == {'tarantool snapshot'}, work
    assert any(abs(e - b - seconds) < 0.01 for b, e, _ in work), work


@pytest.mark.legacy
@pytest.mark.needs('aiotarantool')
async def test_an_aiotarantool_connection_starts_no_process(tarantool, monkeypatch):
    """tarantool 0.5 looks libc up for each connection, and ctypes runs
    ldconfig to find it: mode 'multi' would fork a process per call, with
    the loop standing still meanwhile."""
    import subprocess
    from data_interface.tarantool.aiotarantool_data import AiotarantoolData
    data = AiotarantoolData(tarantool_address(tarantool), 'multi')
    await data.start()
    started = []
    execute = subprocess.Popen._execute_child

    def watched(self, args, *rest):
        started.append(args)
        return execute(self, args, *rest)
    monkeypatch.setattr(subprocess.Popen, '_execute_child', watched)
    for _ in range(3):
        assert len(await data.top_stickers(9)) == 9
    assert started == []


def _sync(request):
    """The sync of an iproto request (its header: a fixmap of int keys)."""
    header, at = request[5:], 1
    for _ in range(header[0] & 0x0f):
        key, at = _uint(header, at)
        value, at = _uint(header, at)
        if key == 0x01:
            return value
    raise ValueError('no sync in %r' % request)


def _uint(b, at):
    if b[at] < 0x80:
        return b[at], at + 1
    size = {0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8}[b[at]]
    return int.from_bytes(b[at + 1:at + 1 + size], 'big'), at + 1 + size


async def test_a_link_lost_just_after_its_handshake_is_unavailable():
    """A server that accepts the login and hangs up at once (Tarantool
    dying): asynctnt then fails its version check with a TypeError, which
    the driver reports as the outage it is."""
    from data_interface import DataUnavailable
    from data_interface.tarantool.asynctnt_data import AsynctntData
    greeting = (b'Tarantool 2.9.0 (Binary) 0'.ljust(63) + b'\n'
                + b'A' * 44 + b' ' * 19 + b'\n')

    async def serve(reader, writer):
        writer.write(greeting)
        request = await reader.read(4096)
        header = b'\x83\x00\x00\x01' + b'\xcf' + _sync(request).to_bytes(
            8, 'big') + b'\x05\x01'
        body = header + b'\x80'
        writer.write(b'\xce' + len(body).to_bytes(4, 'big') + body)
        writer.close()

    server = await asyncio.start_server(serve, '127.0.0.1', 0)
    port = server.sockets[0].getsockname()[1]
    outcomes = []
    try:
        for mode in ('one', 'multi') * 10:
            data = AsynctntData(
                TarantoolAddress('127.0.0.1', port, 'u', 'p'), mode)
            try:
                await data.start()
            except DataUnavailable as e:
                outcomes.append('unavailable')
                assert 'not supported' not in str(e), e
            else:   # connected before the hang-up was seen
                outcomes.append('connected')
            finally:
                await data.close()
    finally:
        server.close()
        await server.wait_closed()
    assert outcomes.count('unavailable') >= 10, outcomes


async def test_calls_after_a_crash_write_nothing_to_the_lost_link(
        tmp_path, caplog):
    """Tarantool killed, then many calls in the same moment on the shared
    connection, before the driver has seen the loss: each is unavailable,
    and none is written to the dead link (asyncio logs every write to a
    lost connection past the fifth: a line per request in an outage, on
    asyncio's loop)."""
    from conftest import start_tarantool
    from data_interface import DataUnavailable
    from data_interface.address import as_admin
    from data_interface.tarantool.asynctnt_data import AsynctntData
    from plugins.databases import load_small
    server = start_tarantool(str(tmp_path / 'db'))
    try:
        await load_small(AsynctntData(as_admin(tarantool_address(server))))
        data = AsynctntData(tarantool_address(server), 'one')
        await data.start()
        try:
            assert len(await data.top_stickers(3)) == 3
            server.kill()
            caplog.set_level('WARNING', logger='asyncio')
            got = await asyncio.gather(
                *[data.top_stickers(3) for _ in range(30)],
                return_exceptions=True)
            assert all(isinstance(g, DataUnavailable) for g in got), got
            lost = [r for r in caplog.records if r.name == 'asyncio']
            assert lost == [], [r.getMessage() for r in lost]
        finally:
            await data.close()
    finally:
        server.stop()

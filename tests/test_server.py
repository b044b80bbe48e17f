"""server.py as a process: engine list, bad input, shutdown, reconnect."""
import asyncio
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import uuid

import aiohttp
import pytest

from runtime import engines
from runtime.processes import ESTABLISHED
from conftest import (ROOT, ServerProcess, engine_args, start_tarantool,
                      tarantool_address, until, wait_until)
from plugins.servers import one_of_each

# Each test starts its own databases or server.py processes.
pytestmark = [pytest.mark.db, pytest.mark.server]


def run_server(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, 'server.py')]
                          + list(args), capture_output=True, text=True,
                          timeout=60)


def test_list_shows_every_engine():
    result = run_server('--list')
    assert result.returncode == 0
    for engine in engines.ENGINES:
        line = [l for l in result.stdout.splitlines()
                if l.split()[0] == engine.name]
        assert len(line) == 1, engine.name
        assert engine.framework in line[0] and engine.mode in line[0]
    assert 'yes' in result.stdout


def test_engines_come_from_dimensions():
    names = [e.name for e in engines.ENGINES]
    assert len(names) == len(set(names))
    for e in engines.ENGINES:
        assert e.name.startswith('%s-%s-%s' % (e.framework, e.driver, e.mode))
        assert e.name.endswith('-uvloop') == (e.loop == 'uvloop')


def test_unknown_engine_exits_2_with_closest_match():
    result = run_server('-e', 'aiohttp-tarantol-one')
    assert result.returncode == 2
    assert "did you mean 'aiohttp-tarantool-one'" in result.stderr
    assert 'sanic-tarantool-multi-uvloop' in result.stderr


@pytest.mark.parametrize('args', [
    ['-e', 'aiohttp-tarantool-one', '-p', '0'],
    ['-e', 'aiohttp-tarantool-one', '-l', 'LOUD'],
    ['-e', 'aiohttp-tarantool-one', '--tarantool', 'nowhere'],
    ['-e', 'aiohttp-postgres-pool', '--postgres', 'nowhere'],
    ['-e', 'aiohttp-postgres-pool', '--postgres', 'postgresql://h:99999/db'],
    [],
])
def test_bad_arguments_exit_2(args):
    result = run_server(*args)
    assert result.returncode == 2
    assert 'error:' in result.stderr


@pytest.mark.parametrize('engine, option, address', [
    ('aiohttp-tarantool-one', '--tarantool', '10.255.255.1:3301'),
    ('aiohttp-tarantool-one', '--tarantool',
     'sticker_app:sticker_app@10.255.255.1:3301'),
    ('aiohttp-redis-one', '--redis', 'redis://10.255.255.1:6379'),
    ('aiohttp-redis-one', '--redis',
     'redis://sticker_admin:sticker_admin@db.example:6379/0'),
])
def test_default_passwords_are_refused_off_the_loopback(engine, option,
                                                        address):
    """Refused while parsing the options: nothing is started or reached."""
    result = run_server('-e', engine, option, address)
    assert result.returncode == 2
    assert 'is refused off the loopback' in result.stderr


async def test_the_loader_has_no_default_password_off_the_loopback():
    from data_interface import DataUnavailable
    from data_interface.address import (as_admin, parse_redis,
                                        parse_tarantool)
    from data_interface.redis.redis_data import RedisData
    from data_interface.tarantool.asynctnt_data import AsynctntData
    remote = as_admin(parse_tarantool('sticker_app:secret@db.example:3301'))
    assert (remote.user, remote.password) == ('sticker_admin', None)
    with pytest.raises(DataUnavailable, match="loader's default password"):
        await AsynctntData(remote).start()
    redis = as_admin(parse_redis('redis://sticker_app:x@db.example:6379'))
    with pytest.raises(DataUnavailable, match="loader's default password"):
        await RedisData(redis).start()
    local = as_admin(parse_redis('redis://127.0.0.1:6380'))
    assert local.password == 'sticker_admin'
    given = parse_redis('redis://sticker_admin:secret@db.example:6379')
    assert as_admin(given) == given


async def burst(url, count):
    """Statuses (or errors) of `count` concurrent GETs."""
    async with aiohttp.ClientSession() as s:
        async def one():
            async with s.get(url) as r:
                return r.status
        return await asyncio.gather(*[one() for _ in range(count)],
                                    return_exceptions=True)


def test_legacy_engines_run_via_legacy_environment():
    listing = run_server('--list').stdout
    for engine in engines.ENGINES:
        if engine.framework == 'japronto' or engine.driver == 'aiotarantool':
            line = [l for l in listing.splitlines()
                    if l.split()[0] == engine.name][0]
            if os.path.exists(os.path.join(engines.LEGACY, 'bin', 'python')):
                assert line.endswith('via .venv37 (Python 3.7)'), line
            else:
                assert 'needs CPython 3.7' in line, line


def test_without_legacy_environment_one_line_says_how(monkeypatch, tmp_path,
                                                      capsys):
    import server
    monkeypatch.setattr(engines, 'LEGACY', str(tmp_path))
    from runtime import frameworks
    monkeypatch.setitem(frameworks.BY_NAME, 'japronto', frameworks.BY_NAME[
        'japronto']._replace(modules=('no_such_japronto',)))
    with pytest.raises(SystemExit) as exit:
        server.find_engine('japronto-tarantool-one', [])
    assert exit.value.code == 1
    err = capsys.readouterr().err
    assert err.count('\n') == 1
    assert 'needs CPython 3.7: install it (pyenv install 3.7.16) and run ' \
           './run.sh setup' in err
    assert engines.runs_here(engines.BY_NAME['japronto-tarantool-one']) \
        .startswith('no: no_such_japronto needs CPython 3.7')


# Engines stopped by each signal: these (every driver, Python 3.7's
# included), and one of every other framework, so that each framework is
# stopped by both.
STOPPED_BY = {
    'SIGTERM': one_of_each([
        'aiohttp-tarantool-one', 'sanic-tarantool-multi-uvloop',
        'aiohttp-postgres-pool-uvloop', 'japronto-tarantool-one-uvloop',
        'japronto-tarantool-multi', 'aiohttp-aiotarantool-multi-uvloop',
        'fastapi-postgres-pool-uvloop', 'blacksheep-postgres-pool',
        'rsgi-redis-one', 'uvicorn-tarantool-multi',
        'granian-tarantool-multi-uvloop', 'socketify-tarantool-one',
        'japronto-redis-pool', 'starlette-tarantool-one-uvloop',
        'falcon-tarantool-one-uvloop', 'robyn-tarantool-one']),
    'SIGINT': one_of_each([
        'sanic-tarantool-one', 'sanic-postgres-pool',
        'japronto-aiotarantool-one', 'fastapi-tarantool-multi',
        'uvicorn-postgres-pool-uvloop', 'granian-postgres-pool',
        'socketify-postgres-pool-uvloop', 'aiohttp-redis-one-uvloop',
        'granian-redis-pool', 'litestar-tarantool-one-uvloop',
        'quart-tarantool-one-uvloop', 'robyn-postgres-pool-uvloop']),
}
DELAY_MS = 2000     # how long the pages stay in progress: the signal's window
IN_FLIGHT = 8


def server_side(port):
    """(how many established sockets of local port `port` there are, the
    bytes received on them that no process has read yet): whichever
    process holds them, a worker or one not accepted yet (Linux /proc)."""
    count = unread = 0
    for table in ('/proc/net/tcp', '/proc/net/tcp6'):
        with open(table) as f:
            for line in f.readlines()[1:]:
                p = line.split()
                if p[3] == ESTABLISHED and int(p[1].rsplit(':', 1)[1], 16) == port:
                    count += 1
                    unread += int(p[4].split(':')[1], 16)
    return count, unread


def send_pages(port, count):
    """`count` connections, each with a GET /good sent on it, every other
    one asking for the connection to be closed after its answer."""
    sockets = []
    for i in range(count):
        s = socket.create_connection(('127.0.0.1', port), 10)
        s.sendall(b'GET /good HTTP/1.1\r\nHost: t\r\n'
                  + (b'Connection: close\r\n' if i % 2 else b'') + b'\r\n')
        sockets.append(s)
    return sockets


def wait_read(server, count):
    """Until the server holds `count` connections and has read every byte
    sent on them: their requests are in, their pages wait out --delay."""
    wait_until(lambda: server_side(server.port) == (count, 0), 10, 0.02,
               lambda: '%s: %s' % (server_side(server.port), server.output()),
               server.process)


def answered(sockets):
    """The first bytes of the answers already in on `sockets`."""
    found = []
    for s in sockets:
        s.setblocking(False)    # else recv waits out the socket's timeout
        try:
            found.append(s.recv(200, socket.MSG_PEEK))
        except BlockingIOError:
            pass
    return found


def answer(s, timeout=30):
    """Everything the server sends on `s` until it closes the connection."""
    s.settimeout(timeout)
    data = b''
    try:
        while True:
            part = s.recv(65536)
            if not part:
                return data
            data += part
    except OSError as e:
        return data + (' [%r]' % e).encode()
    finally:
        s.close()


def whole_page(data):
    """Whether `data` is one 200 answer with its whole body."""
    head, _, body = data.partition(b'\r\n\r\n')
    length = re.search(rb'(?im)^content-length: *(\d+)\r?$', head)
    return (head.startswith(b'HTTP/1.1 200 ') and length is not None
            and len(body) == int(length.group(1)) and b'</html>' in body)


def stop_in_flight(server, sockets, sig):
    """Send `sig` while the pages asked on `sockets` are in progress: every
    one is answered in whole, the server exits 0 by itself."""
    early = answered(sockets)
    assert not early, ('answered before the signal (--delay %d ms)'
                       % DELAY_MS, early)
    server.process.send_signal(getattr(signal, sig))
    answers = [answer(s) for s in sockets]
    cut = [a[:200] for a in answers if not whole_page(a)]
    assert not cut, (len(cut), cut[:2], server.output())
    # Its own exit, not the SIGTERM stop() sends to a process still running.
    server.process.wait(30)
    assert server.stop() == 0, server.output()
    assert 'stopped' in server.output()
    assert 'Traceback' not in server.output()


@pytest.mark.parametrize('engine, sig', [
    (engine, sig) for sig, names in STOPPED_BY.items() for engine in names])
def test_a_signal_lets_every_page_in_progress_answer(request, tmp_path,
                                                     engine, sig):
    """SIGTERM and SIGINT with IN_FLIGHT pages in progress (held by
    --delay, read by the server): each answered 200 in whole, exit 0."""
    server = ServerProcess(engine, engine_args(request, engine)
                           + ['--delay', str(DELAY_MS)],
                           str(tmp_path / 'server.log'))
    try:
        sockets = send_pages(server.port, IN_FLIGHT)
        wait_read(server, IN_FLIGHT)
        stop_in_flight(server, sockets, sig)
    finally:
        server.stop()
    legacy = 'japronto' in engine or 'aiotarantool' in engine
    assert ('(Python 3.7.' in server.output()) == legacy, server.output()


@pytest.mark.parametrize('engine', ['aiohttp-tarantool-one-uvloop',
                                    'sanic-tarantool-one',
                                    'japronto-tarantool-one',
                                    'aiohttp-aiotarantool-one-uvloop',
                                    'japronto-aiotarantool-one'])
async def test_one_connection_reconnects(tmp_path, engine):
    """Kill Tarantool under a running 'one' engine: 503 while it is gone,
    pages again once it is back."""
    db = start_tarantool(str(tmp_path / 'db'))
    try:
        from data_interface.address import as_admin
        from data_interface.tarantool.asynctnt_data import AsynctntData
        from conftest import load_small
        await load_small(AsynctntData(as_admin(tarantool_address(db))))
        server = ServerProcess(engine, ['--tarantool', '%s:%d' % (db.host, db.port)],
                               str(tmp_path / 'server.log'))
        try:
            assert await burst(server.url + '/good', 1) == [200]
            db.kill()
            assert await burst(server.url + '/good', 3) == [503] * 3
            assert await burst(server.url + '/ugly', 1) == [200]
            db.start()
            async def served():
                return await burst(server.url + '/good', 1) == [200]
            await until(served, 10, 0.2, server.output)
            assert await burst(server.url + '/', 5) == [200] * 5
        finally:
            assert server.stop() == 0
    finally:
        db.stop()


async def test_expiry_fiber_sweeps_by_itself(tmp_path):
    """With short TTLs the instance's own fiber empties ballots/sessions."""
    from data_interface import Visit
    from data_interface.address import as_admin
    from data_interface.tarantool.asynctnt_data import AsynctntData
    from conftest import load_small
    db = start_tarantool(str(tmp_path / 'db'), TNT_SWEEP_EVERY='0.2',
                         TNT_SESSION_TTL='0.5')
    try:
        await load_small(AsynctntData(as_admin(tarantool_address(db))))
        data = AsynctntData(tarantool_address(db))
        await data.start()
        for i in range(5):
            session = str(uuid.uuid4())
            await data.record_visits([Visit(session, 'ip', 'ua')])
            await data.sticker_pair(
                session,
                (secrets.token_urlsafe(16), secrets.token_urlsafe(16)), 0.3)
        stats = await data.stats()
        assert (stats.sessions, stats.ballots) == (5, 10)
        await asyncio.sleep(1.5)
        stats = await data.stats()
        assert (stats.sessions, stats.ballots) == (0, 0)
        await data.close()
    finally:
        db.stop()


SAMPLE_DUMP = os.path.join(ROOT, 'tests', 'data', 'sample_dump.json')


async def test_json_dump_is_imported_into_an_empty_database(tmp_path):
    import dataset
    expected = dataset.read_dump(SAMPLE_DUMP)
    db = start_tarantool(str(tmp_path / 'db'))
    try:
        args = ['--tarantool', '%s:%d' % (db.host, db.port), '--data', SAMPLE_DUMP]
        for _ in range(2):      # the second start finds the dump already there
            server = ServerProcess('aiohttp-tarantool-one', args,
                                   str(tmp_path / 'server.log'))
            try:
                async with aiohttp.ClientSession() as s:
                    async with s.get(server.url + '/stickers') as r:
                        packs = await r.json()
                    first = expected.stickers[0]
                    async with s.get('%s/stickers/%s/%d' % (
                            server.url, first.pack, first.id)) as r:
                        assert (await r.json())['image'] == first.image
            finally:
                assert server.stop() == 0
            assert sorted(p['name'] for p in packs) == sorted(
                p.name for p in expected.packs)
            assert sum(p['stickers'] for p in packs) == len(expected.stickers)
    finally:
        db.stop()


def test_dump_into_a_database_with_other_stickers_is_refused(tarantool):
    a = tarantool_address(tarantool)
    result = run_server('-e', 'aiohttp-tarantool-one', '-p', '1',
                        '--tarantool', '%s:%d' % (a.host, a.port),
                        '--data', SAMPLE_DUMP)
    assert result.returncode == 1
    assert 'already holds' in result.stderr and 'Traceback' not in result.stderr


def test_broken_dump_is_refused_before_start(tmp_path):
    broken = tmp_path / 'broken.json'
    broken.write_text('{"packs": [{"name": "Bad Name!", "stickers": []}]}')
    result = run_server('-e', 'aiohttp-tarantool-one', '--data', str(broken))
    assert result.returncode == 2
    assert 'Bad Name!' in result.stderr

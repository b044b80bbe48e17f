"""server.py as a process: engine list, bad input, shutdown, reconnect."""
import asyncio
import os
import secrets
import signal
import subprocess
import sys
import uuid

import aiohttp
import pytest

from runtime import engines
from conftest import (ROOT, ServerProcess, engine_args, start_tarantool,
                      tarantool_address, until)

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


async def burst(url, count, answered=None):
    """Statuses (or errors) of `count` concurrent GETs; sets the event
    `answered` as the first answer arrives."""
    async with aiohttp.ClientSession() as s:
        async def one():
            async with s.get(url) as r:
                if answered is not None:
                    answered.set()
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


@pytest.mark.parametrize('engine, sig', [
    ('aiohttp-tarantool-one', signal.SIGTERM),
    ('sanic-tarantool-multi-uvloop', signal.SIGTERM),
    ('sanic-tarantool-one', signal.SIGINT),
    ('aiohttp-postgres-pool-uvloop', signal.SIGTERM),
    ('sanic-postgres-pool', signal.SIGINT),
    ('japronto-tarantool-one-uvloop', signal.SIGTERM),
    ('japronto-tarantool-multi', signal.SIGTERM),
    ('japronto-aiotarantool-one', signal.SIGINT),
    ('aiohttp-aiotarantool-multi-uvloop', signal.SIGTERM),
    ('fastapi-tarantool-multi', signal.SIGINT),
    ('fastapi-postgres-pool-uvloop', signal.SIGTERM),
    ('blacksheep-postgres-pool', signal.SIGTERM),
    ('rsgi-redis-one', signal.SIGTERM),
    ('uvicorn-tarantool-multi', signal.SIGTERM),
    ('uvicorn-postgres-pool-uvloop', signal.SIGINT),
    ('granian-tarantool-multi-uvloop', signal.SIGTERM),
    ('granian-postgres-pool', signal.SIGINT),
    ('socketify-tarantool-one', signal.SIGTERM),
    ('socketify-postgres-pool-uvloop', signal.SIGINT),
    ('aiohttp-redis-one-uvloop', signal.SIGTERM),
    ('granian-redis-pool', signal.SIGINT),
    ('japronto-redis-pool', signal.SIGTERM),
    ('starlette-tarantool-one-uvloop', signal.SIGTERM),
    ('litestar-tarantool-one-uvloop', signal.SIGINT),
    ('falcon-tarantool-one-uvloop', signal.SIGTERM),
    ('quart-tarantool-one-uvloop', signal.SIGINT),
    ('robyn-tarantool-one', signal.SIGTERM),
    ('robyn-postgres-pool-uvloop', signal.SIGINT),
])
async def test_signal_stops_cleanly(request, tmp_path, engine, sig):
    server = ServerProcess(engine, engine_args(request, engine),
                           str(tmp_path / 'server.log'))
    # The signal comes while the burst is under way, however slow the
    # machine: once its first answer is in.
    answered = asyncio.Event()
    pending = asyncio.ensure_future(burst(server.url + '/good', 40, answered))
    await asyncio.wait_for(answered.wait(), 30)
    server.process.send_signal(sig)
    statuses = await pending
    # Its own exit, not the SIGTERM stop() sends to a process still running.
    server.process.wait(20)
    assert server.stop() == 0, server.output()
    answered = [s for s in statuses if s == 200]
    assert answered, statuses
    assert all(s == 200 or isinstance(s, aiohttp.ClientError) for s in statuses)
    assert 'stopped' in server.output()
    assert 'Traceback' not in server.output()
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

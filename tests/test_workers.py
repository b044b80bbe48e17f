"""server.py --workers 2: both workers answer, every vote counts once across
them, a dead worker is replaced, signals stop everything, and the workers
do not outlive a killed parent. Correctness only: no timing."""
import asyncio
import os
import secrets
import signal
import socket
import uuid

import aiohttp
import pytest

from runtime import engines
from bench.pagecheck import ballots, session_cookie
from conftest import (ServerProcess, engine_args, free_port, tarantool_address,
                      wait_until)
from data_interface import Visit
from runtime.processes import ESTABLISHED, LISTEN, answers, state, tcp_sockets
from test_durability import counted
from test_server import (DELAY_MS, IN_FLIGHT, run_server, send_pages,
                         stop_in_flight, wait_read)
from plugins.servers import one_of_each
from test_gc import frozen
from test_supervision import lines, wait_gone

# Each test starts its own databases or server.py processes.
pytestmark = [pytest.mark.db, pytest.mark.server]

NAMES = one_of_each(['aiohttp-tarantool-one', 'aiohttp-postgres-pool-uvloop',
                     'sanic-tarantool-one-uvloop', 'sanic-postgres-pool',
                     'japronto-tarantool-one', 'uvicorn-tarantool-one',
                     'granian-postgres-pool-uvloop',
                     'fastapi-tarantool-one-uvloop',
                     'socketify-tarantool-one-uvloop', 'sanic-redis-one-uvloop',
                     'blacksheep-redis-pool-uvloop',
                     'rsgi-postgres-pool-uvloop', 'starlette-psycopg-pool',
                     'litestar-redis-one', 'falcon-tarantool-multi-uvloop'])


def params(*others):
    """The engines (with `others`), the legacy one marked so."""
    return [pytest.param(name, *others, marks=[pytest.mark.legacy]
                         if name.startswith('japronto') else [])
            for name in NAMES]


CONNECTIONS = 32
VOTERS = 16


def workers_of(parent):
    """{pid: index} of the workers parent runs now."""
    found = {}
    for entry in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open('/proc/%s/stat' % entry) as f:
                ppid = f.read().rsplit(')', 1)[1].split()[1]
            with open('/proc/%s/cmdline' % entry, 'rb') as f:
                argv = f.read().split(b'\0')
        except (OSError, IndexError):
            continue
        if ppid == str(parent) and b'--worker' in argv:
            found[int(entry)] = int(argv[argv.index(b'--worker') + 1])
    return found


def wait_workers(server, count=2, timeout=30):
    """The workers' pids once `count` of them listen."""
    def listening():
        pids = workers_of(server.process.pid)
        if len(pids) == count and all(tcp_sockets(p, server.port, LISTEN)
                                      for p in pids):
            return pids
    return wait_until(listening, timeout, message=lambda: str(
        (workers_of(server.process.pid), server.output())))


def start(request, tmp_path, engine):
    return ServerProcess(engine, engine_args(request, engine)
                         + ['--workers', '2'], str(tmp_path / 'server.log'))


def connections_per_worker(server, pids):
    """Open CONNECTIONS keep-alive connections, each answered once; how many
    each worker holds while they are open."""
    sockets = []
    try:
        for _ in range(CONNECTIONS):
            s = socket.create_connection(('127.0.0.1', server.port), 10)
            s.sendall(b'GET /ugly HTTP/1.1\r\nHost: x\r\n\r\n')
            sockets.append(s)
        for s in sockets:
            answer = b''
            while not answer.endswith(b'UGLY'):
                part = s.recv(4096)
                assert part, answer
                answer += part
            assert answer.startswith(b'HTTP/1.1 200'), answer
        return {pid: tcp_sockets(pid, server.port, ESTABLISHED)
                for pid in pids}
    finally:
        for s in sockets:
            s.close()


class Tally:
    def __init__(self):
        self.ok = self.replays_refused = 0


async def voter(url, tally, votes):
    """Vote `votes` times in one session, each request on a new connection
    (so the workers take turns at random: each accepts the session cookie
    another issued); replay each counted ballot."""
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar()) as s:
        async with s.get(url + '/') as r:
            assert r.status == 200
            pair = ballots(await r.text())
            cookie = {'Cookie': 'sid=' + session_cookie(r.headers)}
        for _ in range(votes):
            win, lose = pair[0][1], pair[0][2]
            async with s.post(url + '/', data={'win': win, 'lose': lose},
                              headers=cookie) as r:
                body = await r.text()
            assert r.status == 200, (r.status, body)
            tally.ok += 1
            pair = ballots(body)
            async with s.post(url + '/', data={'win': win, 'lose': lose},
                              headers=cookie) as r:
                assert r.status == 409, r.status
                tally.replays_refused += 1


def data_of(request, engine):
    from runtime.databases.table import data_for
    if '-postgres-' in engine:
        return data_for(engines.BY_NAME[engine],
                        request.getfixturevalue('postgres').dsn)
    if '-redis-' in engine:
        return data_for(engines.BY_NAME[engine],
                        request.getfixturevalue('redis').address)
    return data_for(engines.BY_NAME[engine], tarantool_address(
        request.getfixturevalue('tarantool')))


# Robyn's actix-web takes the signals itself and binds its own way.
@pytest.mark.parametrize('engine, sig', [
    pytest.param(*p.values[:1], sig, marks=p.marks) for p, sig in
    zip(params(), ['SIGTERM', 'SIGINT'] * 6)]
    + [('robyn-tarantool-one-uvloop', 'SIGINT')])
async def test_workers_share_the_port_count_votes_once_and_stop(
        request, tmp_path, engine, sig):
    server = start(request, tmp_path, engine)
    try:
        pids = wait_workers(server)
        held = connections_per_worker(server, pids)
        assert sum(held.values()) == CONNECTIONS, held
        assert all(held.values()), held   # both workers answer
        # Each froze its start-up objects (runtime/serve.py), once listening.
        wait_until(lambda: len(frozen(server.output())) >= 2, 10, 0.05,
                   server.output)

        data = data_of(request, engine)
        before = await counted(data)
        tally = Tally()
        await asyncio.gather(*[voter(server.url, tally, 4)
                               for _ in range(VOTERS)])
        after = await counted(data)
        assert tally.ok == tally.replays_refused == VOTERS * 4
        assert [b - a for a, b in zip(before, after)] == [tally.ok] * 2

        # A dead worker is replaced; the port answers all along.
        killed = min(pids)
        os.kill(killed, signal.SIGKILL)
        # Until the parent reaps it, the killed one still counts as a worker.
        assert wait_gone([killed]), server.output()
        pids = wait_workers(server)
        assert killed not in pids
        output = server.output()
        died = lines(output, 'died with signal 9; starting another in 0.5 s')
        assert len(died) == 1 and ' (pid %d) ' % killed in died[0], output
        assert all(r.startswith(b'HTTP/1.1 200')
                   for r in [get_ugly(server.port) for _ in range(8)])
        server.process.send_signal(getattr(signal, sig))
        server.process.wait(40)
    finally:
        code = server.stop()
    assert code == 0, server.output()
    assert wait_gone(list(pids) + [killed]), server.output()
    output = server.output()
    # The parent, the worker left and the one in place of the killed one.
    assert len(lines(output, ' server: stopped')) == 3, output
    assert 'Traceback' not in output and ' ERROR ' not in output, output
    assert not answers('127.0.0.1', server.port)


# One engine of each way of serving: asyncio, granian's and Robyn's Rust
# threads, uWebSockets' loop, japronto in Python 3.7.
@pytest.mark.parametrize('engine, sig', [
    ('aiohttp-postgres-pool-uvloop', 'SIGTERM'),
    ('granian-tarantool-one', 'SIGINT'),
    ('socketify-redis-one-uvloop', 'SIGTERM'),
    ('robyn-tarantool-one-uvloop', 'SIGINT'),
    ('japronto-tarantool-one', 'SIGTERM')])
def test_a_signal_lets_both_workers_answer_their_pages_in_progress(
        request, tmp_path, engine, sig):
    """The parent's signal while both workers hold pages in progress
    (held by --delay): every page answered in whole, all exit 0."""
    server = ServerProcess(engine, engine_args(request, engine)
                           + ['--workers', '2', '--delay', str(DELAY_MS)],
                           str(tmp_path / 'server.log'))
    try:
        pids = wait_workers(server)
        # The kernel spreads connections at random: more until each
        # worker holds some.
        sockets = []
        while True:
            sockets += send_pages(server.port, IN_FLIGHT)
            wait_read(server, len(sockets))
            held = [tcp_sockets(p, server.port, ESTABLISHED) for p in pids]
            if all(held) or len(sockets) >= 4 * IN_FLIGHT:
                break
        assert all(held), held
        stop_in_flight(server, sockets, sig)
    finally:
        server.stop()
    assert wait_gone(list(pids)), server.output()
    assert len(lines(server.output(), ' server: stopped')) == 3, \
        server.output()


def get_ugly(port):
    with socket.create_connection(('127.0.0.1', port), 10) as s:
        s.sendall(b'GET /ugly HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
        answer = b''
        while True:
            part = s.recv(4096)
            if not part:
                return answer
            answer += part


@pytest.mark.parametrize('engine', params())
def test_killed_parent_leaves_no_worker(request, tmp_path, engine):
    server = start(request, tmp_path, engine)
    try:
        pids = wait_workers(server)
        server.process.kill()
        server.process.wait()
        # Orphans may stay zombies where nothing reaps them: not serving.
        wait_until(lambda: all(state(p) in (None, 'Z') for p in pids), 30,
                   message=server.output)
    finally:
        server.stop()
    assert not answers('127.0.0.1', server.port)
    assert len(lines(server.output(), 'the parent has gone')) == 2


def test_managed_databases_start_once_and_stop_last(checkout, tmp_path):  # noqa: F811
    """Without an address the parent starts Tarantool; the workers get its
    password on stdin, not on their command line."""
    env = {'STICKERS_TARANTOOL_PORT': str(free_port()),
           'STICKERS_POSTGRES_PORT': str(free_port())}
    site = ServerProcess('aiohttp-tarantool-one', ['--workers', '2'],
                         str(tmp_path / 'server.log'), root=checkout, env=env)
    try:
        pids = wait_workers(site)
        with open(os.path.join(checkout, 'var', 'tarantool',
                               'sticker_app.password')) as f:
            password = f.read().strip().encode()
        for pid in pids:
            with open('/proc/%d/cmdline' % pid, 'rb') as f:
                assert password not in f.read()
        assert b'200' in get_ugly(site.port).split(b'\r\n')[0]
        with open(os.path.join(checkout, 'var', 'tarantool',
                               'tarantool.pid')) as f:
            tarantool = int(f.readline())
    finally:
        assert site.stop() == 0, site.output()
    assert wait_gone(list(pids) + [tarantool]), site.output()
    assert len(lines(site.output(), 'Tarantool stopped')) == 1


@pytest.mark.parametrize('workers', ['0', '257', 'two'])
def test_bad_worker_counts_exit_2(workers):
    result = run_server('-e', 'aiohttp-tarantool-one', '--workers', workers)
    assert result.returncode == 2 and 'error:' in result.stderr


async def test_parent_sweeps_for_every_worker(postgres):
    """Where the database does not sweep itself, the parent's one sweep
    removes what any worker's visitors left."""
    from runtime import workers
    from data_interface.postgres.asyncpg_data import PostgresData
    data = PostgresData(postgres.dsn)
    await data.start()
    try:
        visit = Visit(str(uuid.uuid4()), 'ip', 'ua')
        tokens = (secrets.token_urlsafe(16), secrets.token_urlsafe(16))
        await data.sticker_pair(visit.session, tokens, 0.05)
        ballots_before = (await data.stats()).ballots
        assert ballots_before >= 2
        sweeper = asyncio.ensure_future(workers.sweep_forever(data, 0.1))
        await asyncio.sleep(0.5)
        sweeper.cancel()
        assert await data.cast_vote(visit.session, *tokens) == 'unknown'
    finally:
        await data.close()

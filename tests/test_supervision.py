"""The databases server.py starts itself are restarted when they die: kill
them under a running server (in a copy of the checkout, on ports of the
test's own) and the site answers again, by itself."""
import asyncio
import os
import signal
import socket
import time

import aiohttp
import pytest

from conftest import (ServerProcess, free_port, load_small, start_tarantool,
                      tarantool_address, wait_until)
from data_interface.address import as_admin
from runtime.databases.postgres import ManagedPostgres
from data_interface.tarantool.asynctnt_data import AsynctntData
from runtime import processes
from runtime.processes import answers
from runtime.processes import state
from test_postgres import wait_for
from test_server import burst

# Each test starts its own databases or server.py processes.
pytestmark = [pytest.mark.db, pytest.mark.server]


def ports():
    """Local database ports of a server's own (its environment)."""
    return {'STICKERS_TARANTOOL_PORT': str(free_port()),
            'STICKERS_POSTGRES_PORT': str(free_port()),
            'STICKERS_REDIS_PORT': str(free_port())}


def start_site(engine, checkout, log_path, *args, env=None):
    """server.py from the copy, with no database address: it starts its
    own, on ports no other test run uses (env: more variables, or those
    ports)."""
    env = dict(ports(), **(env or {}))
    site = ServerProcess(engine, list(args), log_path, root=checkout, env=env)
    site.env = env
    return site


def pid_in(path):
    with open(path) as f:
        return int(f.readline())


def children(pid):
    return set(processes.children(pid))


def wait_gone(pids, timeout=10):
    """True once none of pids is a process, not even a zombie."""
    try:
        return wait_until(lambda: not any(state(p) for p in pids), timeout)
    except AssertionError:
        return False


def lines(output, text):
    return [line for line in output.splitlines() if text in line]


def wait_lines(site, text, count, timeout=20):
    """The server's log once it has `count` lines with text."""
    wait_until(lambda: len(lines(site.output(), text)) >= count, timeout,
               message=site.output)
    return site.output()


async def test_killed_tarantool_is_restarted(checkout, tmp_path):
    site = start_site('aiohttp-tarantool-one-uvloop', checkout,
                      str(tmp_path / 'server.log'))
    pid_file = os.path.join(checkout, 'var', 'tarantool', 'tarantool.pid')
    pids = set()
    try:
        assert await burst(site.url + '/good', 4) == [200] * 4
        pids.add(pid_in(pid_file))
        os.kill(pid_in(pid_file), signal.SIGKILL)
        output = wait_lines(site, 'Tarantool restarted', 1)
        await wait_for(site.url + '/good', 200, timeout=10)
        assert await burst(site.url + '/', 10) == [200] * 10
        pids.add(pid_in(pid_file))
        assert len(pids) == 2
        died = lines(output, 'died with signal 9; restarting in 0.5 s')
        assert len(died) == 1, output
        assert len(lines(output, 'Tarantool restarted')) == 1, output
        assert state(min(pids)) is None, 'the dead Tarantool was not reaped'
    finally:
        assert site.stop() == 0, site.output()
    assert wait_gone(pids), site.output()
    assert 'Traceback' not in site.output()


async def test_killed_redis_is_restarted(checkout, tmp_path):
    """Under requests: 200 or 503 meanwhile, never 500; back by itself with
    its data (the append-only file); a few lines in the log."""
    site = start_site('aiohttp-redis-one-uvloop', checkout,
                      str(tmp_path / 'server.log'))
    pid_file = os.path.join(checkout, 'var', 'redis', 'redis.pid')
    pids = set()
    try:
        assert await burst(site.url + '/good', 4) == [200] * 4
        pids.add(pid_in(pid_file))
        stop_polling = asyncio.Event()
        polled = asyncio.ensure_future(poll(site.url + '/', stop_polling))
        await asyncio.sleep(0.3)
        os.kill(pid_in(pid_file), signal.SIGKILL)
        await asyncio.get_event_loop().run_in_executor(
            None, wait_lines, site, 'Redis restarted', 1)
        await wait_for(site.url + '/good', 200, timeout=10)
        await asyncio.sleep(0.3)
        stop_polling.set()
        statuses = await polled
        assert set(statuses) == {200, 503}, statuses
        assert await burst(site.url + '/', 10) == [200] * 10
        pids.add(pid_in(pid_file))
        assert len(pids) == 2
        output = site.output()
        assert len(lines(output, 'died with signal 9; restarting in 0.5 s')) == 1
        assert len(lines(output, 'database unavailable')) == 1, output
        assert len(lines(output, 'database back after')) == 1, output
        assert state(min(pids)) is None, 'the dead Redis was not reaped'
    finally:
        assert site.stop() == 0, site.output()
    assert wait_gone(pids), site.output()
    assert 'Traceback' not in site.output()


async def test_dead_postgres_is_restarted(checkout, tmp_path):
    site = start_site('aiohttp-postgres-pool-uvloop', checkout,
                      str(tmp_path / 'server.log'))
    pids = set()
    try:
        cluster = ManagedPostgres(os.path.join(checkout, 'var', 'postgres'))
        assert cluster.home == os.path.join(cluster.directory, 'cluster')
        pid_file = os.path.join(cluster.data, 'postmaster.pid')
        assert await burst(site.url + '/good', 4) == [200] * 4
        crashes = [
            lambda: os.kill(pid_in(pid_file), signal.SIGKILL),
            lambda: cluster._run('pg_ctl', 'stop', '-D', cluster.data,
                                 '-m', 'immediate')]
        for crashed, crash in enumerate(crashes, 1):
            pid = pid_in(pid_file)
            pids |= {pid} | children(pid)
            # Requests keep coming through the crash: 200 or 503, never 500.
            stop_polling = asyncio.Event()
            polled = asyncio.ensure_future(poll(site.url + '/good', stop_polling))
            await asyncio.sleep(0.2)
            crash()
            # Its backends may answer a moment: wait for the restart first.
            await asyncio.get_event_loop().run_in_executor(
                None, wait_lines, site, 'PostgreSQL restarted', crashed)
            stop_polling.set()
            statuses = await polled
            assert set(statuses) <= {200, 503}, statuses
            await wait_for(site.url + '/good', 200, timeout=10)
            assert await burst(site.url + '/', 10) == [200] * 10
            output = site.output()
            assert len(lines(output, 'PostgreSQL (pid %d)' % pid)) == 1, output
            assert len(lines(output, ' restarting in ')) == crashed, output
            assert len(lines(output, 'PostgreSQL restarted')) == crashed, output
        assert 'died with signal 9' in output
        pid = pid_in(pid_file)
        pids |= {pid} | children(pid)
    finally:
        assert site.stop() == 0, site.output()
    assert wait_gone(pids), (site.output(), [(p, state(p)) for p in pids])
    assert not cluster.running()
    assert 'Traceback' not in site.output()


async def poll(url, stop, concurrency=4):
    """Statuses of GETs of url, `concurrency` at a time, until stop is set."""
    statuses = []
    async with aiohttp.ClientSession() as session:
        async def one():
            while not stop.is_set():
                try:
                    async with session.get(url) as r:
                        await r.read()
                        statuses.append(r.status)
                except aiohttp.ClientError:
                    await asyncio.sleep(0.01)
        await asyncio.gather(*[one() for _ in range(concurrency)])
    return statuses


def hold_port(port, timeout=5):
    """A listening socket on port, once the dead database let it go."""
    def bound():
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(('127.0.0.1', port))
            s.listen()
            return s
        except OSError:
            s.close()
    return wait_until(bound, timeout, 0.01,
                      'port %d still taken after %s s' % (port, timeout))


@pytest.mark.parametrize('engine', ['sanic-tarantool-one',
                                    'sanic-postgres-pool', 'sanic-redis-pool'])
async def test_stop_while_restarts_fail_exits_0(checkout, tmp_path, engine):
    """Kill the database and take its port: restarts fail, backing off;
    SIGTERM still stops the server with status 0 and nothing left."""
    site = start_site(engine, checkout, str(tmp_path / 'server.log'))
    held, pids = None, set()
    try:
        assert await burst(site.url + '/good', 2) == [200] * 2
        if 'postgres' in engine:
            cluster = ManagedPostgres(os.path.join(checkout, 'var', 'postgres'))
            pid_file = os.path.join(cluster.data, 'postmaster.pid')
            port = cluster.port
        elif 'redis' in engine:
            pid_file = os.path.join(checkout, 'var', 'redis', 'redis.pid')
            port = int(site.env['STICKERS_REDIS_PORT'])
        else:
            pid_file = os.path.join(checkout, 'var', 'tarantool',
                                    'tarantool.pid')
            port = int(site.env['STICKERS_TARANTOOL_PORT'])
        pid = pid_in(pid_file)
        pids = {pid} | children(pid)
        os.kill(pid, signal.SIGKILL)
        held = hold_port(port)
        wait_lines(site, 'did not restart', 2)
        assert await burst(site.url + '/good', 1) == [503]
    finally:
        assert site.stop() == 0, site.output()
        if held:
            held.close()
    output = site.output()
    assert 'again in 1.0 s' in output and 'again in 2.0 s' in output, output
    assert len(lines(output, 'restarting in 0.5 s')) == 1, output
    assert wait_gone(pids), output


async def test_database_given_by_address_is_not_restarted(tmp_path):
    """Only reconnected to: whoever started it restarts it."""
    db = start_tarantool(str(tmp_path / 'db'))
    try:
        await load_small(AsynctntData(as_admin(tarantool_address(db))))
        site = ServerProcess('aiohttp-tarantool-one',
                             ['--tarantool', '%s:%d' % (db.host, db.port)],
                             str(tmp_path / 'server.log'))
        try:
            assert await burst(site.url + '/good', 2) == [200] * 2
            db.kill()
            time.sleep(2)   # several looks of a watcher, were there one
            assert not answers(db.host, db.port)
            assert await burst(site.url + '/good', 1) == [503]
        finally:
            assert site.stop() == 0, site.output()
        assert 'restart' not in site.output()
    finally:
        db.stop()

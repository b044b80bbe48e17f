"""Read replicas that server.py starts itself (--replicas 1), in a copy of
the checkout on ports of the test's own: reads come from the replica, a
killed replica costs no request, a killed primary leaves the reads served
and the writes refused, and nothing is lost or left behind."""
import asyncio
import os
import re
import signal
import time

import aiohttp
import pytest

from conftest import ServerProcess, free_port, until
from plugins.databases import loaded_tarantool
from runtime.databases.postgres import ManagedPostgres
from runtime.databases.postgres_standby import ManagedPostgresStandby
from runtime.databases.tarantool import ManagedReplica
from runtime.processes import bindable, command_line, state
from runtime.settings import REFRESH_ENVIRONMENT
from test_supervision import (children, hold_port, lines, pid_in, poll,
                              wait_gone, wait_lines)
from test_supervision import start_site as supervised_site
from test_local_databases import StandIn
from test_postgres_standby import settings  # noqa: F401

# Each test starts its own databases or server.py processes.
pytestmark = [pytest.mark.db, pytest.mark.server]

ENGINES = ['aiohttp-tarantool-one-uvloop', 'sanic-postgres-pool']
# A contender of the index page: its sticker id, then its pack's link.
CONTENDER = re.compile(r'data-sticker-id="(\d+)".*?href="/packs/([^"/]+)"',
                       re.S)
TOKENS = re.compile(r'name="win" value="([^"]+)">\s*'
                    r'<input type="hidden" name="lose" value="([^"]+)">')
LAG = 1.0    # the default bound of --replica-lag


def start_site(engine, checkout, log_path, *args, env=None):
    """server.py with one replica beside the primary it starts."""
    return supervised_site(engine, checkout, log_path, '--replicas', '1',
                           *args, env=env)


class Databases:
    """The pids of the site's primary and replica, from their files."""

    def __init__(self, engine, checkout, site):
        var = os.path.join(checkout, 'var')
        self.site = site
        self.postgres = '-postgres-' in engine
        if self.postgres:
            self.primary_dir = ManagedPostgres(os.path.join(var, 'postgres')).data
            self.replica_dir = ManagedPostgres(
                os.path.join(var, 'postgres-replica-1')).data
        else:
            self.primary_dir = os.path.join(var, 'tarantool')
            self.replica_dir = os.path.join(var, 'tarantool-replica-1')

    def _pid(self, directory):
        name = 'postmaster.pid' if self.postgres else 'tarantool.pid'
        return pid_in(os.path.join(directory, name))

    def primary(self):
        return self._pid(self.primary_dir)

    def replica(self):
        return self._pid(self.replica_dir)

    def primary_port(self):
        if self.postgres:
            with open(os.path.join(self.primary_dir, 'postmaster.pid')) as f:
                return int(f.read().split('\n')[3])
        return int(self.site.env['STICKERS_TARANTOOL_PORT'])

    def hold_replay(self):
        """Stop the PostgreSQL replica's replay of the primary's log (its
        startup process), which leaves its reads answered: its pid, or None
        on Tarantool."""
        if not self.postgres:
            return None
        for pid in children(self.replica()):
            if b': startup ' in b' '.join(command_line(pid)):
                os.kill(pid, signal.SIGSTOP)
                return pid
        raise AssertionError('no startup process under the replica')

    def release_replay(self, pid):
        if pid is not None:
            os.kill(pid, signal.SIGCONT)

    def everything(self):
        """Every process of both, now."""
        found = set()
        for pid in (self.primary(), self.replica()):
            found |= {pid} | children(pid)
        return found


async def ballot(session, url):
    """(winner's (sticker id, pack), its win and lose tokens) from the
    index page, or the status that refused it."""
    async with session.get(url + '/') as r:
        if r.status != 200:
            return r.status
        html = await r.text()
    (sticker, pack), tokens = CONTENDER.findall(html)[0], TOKENS.findall(html)[0]
    return (int(sticker), pack), tokens


async def cast(session, url, tokens):
    """The status of the vote."""
    async with session.post(url + '/', data=dict(zip(('win', 'lose'), tokens)),
                            allow_redirects=False) as r:
        await r.read()
        return r.status


async def vote(session, url):
    """One vote through the index page: 200, or the status that refused
    the page or the vote."""
    found = await ballot(session, url)
    if isinstance(found, int):
        return found
    return await cast(session, url, found[1])


async def votes_plus(session, url, sticker):
    async with session.get('%s/stickers/%s/%d' % (url, sticker[1],
                                                  sticker[0])) as r:
        assert r.status == 200, await r.text()
        return (await r.json())['votes_plus']


@pytest.mark.parametrize('engine', ENGINES)
async def test_a_vote_reads_from_the_replica_and_outlives_the_primary(
        checkout, tmp_path, engine):
    # No write of the site's own (its visits, every refresh) after the
    # vote: with asynchronous commits the replica might never get it, lag,
    # and leave the read set before the primary counts as down.
    site = start_site(engine, checkout, str(tmp_path / 'server.log'),
                      env={REFRESH_ENVIRONMENT: '3600'})
    dbs = Databases(engine, checkout, site)
    held, pids = None, set()
    jar = aiohttp.CookieJar(unsafe=True)
    try:
        output = wait_lines(site, 'is in the read set', 1)
        pids |= dbs.everything()
        async with aiohttp.ClientSession(cookie_jar=jar) as s:
            # A vote is in the replica's answers within the lag bound.
            found, tokens = await ballot(s, site.url)
            before = await votes_plus(s, site.url, found)
            # The voter sees it at once: their reads go to the primary a
            # moment (the cookie `fresh`), even from a replica in the read
            # set that has not replayed the vote (PostgreSQL's replay is
            # held; Tarantool's applier cannot be, apart from its reads).
            held_at, held_replay = time.monotonic(), dbs.hold_replay()
            try:
                assert await cast(s, site.url, tokens) == 200
                voted = time.monotonic()
                assert 'fresh' in {c.key for c in jar}
                seen = await votes_plus(s, site.url, found)
            finally:
                dbs.release_replay(held_replay)
                held_for = time.monotonic() - held_at
            assert seen == before + 1, (
                '%.2f s after the vote' % (time.monotonic() - voted),
                site.output()[-3000:])
            # The others' within the lag.
            async with aiohttp.ClientSession() as other:
                while await votes_plus(other, site.url, found) != before + 1:
                    assert time.monotonic() - voted < LAG, 'not within the lag'
                    await asyncio.sleep(0.01)
            # The primary dies and cannot come back: its port is taken.
            port = dbs.primary_port()
            os.kill(dbs.primary(), signal.SIGKILL)
            held = hold_port(port)
            await asyncio.get_event_loop().run_in_executor(
                None, wait_lines, site, 'primary does not answer', 1)
            # Reads from the replica; writes refused, never a 500.
            assert await votes_plus(s, site.url, found) == before + 1
            for page in ('/good', '/bad', '/stickers'):
                async with s.get(site.url + page) as r:
                    assert r.status == 200, (page, site.output()[-3000:])
            assert await vote(s, site.url) == 503
            held.close()
            held = None
            await asyncio.get_event_loop().run_in_executor(
                None, wait_lines, site, 'primary answers again', 1, 30)
            # The acknowledged vote is kept, and voting works again.
            assert await votes_plus(s, site.url, found) == before + 1
            async def voted():
                return await vote(s, site.url) == 200
            await until(voted, 10, 0.2, lambda: site.output()[-3000:])
        pids |= dbs.everything()
        output = site.output()
        assert len(lines(output, 'primary does not answer')) == 1, output
        # A hold near the lag bound (a slow host) may take the replica out.
        if held_for < LAG / 2:
            assert len(lines(output, 'out of the read set')) == 0, output
    finally:
        if held is not None:
            held.close()
        assert site.stop() == 0, site.output()
    assert wait_gone(pids), site.output()
    assert ' ERROR ' not in site.output() and 'Traceback' not in site.output()


@pytest.mark.parametrize('engine', ENGINES)
async def test_a_killed_replica_costs_no_request(checkout, tmp_path, engine):
    """Reads keep being answered while the replica is killed and restarted;
    it is back in the read set by itself."""
    site = start_site(engine, checkout, str(tmp_path / 'server.log'))
    dbs = Databases(engine, checkout, site)
    pids = set()
    try:
        wait_lines(site, 'is in the read set', 1)
        pids |= dbs.everything()
        stop = asyncio.Event()
        polled = [asyncio.ensure_future(poll(site.url + page, stop, 2))
                  for page in ('/good', '/bad')]
        await asyncio.sleep(0.3)
        os.kill(dbs.replica(), signal.SIGKILL)
        await asyncio.get_event_loop().run_in_executor(
            None, wait_lines, site, 'replica 1 restarted', 1, 60)
        await asyncio.get_event_loop().run_in_executor(
            None, wait_lines, site, 'is back in the read set', 1, 10)
        await asyncio.sleep(0.3)
        stop.set()
        statuses = sum(await asyncio.gather(*polled), [])
        assert statuses and set(statuses) == {200}, (
            sorted(set(statuses)), site.output()[-3000:])
        pids |= dbs.everything()
        output = site.output()
        assert len(lines(output, 'out of the read set')) == 1, output
        assert len(lines(output, 'replica 1 restarted')) == 1, output
    finally:
        assert site.stop() == 0, site.output()
    assert wait_gone(pids), site.output()
    assert 'Traceback' not in site.output()
    assert all(state(p) is None for p in pids)


@pytest.mark.parametrize('engine', ENGINES)
async def test_a_replica_s_port_held_by_another_process_is_left_to_it(
        checkout, tmp_path, engine):
    """Another process listens on the port a replica would take (the
    primary's + 10): it gets no password, and the replica serves the reads
    from a free port."""
    name = 'POSTGRES' if '-postgres-' in engine else 'TARANTOOL'
    for _ in range(20):     # a port whose +10 no other test holds
        port = free_port()
        try:
            stand_in = StandIn(port + 10, b'' if name == 'POSTGRES'
                               else StandIn.TARANTOOL)
            break
        except OSError:
            continue
    else:
        pytest.fail('no free port whose +10 is free too')
    try:
        site = start_site(engine, checkout, str(tmp_path / 'server.log'),
                          env={'STICKERS_%s_PORT' % name: str(port)})
        try:
            wait_lines(site, 'is in the read set', 1)
            async with aiohttp.ClientSession() as s:
                for page in ('/good', '/stickers'):
                    async with s.get(site.url + page) as r:
                        assert r.status == 200, site.output()[-3000:]
        finally:
            assert site.stop() == 0, site.output()
    finally:
        stand_in.close()
    assert 'port %d is taken' % (port + 10) in site.output(), site.output()
    assert b'sticker_' not in stand_in.received, stand_in.received
    assert 'Traceback' not in site.output()


async def test_workers_share_the_replicas(checkout, tmp_path):
    """--workers 2 --replicas 1: the parent and each worker read from the
    replica; SIGTERM stops them all, with the databases."""
    engine = 'aiohttp-tarantool-one'
    site = start_site(engine, checkout, str(tmp_path / 'server.log'),
                      '--workers', '2')
    dbs = Databases(engine, checkout, site)
    pids = set()
    try:
        output = wait_lines(site, 'is in the read set', 3)
        pids |= dbs.everything() | {site.process.pid} | children(
            site.process.pid)
        async with aiohttp.ClientSession() as s:
            for _ in range(20):
                async with s.get(site.url + '/good') as r:
                    assert r.status == 200
        # the primary's port + 10, or the one it moved to when that was
        # taken (the log says so)
        moved = re.search(r'Tarantool replica 1 will use (\d+)', output)
        port = int(moved.group(1)) if moved else dbs.primary_port() + 10
        assert len(lines(output, 'replica 1 (127.0.0.1:%d)' % port)) == 3, output
    finally:
        assert site.stop() == 0, site.output()
    assert wait_gone(pids), site.output()
    assert 'Traceback' not in site.output()


@pytest.mark.parametrize('args, message', [
    (['-e', 'aiohttp-tarantool-one', '--replicas', '9'], 'must be 0..8'),
    (['-e', 'aiohttp-tarantool-one', '--replicas', '-1'], 'must be 0..8'),
    (['-e', 'aiohttp-tarantool-one', '--replica-lag', '0'], 'above 0'),
    (['-e', 'aiohttp-redis-one', '--replicas', '1'], 'Redis engines'),
    (['-e', 'aiohttp-tarantool-one', '--tarantool', '127.0.0.1:3301',
      '--replicas', '1'], '--tarantool-replica'),
    (['-e', 'aiohttp-tarantool-one', '--tarantool-replica', '127.0.0.1:3311'],
     'needs --tarantool'),
    (['-e', 'aiohttp-postgres-pool', '--postgres-replica',
      'postgresql://a:b@127.0.0.1:5443/stickers'], 'needs --postgres'),
    (['-e', 'aiohttp-tarantool-one', '--tarantool', '127.0.0.1:3301',
      '--tarantool-replica', 'nowhere'], 'error:'),
])
def test_replica_options_that_cannot_be_served_exit_2(args, message):
    from test_server import run_server
    result = run_server(*args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr


@pytest.mark.parametrize('argv, message', [
    (['--replicas', '9'], 'must be 0..8'),
    (['--replicas', '1', '--tarantool', '127.0.0.1:3301'],
     'leave out --tarantool and --postgres'),
])
def test_bench_replica_options_that_cannot_be_served_exit_2(argv, message,
                                                            capsys):
    from bench import cli
    with pytest.raises(SystemExit) as e:
        cli.plan(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.bench
def test_bench_serves_each_engine_with_and_without_replicas():
    from bench import storage
    from bench import cli
    from bench.runner import Matrix
    from runtime.engines import BY_NAME
    plan = cli.plan(['--replicas', '2', '--engines',
                     'aiohttp-tarantool-one,aiohttp-postgres-pool,'
                     'aiohttp-redis-one', '--tarantool-engine', 'memtx,vinyl'])
    matrix = Matrix(plan)
    assert matrix.variants(BY_NAME['aiohttp-tarantool-one']) == [
        ('memtx', 0), ('memtx', 2), ('vinyl', 0), ('vinyl', 2)]
    assert matrix.variants(BY_NAME['aiohttp-postgres-pool']) == [
        (None, 0), (None, 2)]
    assert matrix.variants(BY_NAME['aiohttp-redis-one']) == [(None, 0)]
    name = storage.label('aiohttp-tarantool-one', 'vinyl', plan.storages, 2)
    assert name == 'aiohttp-tarantool-one (vinyl, 2 replicas)'
    assert storage.replicas_of(name) == 2 and storage.storage_of(name) == 'vinyl'


def unheld(replica):
    """The replica, on a port nothing holds now: the site is given its
    address before it starts, and a port held then would move it (a
    listener that never answers there holds the site's tries)."""
    if not bindable(replica.host, replica.port):
        replica.port = free_port()
    return replica


@pytest.mark.parametrize('engine', ['aiohttp-tarantool-one-uvloop',
                                    'aiohttp-postgres-pool-uvloop'])
async def test_a_replica_down_at_start_joins_later(request, tmp_path, engine):
    """--workers 2 with a replica address that nothing answers yet: the
    site starts and serves from the primary; once the replica is up, the
    parent and each worker read from it, having said so once."""
    if '-postgres-' in engine:
        primary = request.getfixturevalue('postgres')
        replica = unheld(ManagedPostgresStandby(
            primary, 1, settings=request.getfixturevalue('settings')))
        args = ['--postgres', primary.dsn, '--postgres-replica', replica.dsn]
    else:
        primary = loaded_tarantool(str(tmp_path / 'primary'), 'memtx')
        request.addfinalizer(primary.stop)
        replica = unheld(ManagedReplica(primary, 1))
        args = ['--tarantool', 'sticker_app:sticker_app@127.0.0.1:%d'
                % primary.port, '--tarantool-replica',
                'sticker_app:sticker_app@127.0.0.1:%d' % replica.port]
    site = ServerProcess(engine, args + ['--workers', '2'],
                         str(tmp_path / 'server.log'))
    try:
        async with aiohttp.ClientSession() as s:
            for _ in range(5):
                async with s.get(site.url + '/good') as r:
                    assert r.status == 200, site.output()[-3000:]
        # Each process says so once, the last maybe after its first page.
        await asyncio.get_event_loop().run_in_executor(
            None, wait_lines, site, 'did not start', 3, 20)
        assert not lines(site.output(), 'in the read set')
        await asyncio.get_event_loop().run_in_executor(None, replica.start)
        await asyncio.get_event_loop().run_in_executor(
            None, wait_lines, site, 'is in the read set', 3, 40)
        async with aiohttp.ClientSession() as s:
            async with s.get(site.url + '/good') as r:
                assert r.status == 200
        output = site.output()
        assert len(lines(output, 'did not start')) == 3, output
    finally:
        assert site.stop() == 0, site.output()
        replica.stop()
    assert 'Traceback' not in site.output()

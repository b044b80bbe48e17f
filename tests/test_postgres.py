"""The PostgreSQL side: the local cluster, the schema at start, outages."""
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

import dataset
from conftest import (TEST_PACKS, ServerProcess, free_port, load_small,
                      remove_postgres, start_postgres, until)
from data_interface import DataUnavailable, Visit
from data_interface.postgres.asyncpg_data import (RANKED, PostgresData,
                                                  apply_schema)
from data_interface.postgres.fifo import FifoGate
from runtime.databases.postgres import ManagedPostgres
from runtime.processes import children
from test_server import burst


@pytest.fixture(params=['asyncpg', pytest.param(
    'psycopg', marks=pytest.mark.needs('psycopg_pool'))])   # CPython 3.10+
def driver(request):
    """The DataInterface class of each PostgreSQL driver."""
    if request.param == 'psycopg':
        from data_interface.postgres.psycopg_data import PsycopgData
        return PsycopgData
    return PostgresData


@pytest.fixture(scope='module')
def cluster():
    """(a fresh cluster of its own, the port it was told to use but found
    taken by something that is not PostgreSQL)."""
    with socket.socket() as taken:
        taken.bind(('127.0.0.1', 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = ManagedPostgres(tempfile.mkdtemp(prefix='stickers-test-pg-'),
                                 port=port)
        try:
            server.start()
        except BaseException:
            remove_postgres(server)
            raise
    yield server, port
    remove_postgres(server)


def test_taken_port_is_replaced_and_found_again(cluster):
    """Another object for the running cluster, with the same port set,
    connects where it runs (its postmaster.pid says)."""
    server, taken = cluster
    assert server.port != taken
    again = ManagedPostgres(server.directory, port=taken)
    assert again.port == server.port
    assert again.running()


@pytest.mark.db
@pytest.mark.own_database
async def test_first_starts_at_once_apply_the_schema_once(driver):
    server = start_postgres()    # empty: each driver's own
    datas = [driver(server.dsn, min_size=1) for _ in range(4)]
    try:
        await asyncio.gather(*[d.start() for d in datas])
        stats = await datas[0].stats()
        assert (stats.packs, stats.stickers, stats.views) == (0, 0, 0)
        async with datas[0].acquire() as conn:
            assert await apply_schema(conn) is False
            assert not await conn.fetchval(
                'SELECT rolsuper OR rolcreaterole OR rolcreatedb FROM pg_roles'
                ' WHERE rolname = current_user')
        await load_small(PostgresData(server.owner_dsn))
        assert (await datas[1].stats()).stickers > 0
    finally:
        for d in datas:
            await d.close()
        remove_postgres(server)


async def test_start_without_database_is_unavailable(driver):
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    data = driver('postgresql://sticker_app:x@127.0.0.1:%d/stickers'
                        % port, timeout=1)
    with pytest.raises(DataUnavailable):
        await data.start()


async def test_a_listener_that_never_answers_is_named_unavailable(driver):
    """A port that accepts connections and says nothing: the start gives up
    after its timeout, and the error says why."""
    with socket.socket() as silent:
        silent.bind(('127.0.0.1', free_port()))
        silent.listen()
        data = driver('postgresql://sticker_app:x@127.0.0.1:%d/stickers'
                      % silent.getsockname()[1], timeout=0.5)
        with pytest.raises(DataUnavailable) as failed:
            await data.start()
    assert str(failed.value).startswith('cannot connect to PostgreSQL at ')
    assert str(failed.value).endswith(': no answer within 0.5 s'), \
        str(failed.value)


async def wait_for(url, status, timeout=10):
    async def answered():
        return await burst(url, 1) == [status]
    await until(answered, timeout, 0.2, '%s did not answer %d' % (url, status))


@pytest.mark.parametrize('engine, mode', [
    ('aiohttp-postgres-pool-uvloop', 'fast'),
    ('sanic-postgres-pool', 'immediate'),
])
async def test_pool_recovers_after_postgres_restarts(cluster, tmp_path,
                                                     engine, mode):
    """Stop PostgreSQL under a running engine: 503 at once while it is
    gone, pages again once it is back."""
    server, _ = cluster
    await load_small(PostgresData(server.owner_dsn))
    site = ServerProcess(engine, ['--postgres', server.dsn],
                         str(tmp_path / 'server.log'))
    try:
        assert await burst(site.url + '/good', 8) == [200] * 8
        server.stop(mode)
        started = time.monotonic()
        assert await burst(site.url + '/good', 3) == [503] * 3
        assert await burst(site.url + '/', 3) == [503] * 3
        assert time.monotonic() - started < 5
        assert await burst(site.url + '/ugly', 1) == [200]
        server.start()
        await wait_for(site.url + '/good', 200, timeout=5)
        assert await burst(site.url + '/', 20) == [200] * 20
    finally:
        assert site.stop() == 0, site.output()
        if not server.running():
            server.start()


async def _leave(port):
    """Ask for /good and close the connection before the answer."""
    reader, writer = await asyncio.open_connection('127.0.0.1', port)
    writer.write(b'GET /good HTTP/1.1\r\nHost: x\r\n\r\n')
    await writer.drain()
    await asyncio.sleep(0.001)
    writer.transport.abort()


@pytest.mark.parametrize('engine', ['aiohttp-postgres-pool-uvloop',
                                    'sanic-postgres-pool-uvloop'])
async def test_visitors_who_leave_mid_page_cost_no_connection(
        cluster, tmp_path, engine):
    """Clients that close while their page waits on the database (sanic
    then cancels the page) leave the server's connections open and in use:
    its PostgreSQL backends before are all there after."""
    server, _ = cluster
    await load_small(PostgresData(server.owner_dsn))
    site = ServerProcess(engine, ['--postgres', server.dsn],
                         str(tmp_path / 'server.log'))
    admin = PostgresData(server.dsn, min_size=1, max_size=1)
    backends = ("SELECT array_agg(pid) FROM pg_stat_activity WHERE"
                " application_name = 'stickers' AND pid <> pg_backend_pid()")
    try:
        assert await burst(site.url + '/good', 40) == [200] * 40
        await admin.start()
        before = set(await admin._query('fetchval', backends))
        for _ in range(10):
            await asyncio.gather(*[_leave(site.port) for _ in range(40)])
        assert await burst(site.url + '/good', 8) == [200] * 8
        after = set(await admin._query('fetchval', backends))
        assert before <= after, (before - after)
    finally:
        await admin.close()
        assert site.stop() == 0, site.output()


@pytest.mark.db
@pytest.mark.server
async def test_local_cluster_is_made_loaded_kept_and_stopped(monkeypatch):
    """databases.Databases with no DSN: a cluster under var/postgres (here a
    temporary var/, no port set, a free port remembered as if chosen
    before), loaded once, stopped on stop(), found again with its data."""
    from runtime import databases
    from runtime import engines
    from runtime import settings
    root = tempfile.mkdtemp(prefix='stickers-test-var-')
    s = settings.replace(settings.DEFAULTS, root=root, packs=TEST_PACKS)
    var = s.var
    os.makedirs(os.path.join(var, 'postgres'))
    os.chmod(root, 0o755)   # as a checkout is
    os.chmod(var, 0o755)   # as a checkout's var/ is
    with open(os.path.join(var, 'postgres', 'port'), 'w') as f:
        f.write(str(free_port()))
    engine = engines.BY_NAME['aiohttp-postgres-pool']
    server = ManagedPostgres(os.path.join(var, 'postgres'))
    try:
        for loaded in (True, False):
            dbs = databases.Databases(s)
            data = await dbs.open(engine)
            assert [type(m) for m in dbs.managed] == [ManagedPostgres]
            assert dbs.postgres_dsn == server.dsn
            try:
                stats = await data.stats()
                assert stats.stickers == len(
                    dataset.generate(packs=TEST_PACKS).stickers)
                assert (stats.views == 0) == loaded
                await data.record_visits(
                    [Visit(str(uuid.uuid4()), 'ip', 'ua')])
            finally:
                await data.close()
            dbs.stop()
            assert not server.running()
    finally:
        remove_postgres(server)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize('best', [True, False])
async def test_ranked_stickers_walk_the_rating_index(postgres, best, driver):
    """The one plan the ranked lists' statements keep."""
    data = driver(postgres.dsn, min_size=1)
    await data.start()
    try:
        async with data.acquire() as conn:
            plan = await conn.fetch('EXPLAIN ' + RANKED[best] % 9)
    finally:
        await data.close()
    plan = '\n'.join(row[0] for row in plan)
    assert 'Index Scan' in plan and 'stickers_rating' in plan, plan
    assert 'Sort' not in plan, plan


async def test_a_flood_is_served_in_the_order_it_came(postgres, driver):
    """Callers arriving faster than a pool of two serves them reach the
    database in the order they came: no one waits while later ones pass.
    A stall of the machine can hold one server process past its turn while
    the other serves two more, so the flood may be tried three times; a
    pool that lets newcomers pass fails every time."""
    data = driver(postgres.dsn, min_size=2, max_size=2)
    await data.start()

    async def caller(i):
        await asyncio.sleep(i * 0.001)
        return await data._query(
            'fetchval', 'SELECT clock_timestamp() FROM pg_sleep(0.004)')
    tries = []
    try:
        for _ in range(3):
            began = await asyncio.gather(*[caller(i) for i in range(120)])
            # The two connections run side by side: i and i+1 may swap.
            tries.append([i for i in range(len(began) - 2)
                          if began[i] > began[i + 2]])
            if not tries[-1]:
                break
    finally:
        await data.close()
    assert not tries[-1], 'passed, in each try: %s' % tries


async def test_the_gate_takes_turns_times_out_and_passes_places_on():
    gate = FifoGate(1)
    order = []

    async def visit(name, hold):
        async with gate.enter(1.0):
            order.append(name)
            await asyncio.sleep(hold)
    first = asyncio.ensure_future(visit('first', 0.05))
    await asyncio.sleep(0)
    waiting = [asyncio.ensure_future(visit(n, 0)) for n in ('a', 'b', 'c')]
    await asyncio.sleep(0.01)
    cancelled = asyncio.ensure_future(visit('cancelled', 0))
    late = asyncio.ensure_future(visit('late', 0))
    await asyncio.sleep(0.01)
    cancelled.cancel()
    await asyncio.gather(first, late, *waiting)
    assert order == ['first', 'a', 'b', 'c', 'late']
    assert gate.free == 1

    async with gate.enter(1.0):
        with pytest.raises(asyncio.TimeoutError):
            async with gate.enter(0.02):
                pass
    assert gate.free == 1

    # Given a place, then cancelled before it ran: the place goes on.
    await gate.wait(1.0)
    given = asyncio.ensure_future(gate.wait(1.0))
    next_one = asyncio.ensure_future(gate.wait(1.0))
    await asyncio.sleep(0)
    gate.leave()
    given.cancel()
    await asyncio.wait_for(next_one, 0.5)
    assert given.cancelled() and gate.free == 0 and not gate.waiters


# Also in .venv37: its asyncpg does not wait for a cancel by itself.
@pytest.mark.legacy
async def test_the_pool_keeps_good_connections_and_drops_failed_ones(
        postgres, driver):
    """A connection comes back after a query, an error the server answered,
    or a timeout or cancelled caller once the server cancelled its query;
    after a lost socket the next caller gets a new one. Never more than
    max_size are open, and none after close()."""
    data = driver(postgres.dsn, min_size=1, max_size=2, timeout=0.5)
    await data.start()
    pid = 'SELECT pg_backend_pid()'
    try:
        first = await data._query('fetchval', pid)
        assert {await data._query('fetchval', pid)
                for _ in range(20)} == {first}
        # Answered errors keep the connection.
        with pytest.raises(DataUnavailable, match='bad argument'):
            await data._query('fetchval', "SELECT refuse('x')")
        assert await data._query('fetchval', pid) == first

        # Ten at once through a pool of two: two backends, no more.
        many = await asyncio.gather(*[data._query(
            'fetchval', 'SELECT pg_backend_pid() FROM pg_sleep(0.02)')
            for _ in range(10)])
        assert first in many and len(set(many)) == 2
        pair = set(many)

        # A query past the timeout, and a caller cancelled mid-query: the
        # server cancels their queries and the connections serve again.
        with pytest.raises(DataUnavailable, match='Timeout'):
            await data._query('fetchval', 'SELECT pg_sleep(5)')
        task = asyncio.ensure_future(
            data._query('fetchval', 'SELECT pg_sleep(5)'))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        now = set(await asyncio.gather(*[data._query(
            'fetchval', 'SELECT pg_backend_pid() FROM pg_sleep(0.02)')
            for _ in range(4)]))
        assert now == pair
        # Callers cancelled at any moment of their query, or just after it
        # (a client that left): the same connections serve on.
        for step in range(40):
            task = asyncio.ensure_future(
                data._query('fetchval', 'SELECT pg_sleep(0.01)'))
            await asyncio.sleep(step * 0.0005)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        now = set(await asyncio.gather(*[data._query(
            'fetchval', 'SELECT pg_backend_pid() FROM pg_sleep(0.02)')
            for _ in range(4)]))
        assert now == pair
        assert await data._query(
            'fetchval', "SELECT count(*) FROM pg_stat_activity WHERE"
                        " query LIKE '%pg_sleep(5)%' AND state = 'active'"
                        " AND pid <> pg_backend_pid()") == 0

        # The server ends a connection while it is idle: the next callers
        # are served (at most one of them gets DataUnavailable).
        async with data.acquire() as conn:
            victim = await conn.fetchval(pid)
        admin = PostgresData(postgres.dsn, min_size=1, max_size=1)
        await admin.start()
        try:
            assert await admin._query(
                'fetchval', 'SELECT pg_terminate_backend($1)', victim)
            await asyncio.sleep(0.1)
            failures = 0
            for _ in range(4):
                try:
                    assert await data._query('fetchval', pid) != victim
                except DataUnavailable:
                    failures += 1
            assert failures <= 1
            opened = set(await asyncio.gather(*[data._query(
                'fetchval', 'SELECT pg_backend_pid() FROM pg_sleep(0.02)')
                for _ in range(4)]))
            await data.close()
            await asyncio.sleep(0.1)
            left = await admin._query(
                'fetchval', 'SELECT count(*) FROM pg_stat_activity'
                            ' WHERE pid = ANY($1::int[])', list(opened))
            assert left == 0
        finally:
            await admin.close()
    finally:
        await data.close()


async def served(data, within):
    """Seconds until `data` answers again; fails after `within`."""
    started = time.monotonic()
    while True:
        try:
            await data.stats()
            return time.monotonic() - started
        except DataUnavailable:
            assert time.monotonic() - started < within, 'not served again'
            await asyncio.sleep(0.1)


async def unavailable_in_time(data, calls, within):
    """Each of `calls` calls in turn is DataUnavailable within `within`
    seconds."""
    for _ in range(calls):
        started = time.monotonic()
        with pytest.raises(DataUnavailable):
            await data.stats()
        assert time.monotonic() - started < within


async def test_a_crashed_postgres_is_unavailable_then_serves_again(cluster,
                                                                  driver):
    """PostgreSQL gone under a pool (an immediate shutdown: as a crash):
    each call is DataUnavailable at once (its connects are refused, no use
    waiting out the timeout), and once it is back the same pool serves
    again by itself, every connection of it."""
    server, _ = cluster
    data = driver(server.dsn, min_size=2, max_size=4, timeout=1.0)
    await data.start()
    try:
        await asyncio.gather(*[data.stats() for _ in range(4)])
        server.stop('immediate')
        try:
            await unavailable_in_time(data, 6, data.timeout / 2)
        finally:
            server.start()
        print('served again in %.2f s' % await served(data, 10))
        await asyncio.gather(*[data.stats() for _ in range(8)])
    finally:
        await data.close()


async def test_a_stalled_postgres_is_unavailable_then_serves_again(cluster,
                                                                  driver):
    """PostgreSQL stopped (SIGSTOP) under a pool, its connections then
    silent: each call is DataUnavailable within the timeout, more calls than
    the pool holds too; once it runs again the pool serves by itself."""
    server, _ = cluster
    data = driver(server.dsn, min_size=2, max_size=4, timeout=1.0)
    await data.start()
    try:
        await asyncio.gather(*[data.stats() for _ in range(4)])
        postmaster = server.postmaster()
        family = [postmaster] + children(postmaster)    # with the backends
        for pid in family:
            os.kill(pid, signal.SIGSTOP)
        try:
            await unavailable_in_time(data, 6, data.timeout + 0.5)
        finally:
            for pid in family:
                os.kill(pid, signal.SIGCONT)
        print('served again in %.2f s' % await served(data, 15))
        await asyncio.gather(*[data.stats() for _ in range(8)])
    finally:
        await data.close()


async def stalled_under_django(dsn, postmaster):
    """The test above on the Django ORM driver (its tables' owner at
    `dsn`), run in a process of its own: Django has one database per
    process."""
    from data_interface.django_orm.data import DjangoData
    data = DjangoData(dsn, min_size=2, max_size=4, timeout=1.0)
    await data.start()
    try:
        await asyncio.gather(*[data.stats() for _ in range(4)])
        family = [postmaster] + children(postmaster)
        for pid in family:
            os.kill(pid, signal.SIGSTOP)
        try:
            # At once, as many as the pool holds and more.
            calls = [data.stats() for _ in range(6)]
            started = time.monotonic()
            results = await asyncio.gather(*calls, return_exceptions=True)
            assert all(isinstance(r, DataUnavailable) for r in results), \
                results
            assert time.monotonic() - started < data.timeout + 0.5
            await unavailable_in_time(data, 6, data.timeout + 0.5)
        finally:
            for pid in family:
                os.kill(pid, signal.SIGCONT)
        print('served again in %.2f s' % await served(data, 15))
        await asyncio.gather(*[data.stats() for _ in range(8)])
    finally:
        await data.close()


@pytest.mark.needs('django')
def test_a_stalled_postgres_is_unavailable_then_serves_again_on_django(
        cluster):
    server, _ = cluster
    postmaster = server.postmaster()
    tests = os.path.dirname(os.path.abspath(__file__))
    try:
        done = subprocess.run(
            [sys.executable, '-c', 'import asyncio, sys; '
             'sys.path[:0] = [".", "tests"]; import test_postgres; '
             'asyncio.run(test_postgres.stalled_under_django('
             'sys.argv[1], int(sys.argv[2])))',
             server.owner_dsn, str(postmaster)],
            cwd=os.path.dirname(tests), capture_output=True, text=True,
            timeout=60)
    finally:    # a process killed while it held the cluster stopped
        for pid in [postmaster] + children(postmaster):
            os.kill(pid, signal.SIGCONT)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    print(done.stdout)


async def test_after_a_restart_no_closed_connection_is_handed_out(cluster,
                                                                  driver):
    """PostgreSQL restarted while the pool is idle (an upgrade, say): the
    connections it closed are not handed out to fail, the next calls are
    all served by new ones."""
    server, _ = cluster
    data = driver(server.dsn, min_size=4, max_size=4, timeout=2.0)
    await data.start()
    try:
        await asyncio.gather(*[data.stats() for _ in range(4)])
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, server.stop, 'fast')
        await loop.run_in_executor(None, server.start)
        results = await asyncio.gather(*[data.stats() for _ in range(4)],
                                       return_exceptions=True)
        assert [r for r in results if isinstance(r, Exception)] == []
    finally:
        await data.close()

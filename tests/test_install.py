"""Accounts with passwords of their own, and a checkout anywhere: the local
databases' passwords, app.lua's refusal to listen outside with default
ones, PostgreSQL's two roles, and a cluster for a checkout under /root."""
import os
import shutil
import stat
import subprocess
import tempfile

import asyncpg
import pytest

from conftest import ServerProcess, free_port
from runtime.databases.postgres import ELSEWHERE, ManagedPostgres
from runtime.databases.tarantool import INSTANCE_LUA, ManagedTarantool
from test_server import burst
from plugins.checkouts import copy_checkout
from test_supervision import lines

# Each test starts its own databases or server.py processes.
pytestmark = [pytest.mark.db, pytest.mark.server]


def run_app_lua(tmp_path, listen, **env):
    result = subprocess.run(
        ['tarantool', INSTANCE_LUA], cwd=str(tmp_path), timeout=30,
        env=dict(os.environ, TNT_DIR=str(tmp_path), TNT_LISTEN=listen,
                 TNT_LOG=str(tmp_path / 'tnt.log'), **env),
        stdin=subprocess.DEVNULL, capture_output=True)
    return result.returncode, (tmp_path / 'tnt.log').read_text()


@pytest.mark.parametrize('listen, env', [
    ('%d', {'TNT_APP_PASSWORD': 'sticker_app',
            'TNT_ADMIN_PASSWORD': 'sticker_admin'}),
    ('0.0.0.0:%d', {'TNT_APP_PASSWORD': 'long-secret',
                    'TNT_ADMIN_PASSWORD': 'sticker_admin'}),
    ('0.0.0.0:%d', {'TNT_APP_PASSWORD': 'sticker_app',
                    'TNT_ADMIN_PASSWORD': 'long-secret'}),
])
def test_app_lua_refuses_to_listen_outside_with_default_passwords(
        tmp_path, listen, env):
    status, log = run_app_lua(tmp_path, listen % free_port(), **env)
    assert status != 0
    assert 'refusing to listen' in log and 'account name as password' in log
    assert 'instance ready' not in log


async def test_managed_tarantool_has_passwords_of_its_own(tmp_path):
    import asynctnt
    server = ManagedTarantool(str(tmp_path / 'tnt'), port=free_port())
    server.start()
    try:
        for user in ('sticker_app', 'sticker_admin'):
            path = tmp_path / 'tnt' / (user + '.password')
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert len(path.read_text().strip()) >= 24
        app = server.address
        assert app.password == (tmp_path / 'tnt' / 'sticker_app.password'
                                ).read_text().strip()
        conn = asynctnt.Connection(host=app.host, port=app.port,
                                   username=app.user, password=app.password)
        await conn.connect()
        assert len((await conn.call('site_stats', [])).body) == 1
        await conn.disconnect()
        conn = asynctnt.Connection(host=app.host, port=app.port,
                                   username=app.user, password=app.user)
        with pytest.raises(Exception, match='(?i)incorrect password|denied'):
            await conn.connect()
        await conn.disconnect()
    finally:
        server.stop()


@pytest.fixture
async def app_connection(postgres):
    conn = await asyncpg.connect(postgres.dsn)
    yield conn
    await conn.close()


@pytest.mark.parametrize('forbidden', [
    'CREATE TABLE x (a int)',
    'CREATE SCHEMA x',
    'CREATE FUNCTION x() RETURNS int LANGUAGE sql AS $$SELECT 1$$',
    "SELECT load_stickers('[]', '[]')",
    "UPDATE stickers SET data = jsonb_set(data, '{3}', '1000')",
    'DELETE FROM sessions',
    'SELECT * FROM ballots',
    'TRUNCATE server',
    'DROP TABLE stickers',
])
async def test_postgres_app_role_may_only_call_site_functions(
        app_connection, forbidden):
    with pytest.raises(asyncpg.exceptions.PostgresError,
                       match='permission denied|must be owner'):
        await app_connection.execute(forbidden)


async def test_postgres_owner_owns_and_app_reads(postgres, app_connection):
    assert await app_connection.fetchval('SELECT count(*) FROM stickers') > 0
    assert await app_connection.fetchval(
        'SELECT (site_stats())[2]') > 0
    owner = await app_connection.fetchval(
        'SELECT pg_get_userbyid(datdba) FROM pg_database '
        "WHERE datname = current_database()")
    assert owner == 'sticker_owner'
    for role in ('sticker_app', 'sticker_owner'):
        path = os.path.join(postgres.directory, role + '.password')
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


@pytest.mark.skipif(os.geteuid() != 0, reason='needs root')
async def test_postgres_cluster_of_a_checkout_only_root_can_enter(tmp_path):
    """As for a clone in /root: the postgres user cannot enter the
    checkout, so the cluster lives under /var/lib/stickers-postgres."""
    parent = tempfile.mkdtemp(prefix='stickers-test-root-')   # mode 0700
    assert stat.S_IMODE(os.stat(parent).st_mode) == 0o700
    checkout = copy_checkout(os.path.join(parent, 'stickers'))
    cluster = ManagedPostgres(os.path.join(checkout, 'var', 'postgres'))
    assert cluster.home.startswith(ELSEWHERE + '/stickers-')
    assert not os.path.exists(cluster.home)
    try:
        site = ServerProcess('aiohttp-postgres-pool', [],
                             str(tmp_path / 'server.log'), root=checkout,
                             env={'STICKERS_POSTGRES_PORT': str(free_port())})
        try:
            assert await burst(site.url + '/good', 4) == [200] * 4
            assert await burst(site.url + '/', 4) == [200] * 4
        finally:
            assert site.stop() == 0, site.output()
        output = site.output()
        assert len(lines(output, 'the cluster lives in ' + cluster.home)) == 1
        assert not cluster.running()
        # Another checkout's cluster is another directory.
        other = ManagedPostgres(os.path.join(parent, 'other', 'var',
                                             'postgres'))
        assert other.home != cluster.home
    finally:
        shutil.rmtree(parent, ignore_errors=True)
        shutil.rmtree(cluster.home, ignore_errors=True)
        try:
            os.rmdir(ELSEWHERE)   # if this test made it
        except OSError:
            pass

"""The local databases server.py starts and keeps under var/: no password on
a command line, files only their account may read, no database left behind
by a killed server or a signal during start, orphans adopted, root never
writing through the postgres account's symbolic links, a server run by an
unprivileged user, no default or empty Tarantool password, a PostgreSQL
port set winning over the one remembered, and a listener on another
address of the port left alone."""
import asyncio
import os
import pwd
import secrets
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import asyncpg
import pytest

from conftest import (TEST_PACKS, ServerProcess, free_port, load_small,
                      remove_postgres, start_tarantool, tarantool_address,
                      until, wait_until)
from data_interface import Visit
from data_interface.address import as_admin, parse_tarantool
from plugins.checkouts import processes_of
from runtime.databases import files as private
from runtime.databases.files import secret
from runtime.databases.postgres import ManagedPostgres
from runtime.databases.table import BY_NAME
from runtime.databases.tarantool import INSTANCE_LUA, ManagedTarantool
from runtime.processes import answers, state
from runtime.settings import DEFAULTS, from_environment, replace
from test_postgres import wait_for
from test_server import burst, run_server
from test_supervision import lines, pid_in, ports, wait_lines

# Each test starts its own databases or server.py processes.
pytestmark = [pytest.mark.db, pytest.mark.server]

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason='needs root')


def wait_ended(pids, timeout=30):
    """True once none of pids runs (a zombie nobody reaps has ended)."""
    try:
        return wait_until(lambda: all(state(p) in (None, 'Z') for p in pids),
                          timeout)
    except AssertionError:
        return False


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


class CommandLines(threading.Thread):
    """Every process command line seen while it runs (polled back to back:
    the main thread waits on a child meanwhile)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.seen = set()
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            for entry in filter(str.isdigit, os.listdir('/proc')):
                try:
                    with open('/proc/%s/cmdline' % entry, 'rb') as f:
                        self.seen.add((entry, f.read()))
                except OSError:
                    pass

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.join()


async def test_no_password_on_a_command_line(tmp_path):
    """Tarantool gets its passwords in its environment (only its account
    may read it); psql gets the roles' on its stdin, at a start, a restart
    and when the cluster is found running."""
    pg = ManagedPostgres(tempfile.mkdtemp(prefix='stickers-test-pg-'),
                         port=free_port())
    tnt = ManagedTarantool(str(tmp_path / 'tnt'), port=free_port())
    # Quotes and backslashes reach the role intact, not psql's parser.
    odd = "it's \\' a :'pass'\\\\word; \\gexec"
    try:
        with CommandLines() as seen:
            tnt.start()
            pg.start()
            pg.stop()
            pg.start()
            found = ManagedPostgres(pg.directory)
            assert found.running()
            found.prepare()
            passwords = [pg.password('sticker_app'),
                         pg.password('sticker_owner'),
                         private.read(os.path.join(
                             pg.home, 'superuser.password')).strip(),
                         tnt.address.password, tnt.admin_address.password]
            private.write(os.path.join(pg.directory, 'sticker_app.password'),
                          odd)
            pg.prepare()
        conn = await asyncpg.connect(host=pg.host, port=pg.port,
                                     user='sticker_app', password=odd,
                                     database='stickers')
        await conn.close()
        assert all(len(p) >= 24 for p in passwords)
        passwords.append(odd)
        assert sum(b'/psql\0' in c for _, c in seen.seen) >= 2, seen.seen
        assert any(b'instance.lua' in c for _, c in seen.seen)
        for password in passwords:
            assert not [c for _, c in seen.seen if password.encode() in c]
    finally:
        tnt.stop()
        remove_postgres(pg)


async def test_local_databases_keep_their_files_private(tmp_path):
    """Snapshots, logs and the cluster hold sessions, addresses and ballots:
    their directories 0700 and files 0600, older ones tightened at start."""
    directory = str(tmp_path / 'tnt')
    os.makedirs(directory, mode=0o755)
    os.chmod(directory, 0o755)
    with open(os.path.join(directory, 'tarantool.log'), 'w') as f:
        f.write('an older log\n')
    os.chmod(os.path.join(directory, 'tarantool.log'), 0o644)
    for run in range(2):   # the second start makes a snapshot
        tnt = start_tarantool(directory, TNT_CHECKPOINT_WAL_THRESHOLD='1024')
        try:
            if run == 0:
                admin = as_admin(tarantool_address(tnt))
                from data_interface.tarantool.asynctnt_data import AsynctntData
                await load_small(AsynctntData(admin))
                await vote(AsynctntData(tarantool_address(tnt)))
        finally:
            tnt.stop()
    names = os.listdir(directory)
    assert len([n for n in names if n.endswith('.snap')]) >= 2, names
    assert mode(directory) == 0o700
    assert {n: mode(os.path.join(directory, n)) for n in names} == {
        n: 0o600 for n in names}

    pg = ManagedPostgres(tempfile.mkdtemp(prefix='stickers-test-pg-'),
                         port=free_port())
    try:
        os.chmod(pg.directory, 0o755)
        pg.start()
        from data_interface.postgres.asyncpg_data import PostgresData
        await load_small(PostgresData(pg.owner_dsn))
        await vote(PostgresData(pg.dsn, min_size=1))
        if os.geteuid() == 0:   # the postgres account passes through
            assert mode(pg.directory) == 0o710
            assert os.stat(pg.directory).st_gid == pwd.getpwnam(
                'postgres').pw_gid
        else:
            assert mode(pg.directory) == 0o700
        for path in (pg.home, pg.data):
            assert mode(path) == 0o700, path
        for name in os.listdir(pg.directory):
            if name != 'cluster':
                assert mode(os.path.join(pg.directory, name)) == 0o600, name
        for name in ('postgres.log', 'superuser.password'):
            assert mode(os.path.join(pg.home, name)) == 0o600, name
    finally:
        remove_postgres(pg)


async def vote(data):
    """One visit and one vote."""
    await data.start()
    try:
        session = str(uuid.uuid4())
        await data.record_visits([Visit(session, '203.0.113.9', 'a browser')])
        tokens = (secrets.token_urlsafe(16), secrets.token_urlsafe(16))
        await data.sticker_pair(session, tokens, 60)
        assert await data.cast_vote(session, *tokens) == 'ok'
    finally:
        await data.close()


def postmaster_of(bare_checkout):
    return ManagedPostgres(os.path.join(bare_checkout, 'var', 'postgres')
                           ).postmaster()


def tarantool_of(bare_checkout):
    return pid_in(os.path.join(bare_checkout, 'var', 'tarantool',
                               'tarantool.pid'))


def redis_of(bare_checkout):
    return pid_in(os.path.join(bare_checkout, 'var', 'redis', 'redis.pid'))


def test_a_killed_server_takes_its_databases_along(bare_checkout, tmp_path):
    env = ports()
    sites = [ServerProcess(engine, [], str(tmp_path / (engine + '.log')),
                           root=bare_checkout, env=env)
             for engine in ('aiohttp-tarantool-one', 'aiohttp-postgres-pool',
                            'aiohttp-redis-one')]
    pids = [tarantool_of(bare_checkout), postmaster_of(bare_checkout),
            redis_of(bare_checkout)]
    for site in sites:
        site.stop(signal.SIGKILL)
    assert wait_ended(pids), [(p, state(p)) for p in pids]
    assert wait_ended(processes_of(bare_checkout))


@pytest.mark.parametrize('engine, starting', [
    ('aiohttp-tarantool-one', 'starting Tarantool'),
    ('aiohttp-postgres-pool', 'creating a PostgreSQL cluster'),
    ('aiohttp-redis-one', 'starting Redis'),
])
def test_a_signal_while_the_database_starts_leaves_none(
        bare_checkout, tmp_path, engine, starting):
    log_path = str(tmp_path / 'server.log')

    def output():
        with open(log_path) as f:
            return f.read()
    with open(log_path, 'wb') as log:
        server = subprocess.Popen(
            [sys.executable, os.path.join(bare_checkout, 'server.py'), '-e',
             engine, '-p', str(free_port()), '--packs', str(TEST_PACKS)],
            cwd=bare_checkout, stdout=log, stderr=subprocess.STDOUT,
            env=dict(os.environ, **ports()))
    try:
        wait_until(lambda: starting in output(), 60, 0.01, output, server)
        server.send_signal(signal.SIGTERM)
        assert server.wait(60) == 0, output()
    finally:
        if server.poll() is None:
            server.kill()
    assert 'stopped while starting' in output()
    assert wait_ended(processes_of(bare_checkout)), output()


async def test_a_database_no_server_manages_is_adopted(bare_checkout,
                                                       tmp_path):
    """Started by a server killed before it could stop it (here: by hand,
    with nobody holding its lock): the next server watches and restarts it
    and stops it at the end; a second server beside it leaves it be."""
    env = ports()
    var = os.path.join(bare_checkout, 'var')
    port = int(env['STICKERS_TARANTOOL_PORT'])
    tnt = ManagedTarantool(os.path.join(var, 'tarantool'), port=port)
    os.makedirs(tnt.directory)
    orphan = subprocess.Popen(
        ['tarantool', INSTANCE_LUA], cwd=tnt.directory, start_new_session=True,
        stdin=subprocess.DEVNULL, env=dict(
            os.environ, TNT_DIR=tnt.directory, TNT_LOG=tnt.log_file,
            TNT_LISTEN='127.0.0.1:%d' % port,
            TNT_PID_FILE=os.path.join(tnt.directory, 'tarantool.pid'),
            TNT_APP_PASSWORD=tnt.address.password,
            TNT_ADMIN_PASSWORD=tnt.admin_address.password))
    pg = ManagedPostgres(os.path.join(var, 'postgres'),
                         port=int(env['STICKERS_POSTGRES_PORT']))
    pg.start()
    pg.stop()
    pg._run('pg_ctl', 'start', '-D', pg.data, '-l', pg.log_file, '-w',
            '-o', '-p %d' % pg.port)
    wait_until(lambda: answers('127.0.0.1', port), 30, 0.05, process=orphan)
    orphans = {'Tarantool': orphan.pid, 'PostgreSQL': pg.postmaster()}
    crashes = {'Tarantool': lambda: (orphan.kill(), orphan.wait()),
               'PostgreSQL': lambda: pg._run('pg_ctl', 'stop', '-D', pg.data,
                                             '-m', 'immediate')}
    for engine, name in (('aiohttp-tarantool-one', 'Tarantool'),
                         ('aiohttp-postgres-pool', 'PostgreSQL')):
        site = ServerProcess(engine, [], str(tmp_path / (name + '.log')),
                             root=bare_checkout, env=env)
        try:
            adopted = lines(site.output(), 'managed from now on')
            assert len(adopted) == 1, site.output()
            assert '%s (pid %d)' % (name, orphans[name]) in adopted[0]
            second = ServerProcess(engine, [], str(tmp_path / 'second.log'),
                                   root=bare_checkout, env=env)
            assert await burst(second.url + '/good', 2) == [200] * 2
            assert second.stop() == 0
            assert 'managed from now on' not in second.output()
            assert state(orphans[name]) not in (None, 'Z')
            crashes[name]()
            output = wait_lines(site, '%s restarted' % name, 1)
            assert len(lines(output, '(pid %d) is gone; restarting'
                             % orphans[name])) == 1, output
            await wait_for(site.url + '/good', 200, timeout=10)
            pid = tarantool_of(bare_checkout) if name == 'Tarantool' else \
                postmaster_of(bare_checkout)
            assert pid != orphans[name]
        finally:
            assert site.stop() == 0, site.output()
        assert wait_ended([pid]), site.output()
    assert not pg.running()


async def test_a_redis_no_server_manages_is_adopted(bare_checkout, tmp_path):
    """Left running by a server that could not stop it (here: its lock let
    go by hand): the next server watches it, restarts it when it dies, and
    stops it at the end."""
    from runtime.databases.redis import ManagedRedis
    env = ports()
    orphan = ManagedRedis(os.path.join(bare_checkout, 'var', 'redis'),
                          port=int(env['STICKERS_REDIS_PORT']))
    orphan.start()
    orphan._unmanage()
    first = orphan.pid
    site = ServerProcess('aiohttp-redis-one', [], str(tmp_path / 'site.log'),
                         root=bare_checkout, env=env)
    try:
        adopted = lines(site.output(), 'managed from now on')
        assert len(adopted) == 1 and 'Redis (pid %d)' % first in adopted[0]
        assert await burst(site.url + '/good', 2) == [200] * 2
        os.kill(first, signal.SIGKILL)
        wait_lines(site, 'Redis restarted', 1)
        await wait_for(site.url + '/good', 200, timeout=10)
        second = redis_of(bare_checkout)
        assert second != first
    finally:
        assert site.stop() == 0, site.output()
    assert wait_ended([second]), site.output()


@ROOT_ONLY
def test_root_follows_no_symbolic_link_of_the_postgres_account(tmp_path):
    """A cluster of the older layout, whose directory postgres owned: a
    symbolic link it put in place of the port file would have had root
    write the port into any file. Root's files now live in a directory of
    root's, and are never opened through a symbolic link."""
    precious = tmp_path / 'precious'
    precious.write_text('keep me\n')
    link = tmp_path / 'link'
    link.symlink_to(precious)
    with pytest.raises(OSError, match='symbolic link'):
        secret(str(link))
    pg = ManagedPostgres(tempfile.mkdtemp(prefix='stickers-test-pg-'),
                         port=free_port())
    try:
        pg.start()
        pg.stop()
        # The older layout: the cluster beside root's files, all postgres'.
        for name in ('data', 'postgres.log', 'superuser.password'):
            os.rename(os.path.join(pg.home, name),
                      os.path.join(pg.directory, name))
        os.rmdir(pg.home)
        postgres = pwd.getpwnam('postgres')
        os.chown(pg.directory, postgres.pw_uid, postgres.pw_gid)
        port = os.path.join(pg.directory, 'port')
        os.symlink(str(precious), port)
        os.lchown(port, postgres.pw_uid, postgres.pw_gid)

        # No port set, so that it remembers the one it starts on (a free
        # one, not 5433, which another cluster may hold).
        again = ManagedPostgres(pg.directory)
        again.port = free_port()
        assert again.home == pg.directory
        again.start()
        try:
            assert precious.read_text() == 'keep me\n'
            assert again.home == os.path.join(pg.directory, 'cluster')
            assert os.stat(pg.directory).st_uid == 0
            assert not os.path.islink(port)
            assert int(private.read(port)) == again.port
            assert again.postmaster() is not None
        finally:
            again.stop()
    finally:
        remove_postgres(pg)


@pytest.mark.timeout(600)
@ROOT_ONLY
async def test_an_unprivileged_user_runs_the_server(bare_checkout, tmp_path):
    """Its own databases as its own: Tarantool, and PostgreSQL's initdb and
    postmaster, all as that user; no root anywhere."""
    user = pwd.getpwnam('nobody')
    python = sys.executable
    runs = subprocess.run(['setpriv', '--reuid', str(user.pw_uid), '--regid',
                           str(user.pw_gid), '--clear-groups', python, '-c',
                           'import aiohttp, asyncpg'],
                          capture_output=True).returncode == 0
    env = dict(os.environ, HOME=bare_checkout, **ports())
    if not runs:
        # This interpreter lives where nobody may not go (a pyenv under
        # /root): the system's of the same version, with this one's
        # packages.
        python = '/usr/bin/python%d.%d' % sys.version_info[:2]
        import aiohttp
        env['PYTHONPATH'] = os.path.dirname(os.path.dirname(aiohttp.__file__))
        if not os.path.exists(python):
            pytest.skip('no interpreter the user nobody may run')
    subprocess.run(['chown', '-R', '%d:%d' % (user.pw_uid, user.pw_gid),
                    bare_checkout], check=True)
    for engine in ('aiohttp-tarantool-one', 'aiohttp-postgres-pool'):
        port = free_port()
        with open(str(tmp_path / (engine + '.log')), 'wb') as log:
            server = subprocess.Popen(
                ['setpriv', '--reuid', str(user.pw_uid), '--regid',
                 str(user.pw_gid), '--clear-groups', python,
                 os.path.join(bare_checkout, 'server.py'), '-e', engine, '-p',
                 str(port), '--packs', str(TEST_PACKS)],
                cwd=bare_checkout, env=env, stdout=log,
                stderr=subprocess.STDOUT)
        try:
            await until(lambda: answers('127.0.0.1', port), 120,
                        message=(tmp_path / (engine + '.log')).read_text,
                        process=server)
            assert await burst('http://127.0.0.1:%d/good' % port, 4) == \
                [200] * 4
            users = {pwd.getpwuid(os.stat('/proc/%d' % p).st_uid).pw_name
                     for p in processes_of(bare_checkout)}
            assert users == {'nobody'}, users
        finally:
            server.send_signal(signal.SIGTERM)
            assert server.wait(60) == 0, (tmp_path / (engine + '.log')
                                          ).read_text()
    assert wait_ended(processes_of(bare_checkout))
    owners = {os.lstat(os.path.join(d, n)).st_uid for d, dirs, files
              in os.walk(os.path.join(bare_checkout, 'var'))
              for n in dirs + files}
    assert owners == {user.pw_uid}


@pytest.mark.parametrize('env', [
    {},
    {'TNT_APP_PASSWORD': '', 'TNT_ADMIN_PASSWORD': 'long-secret'},
    {'TNT_APP_PASSWORD': 'long-secret'},
    {'TNT_APP_PASSWORD': 'long-secret', 'TNT_ADMIN_PASSWORD': ''},
])
def test_tarantool_has_no_default_password(tmp_path, env):
    result = subprocess.run(
        ['tarantool', INSTANCE_LUA], cwd=str(tmp_path), timeout=30,
        env=dict(os.environ, TNT_DIR=str(tmp_path),
                 TNT_LISTEN='127.0.0.1:%d' % free_port(), **env),
        stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert result.returncode != 0
    assert 'refusing to start: set TNT_APP_PASSWORD' in result.stderr
    assert not os.listdir(str(tmp_path))   # not a file made


@pytest.mark.parametrize('text', ['sticker_app:@127.0.0.1:3301',
                                  'sticker_app@127.0.0.1:3301'])
def test_an_address_with_an_empty_password_is_refused(text):
    with pytest.raises(ValueError, match='empty password'):
        parse_tarantool(text)
    result = run_server('-e', 'aiohttp-tarantool-one', '--tarantool', text)
    assert result.returncode == 2 and 'empty password' in result.stderr


def test_a_tarantool_found_without_its_password_is_refused(bare_checkout,
                                                            tmp_path):
    """One answers at the local address, but var/ holds no password for it:
    no guess (the account's name), an error that says what to do."""
    with pytest.raises(RuntimeError, match='holds no password'):
        ManagedTarantool(BY_NAME['tarantool'].directory(
            replace(DEFAULTS, root=bare_checkout))).found_address('sticker_app')
    db = start_tarantool(str(tmp_path / 'db'))
    try:
        result = subprocess.run(
            [sys.executable, os.path.join(bare_checkout, 'server.py'), '-e',
             'aiohttp-tarantool-one', '-p', str(free_port())],
            cwd=bare_checkout, capture_output=True, text=True, timeout=60,
            env=dict(os.environ, STICKERS_TARANTOOL_PORT=str(db.port)))
    finally:
        db.stop()
    assert result.returncode == 1, result.stderr
    assert 'holds no password for sticker_app' in result.stderr
    assert 'Traceback' not in result.stderr


def command_lines(pids):
    found = []
    for pid in pids:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            found.append(f.read())
    return found


@pytest.mark.parametrize('how', ['argument', 'environment', 'file'])
def test_workers_get_no_address_on_their_command_line(
        request, bare_checkout, tmp_path, how):
    """A DSN with a password, given on the command line, in the
    environment or in a file of arguments: the site serves from the
    database given (no cluster of its own), and no worker's command line
    holds the password."""
    from test_workers import wait_workers
    postgres = request.getfixturevalue('postgres')
    dsn = postgres.dsn
    args, env = ['--workers', '2'], ports()
    if how == 'argument':
        args += ['--postgres', dsn]
    elif how == 'environment':
        env['STICKERS_POSTGRES'] = dsn
    else:
        with open(str(tmp_path / 'db.args'), 'w') as f:
            f.write('--postgres\n%s\n' % dsn)
        args.append('@' + str(tmp_path / 'db.args'))
    site = ServerProcess('aiohttp-postgres-pool', args,
                         str(tmp_path / 'server.log'), root=bare_checkout,
                         env=env)
    try:
        workers = wait_workers(site)
        password = postgres.password('sticker_app').encode()
        assert not [c for c in command_lines(workers) if password in c]
        parent = command_lines([site.process.pid])[0]
        assert (password in parent) == (how == 'argument')
        assert asyncio.run(burst(site.url + '/good', 4)) == [200] * 4
    finally:
        assert site.stop() == 0, site.output()
    assert 'PostgreSQL' not in site.output()
    assert not os.path.exists(os.path.join(bare_checkout, 'var', 'postgres'))


class StandIn(threading.Thread):
    """A plain socket server on a managed database's port, recording what
    it receives: it greets as Tarantool does, and answers a PostgreSQL
    startup message with a request for the password in cleartext."""
    TARANTOOL = (b'Tarantool 2.11.0 (Binary) 0'.ljust(63) + b'\n'
                 + b'A' * 44 + b' ' * 19 + b'\n')

    def __init__(self, port, greeting=b'', host='127.0.0.1'):
        super().__init__(daemon=True)
        self.greeting = greeting
        self.received = b''
        self.server = socket.create_server((host, port), family=(
            socket.AF_INET6 if ':' in host else socket.AF_INET))
        self.server.settimeout(0.2)
        self.done = threading.Event()
        self.start()

    def run(self):
        while not self.done.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                conn.sendall(self.greeting)
                try:
                    while True:
                        data = conn.recv(4096)
                        if not data:
                            break
                        self.received += data
                        if data[4:8] == b'\x04\xd2\x16\x2f':   # SSLRequest
                            conn.sendall(b'N')
                        elif data[4:8] == b'\x00\x03\x00\x00':  # startup
                            conn.sendall(b'R\0\0\0\x08\0\0\0\x03')
                except OSError:
                    pass

    def close(self):
        self.done.set()
        self.join()
        self.server.close()


@pytest.mark.parametrize('engine, name, kept', [
    ('aiohttp-redis-one', 'redis', 'sticker_admin'),
    ('aiohttp-tarantool-one', 'tarantool', 'sticker_admin'),
])
def test_a_stand_in_on_the_port_gets_no_password(bare_checkout, tmp_path,
                                                  engine, name, kept):
    """The database stopped, another process listens on its port: the
    server sends it no password and says which process holds the port;
    with the port free again, it starts its own as before."""
    env = ports()
    site = ServerProcess(engine, [], str(tmp_path / 'first.log'),
                         root=bare_checkout, env=env)
    assert site.stop() == 0, site.output()
    directory = os.path.join(bare_checkout, 'var', name)
    password = secret(os.path.join(directory, kept + '.password'))
    greeting = StandIn.TARANTOOL if name == 'tarantool' else b''
    stand_in = StandIn(int(env['STICKERS_%s_PORT' % name.upper()]), greeting)
    try:
        result = subprocess.run(
            [sys.executable, os.path.join(bare_checkout, 'server.py'), '-e',
             engine, '-p', str(free_port()), '--packs', str(TEST_PACKS)],
            cwd=bare_checkout, capture_output=True, text=True, timeout=60,
            env=dict(os.environ, **env))
    finally:
        stand_in.close()
    assert password.encode() not in stand_in.received
    assert b'sticker_' not in stand_in.received, stand_in.received
    assert result.returncode == 1, result.stderr
    assert 'is held by process %d (' % os.getpid() in result.stderr
    assert 'the passwords kept there are not sent to it' in result.stderr
    assert 'Traceback' not in result.stderr
    site = ServerProcess(engine, [], str(tmp_path / 'again.log'),
                         root=bare_checkout, env=env)
    try:
        assert asyncio.run(burst(site.url + '/good', 2)) == [200] * 2
    finally:
        assert site.stop() == 0, site.output()


def test_a_stand_in_on_the_cluster_port_gets_no_password(bare_checkout,
                                                         tmp_path):
    """The cluster stopped, a process that asks for passwords in cleartext
    listens on its port: it gets none; the cluster starts on a free port,
    and again after that."""
    env = ports()
    engine = 'aiohttp-postgres-pool'
    site = ServerProcess(engine, [], str(tmp_path / 'first.log'),
                         root=bare_checkout, env=env)
    assert site.stop() == 0, site.output()
    pg = ManagedPostgres(os.path.join(bare_checkout, 'var', 'postgres'))
    port = int(env['STICKERS_POSTGRES_PORT'])
    stand_in = StandIn(port)
    try:
        site = ServerProcess(engine, [], str(tmp_path / 'second.log'),
                             root=bare_checkout, env=env)
        try:
            assert asyncio.run(burst(site.url + '/good', 2)) == [200] * 2
        finally:
            assert site.stop() == 0, site.output()
    finally:
        stand_in.close()
    for role in ('sticker_app', 'sticker_owner'):
        assert pg.password(role).encode() not in stand_in.received
    assert b'sticker_' not in stand_in.received, stand_in.received
    assert 'port %d is taken: PostgreSQL will use' % port in site.output()
    site = ServerProcess(engine, [], str(tmp_path / 'third.log'),
                         root=bare_checkout, env=env)
    try:
        assert asyncio.run(burst(site.url + '/good', 2)) == [200] * 2
    finally:
        assert site.stop() == 0, site.output()


def test_a_port_set_wins_over_the_one_remembered():
    """A copied checkout has its original's var/postgres/port: the port set
    (STICKERS_POSTGRES_PORT, or given) is the one used, and is not
    remembered; the one remembered serves only when none is set."""
    directory = tempfile.mkdtemp(prefix='stickers-test-pg-')
    remembered, port = free_port(), free_port()
    kept = os.path.join(directory, 'port')
    private.write(kept, str(remembered))
    s = from_environment(environ={'STICKERS_POSTGRES_PORT': str(port)})
    assert ManagedPostgres(directory).port == remembered
    assert ManagedPostgres(directory, port=port).port == port
    pg = ManagedPostgres(directory, settings=s)
    try:
        pg.start()
        assert pg.port == port and pg.ours() == pg.postmaster()
        pg.stop()
        assert private.read(kept) == str(remembered)
    finally:
        remove_postgres(pg)


@pytest.mark.parametrize('engine, name', [('aiohttp-redis-one', 'Redis'),
                                          ('aiohttp-postgres-pool',
                                           'PostgreSQL')])
async def test_a_listener_on_another_address_is_left_alone(
        bare_checkout, tmp_path, engine, name):
    """Another process listens on the database's port at [::1], where the
    site never connects: the database on 127.0.0.1 starts, serves, is
    restarted when killed, and the site serves again; that process gets
    nothing. (One on 127.0.0.1 itself is refused: the tests above.)"""
    env = ports()
    port = int(env['STICKERS_%s_PORT' % engine.split('-')[1].upper()])
    stand_in = StandIn(port, host='::1')
    try:
        site = ServerProcess(engine, [], str(tmp_path / 'site.log'),
                             root=bare_checkout, env=env)
        try:
            assert await burst(site.url + '/good', 4) == [200] * 4
            os.kill((redis_of if name == 'Redis' else postmaster_of)(
                bare_checkout), signal.SIGKILL)
            await asyncio.get_event_loop().run_in_executor(
                None, wait_lines, site, name + ' restarted', 1, 60)
            await wait_for(site.url + '/good', 200, timeout=10)
            assert await burst(site.url + '/good', 8) == [200] * 8
        finally:
            assert site.stop() == 0, site.output()
    finally:
        stand_in.close()
    assert stand_in.received == b''
    assert 'is held by' not in site.output()


async def test_after_a_crash_a_stand_in_gets_no_password(bare_checkout,
                                                         tmp_path):
    """Redis killed, another process takes its port before the restart:
    the site's connections send it no password (pages answer 503) until
    the port is free and Redis runs again."""
    env = ports()
    port = int(env['STICKERS_REDIS_PORT'])
    site = ServerProcess('aiohttp-redis-one', [],
                         str(tmp_path / 'site.log'), root=bare_checkout,
                         env=env)
    stand_in = None
    try:
        assert await burst(site.url + '/good', 4) == [200] * 4
        first = redis_of(bare_checkout)
        os.kill(first, signal.SIGKILL)
        while stand_in is None:
            try:
                stand_in = StandIn(port)
            except OSError:   # not closed yet
                time.sleep(0.001)
        await asyncio.sleep(2)
        assert set(await burst(site.url + '/good', 8)) == {503}
        stand_in.close()
        wait_lines(site, 'Redis restarted', 1, timeout=30)
        await wait_for(site.url + '/good', 200, timeout=10)
        assert await burst(site.url + '/good', 8) == [200] * 8
    finally:
        if stand_in is not None:
            stand_in.close()
        assert site.stop() == 0, site.output()
    passwords = [secret(os.path.join(bare_checkout, 'var', 'redis', user
                                     + '.password')).encode()
                 for user in ('sticker_app', 'sticker_admin')]
    assert not [p for p in passwords if p in stand_in.received]
    assert b'sticker_' not in stand_in.received, stand_in.received

"""One Settings object: defaults once, the environment's ports, what the
managed Tarantool is given, and the databases' one data interface."""
import os
import subprocess
import sys

import pytest

from runtime import engines
from runtime import processes, settings
from conftest import ROOT, TEST_PACKS, tarantool_address
from runtime.databases.table import BY_NAME
from runtime.databases.tarantool import ManagedTarantool
from runtime.databases import open_databases
from pages import Site


def test_environment_moves_the_ports_and_refuses_bad_ones():
    s = settings.from_environment(environ={'STICKERS_TARANTOOL_PORT': '4001'})
    assert (s.tarantool_port, s.postgres_port) == (4001, None)   # none set
    with pytest.raises(ValueError, match='STICKERS_POSTGRES_PORT'):
        settings.from_environment(environ={'STICKERS_POSTGRES_PORT': '99999'})


def test_each_tarantool_engine_has_its_own_local_port_and_directory():
    s = settings.from_environment(environ={
        'STICKERS_TARANTOOL_VINYL_PORT': '4002'})
    vinyl = settings.replace(s, tarantool_engine='vinyl')
    assert (s.managed_tarantool_port, vinyl.managed_tarantool_port) == (
        3301, 4002)
    directory = BY_NAME['tarantool'].directory
    assert directory(s).endswith('/var/tarantool')
    assert directory(vinyl).endswith('/var/tarantool-vinyl')
    server = ManagedTarantool(directory(vinyl), settings=vinyl)
    # The others: one directory each, whatever the storage engine.
    for name in ('postgres', 'redis'):
        assert BY_NAME[name].directory(vinyl) == os.path.join(
            vinyl.var, name)
    assert (server.port, server.env['TNT_ENGINE']) == (4002, 'vinyl')


@pytest.mark.server
def test_server_says_what_is_wrong_with_a_port_setting():
    done = subprocess.run(
        [sys.executable, 'server.py', '-e', 'aiohttp-tarantool-one'], cwd=ROOT,
        env={'STICKERS_TARANTOOL_PORT': '33O1', 'PATH': '/usr/bin:/bin'},
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert 'STICKERS_TARANTOOL_PORT must be a port number' in done.stderr


def test_limits_are_off_on_the_loopback_only():
    d = settings.DEFAULTS
    assert (d.limit('sessions'), d.limit('votes')) == ('0', '0')
    remote = settings.replace(d, host='0.0.0.0')
    assert remote.limit('sessions') == settings.REMOTE_LIMITS['sessions']
    assert settings.replace(remote, limit_votes='5/s').limit('votes') == '5/s'


def test_managed_tarantool_gets_the_expiry_settings(tmp_path):
    s = settings.replace(settings.DEFAULTS, session_ttl=30, max_ballots=7,
                         sweep_every=0.5)
    server = ManagedTarantool(str(tmp_path), settings=s,
                              env={'TNT_MAX_BALLOTS': '9'})
    assert server.env == {'TNT_ENGINE': 'memtx', 'TNT_SESSION_TTL': '30',
                          'TNT_SWEEP_EVERY': '0.5',
                          'TNT_MAX_BALLOTS': '9'}
    assert server.port == s.tarantool_port
    assert server.address.user == s.app_user


def test_snapshots_at_start_reach_the_managed_databases(tmp_path):
    """server.py --snapshots-at-start: the Tarantool's environment and
    the Redis's configuration (no rewrite while serving) say so."""
    import server
    from runtime.databases.redis import ManagedRedis
    for argv, tnt, rewrite in (([], None, '100'),
                               (['--snapshots-at-start'], 'start', '0')):
        s = server.parse_args(['-e', 'aiohttp-tarantool-one'] + argv).settings
        assert ManagedTarantool(str(tmp_path), settings=s).env.get(
            'TNT_SNAPSHOTS') == tnt
        config = ManagedRedis(str(tmp_path), settings=s)._settings()
        assert 'auto-aof-rewrite-percentage %s\n' % rewrite in config


async def test_one_data_interface_serves_after_the_site_stops(tarantool):
    """open_databases yields a started interface; the site neither starts
    nor closes it."""
    s = settings.replace(settings.DEFAULTS, packs=TEST_PACKS,
                         tarantool=tarantool_address(tarantool))
    async with open_databases(engines.BY_NAME['aiohttp-tarantool-one'],
                              s) as data:
        stickers = (await data.stats()).stickers
        assert stickers > 0
        site = Site(data, s)
        await site.start()
        await site.stop()
        assert (await data.stats()).stickers == stickers


def test_picked_ports_stay_outside_the_client_range():
    """A client that connects to a port in the OS's client range while
    nothing listens may be connected to itself and hold the port (a
    database restarted on it fails to bind): picks stay outside it."""
    low, high = processes.client_ports()
    picks = {processes.free_port() for _ in range(200)}
    assert all(not low - 100 <= port <= high for port in picks)
    assert len(picks) > 150     # spread, not one port again and again


def test_lanes_pick_ports_from_parts_apart(monkeypatch):
    """STICKERS_PORT_SHARE=K/N: the test run's two lanes pick from their
    own parts of the span, each with room for replicas (+100) below the
    next; a bad value is refused, saying what is expected."""
    span = (20000, 32000)
    first, second = (processes.share(span, '%d/2' % k) for k in (1, 2))
    assert first == (20000, 25900) and second == (26000, 31900)
    assert processes.share(span, '') == span
    for bad in ('3/2', '0/2', 'half', '1/0'):
        with pytest.raises(ValueError, match='expected K/N'):
            processes.share(span, bad)
    picks = []
    for k in (1, 2):
        monkeypatch.setenv('STICKERS_PORT_SHARE', '%d/2' % k)
        picks.append({processes.free_port() for _ in range(100)})
    assert max(picks[0]) + 100 <= min(picks[1])


def test_install_md_lists_every_package_run_sh_installs():
    """install.md's apt-get line and its table name each Debian package
    `./run.sh test` installs, so that a manual set-up misses none."""
    import re
    with open(os.path.join(ROOT, 'run.sh')) as f:
        script = f.read()
    named = dict(re.findall(r'^(\w+_PACKAGES)="([^"]*)"', script, re.M))
    packages = set(named['SERVE_PACKAGES'].split()) | {
        p for p in named['TEST_PACKAGES'].split() if not p.startswith('$')}
    with open(os.path.join(ROOT, 'install.md')) as f:
        text = f.read()
    line = re.search(r'^apt-get install -y (.*)$', text, re.M).group(1)
    assert packages <= set(line.split()), packages - set(line.split())
    assert all('| `%s` |' % p in text for p in packages)

"""./run.sh new-site: a site for one engine of each database, written into
a new directory, passes its own tests there (a fresh git repository, as a
newcomer's) and serves GET / and a vote; bad input exits 2 with why."""
import os
import signal
import subprocess
import sys

import pytest

import newsite
from bench.pagecheck import ballots, client, session_cookie
from conftest import ROOT, free_port, terminate, wait_until
from runtime import engines, frameworks
from runtime.databases import table
from runtime.processes import answers

ENGINES = ['aiohttp-tarantool-one-uvloop', 'granian-postgres-pool-uvloop',
           'sanic-redis-one-uvloop']


def refused(argv, capsys):
    with pytest.raises(SystemExit) as e:
        newsite.main(argv)
    assert e.value.code == 2
    return capsys.readouterr().err


def test_an_unknown_engine_is_refused_with_the_closest_name(tmp_path,
                                                            capsys):
    err = refused([str(tmp_path / 'site'), '--engine',
                   'aiohttp-tarantool-one-uvlop'], capsys)
    assert "did you mean 'aiohttp-tarantool-one-uvloop'" in err
    assert not (tmp_path / 'site').exists()


@pytest.mark.parametrize('engine', ['japronto-tarantool-one',
                                    'aiohttp-aiotarantool-one-uvloop'])
def test_a_legacy_engine_is_declined(tmp_path, capsys, engine):
    err = refused([str(tmp_path / 'site'), '--engine', engine], capsys)
    assert 'CPython 3.7' in err
    assert not (tmp_path / 'site').exists()


def test_a_cluster_engine_is_declined_with_a_redis_one_named(tmp_path, capsys):
    err = refused([str(tmp_path / 'site'), '--engine',
                   'aiohttp-rediscluster-pool-uvloop'], capsys)
    assert 'not made into a new site yet' in err
    assert 'aiohttp-redis-pool-uvloop' in err
    assert not (tmp_path / 'site').exists()


def test_a_directory_in_use_is_refused(tmp_path, capsys):
    (tmp_path / 'notes.txt').write_text('mine')
    err = refused([str(tmp_path), '--engine', ENGINES[0]], capsys)
    assert 'not an empty directory' in err
    assert os.listdir(str(tmp_path)) == ['notes.txt']


def needed(engine):
    """The distributions (lower case) of the modules the engine names: its
    framework's, its driver's, its loop's."""
    from importlib.metadata import packages_distributions
    e = engines.BY_NAME[engine]
    found = list(frameworks.BY_NAME[e.framework].modules)
    found += table.DRIVER[e.driver].modules
    found += ['uvloop'] if e.loop == 'uvloop' else []
    owners = packages_distributions()
    return {d.lower() for m in found for d in owners[m]}


def pinned(site):
    """The distributions (lower case) of the site's requirements.txt."""
    text = (site / 'requirements.txt').read_text()
    return {line.split('==')[0].lower() for line in text.splitlines()
            if '==' in line}


def site_environment(port_name):
    """The environment of the site's commands: this virtualenv reused, and
    the local database on a free port (not the checkout's)."""
    return dict(os.environ, STICKERS_VENV=sys.prefix,
                **{port_name: str(free_port())})


async def vote_through(url):
    """GET / then a vote with its ballot: the status of each."""
    async with client() as s:
        async with s.get(url + '/') as r:
            page_status, html = r.status, await r.text()
            cookie = session_cookie(r.headers)
    (_, win, lose), _ = ballots(html)
    async with client(cookie) as s:
        async with s.post(url + '/', data={'win': win, 'lose': lose}) as r:
            await r.read()
            return page_status, r.status


@pytest.mark.db
@pytest.mark.server
@pytest.mark.timeout(900)
@pytest.mark.parametrize('engine', ENGINES)
async def test_a_new_site_tests_and_serves_on_its_own(tmp_path, engine):
    site = tmp_path / 'mysite'
    made = subprocess.run(
        ['./run.sh', 'new-site', str(site), '--engine', engine], cwd=ROOT,
        capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    assert not (site / 'bench').exists() and not (site / 'bench.py').exists()
    # Its own virtualenv comes from these pins (the test reuses this one).
    assert needed(engine) <= pinned(site)
    assert {'pytest', 'jinja2', 'aiohttp', 'yarl'} <= pinned(site)
    assert subprocess.run(['git', 'init', '-q'], cwd=str(site)).returncode == 0
    database = engine.split('-')[1]
    env = site_environment('STICKERS_%s_PORT' % database.upper())
    tested = subprocess.run(['./run.sh', 'test', '-q', '-x',
                             '-p', 'no:cacheprovider'], cwd=str(site),
                            env=env, capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr
    assert ' passed' in tested.stdout

    port = free_port()
    log = open(str(tmp_path / 'serve.log'), 'wb')
    server = subprocess.Popen(['./run.sh', 'serve', '-p', str(port)],
                              cwd=str(site), env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: answers('127.0.0.1', port, 0.2), 90,
                   process=server)
        assert await vote_through('http://127.0.0.1:%d' % port) == (200, 200)
    finally:
        terminate(server, 30, signal.SIGTERM)
        log.close()
    assert server.returncode == 0, (tmp_path / 'serve.log').read_text()

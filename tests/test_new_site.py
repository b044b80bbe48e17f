"""./run.sh new-site: a site for one engine of each database, written into
a new directory, passes its own tests there (a fresh git repository, as a
newcomer's) and serves GET / and a vote; bad input exits 2 with why."""
import hashlib
import os
import shutil
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
# The ORM stacks: Django on its ORM, FastAPI on SQLAlchemy's.
ORM_ENGINES = ['django-django-pool-uvloop', 'fastapi-sqlalchemy-pool-uvloop']


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


@pytest.fixture
def built(monkeypatch):
    """The directories a site would be written to: none is, even where a
    test fails to see one refused."""
    import newsite.build
    found = []
    monkeypatch.setattr(newsite.build, 'build',
                        lambda engine, directory: found.append(directory))
    return found


@pytest.mark.parametrize('inside', ['static/sub', '.', 'newsite/../site'])
def test_a_directory_in_this_checkout_is_refused(capsys, built, inside):
    """Not even a new one: static/ copied into static/sub went on until a
    RecursionError."""
    err = refused([os.path.join(ROOT, inside), '--engine', ENGINES[0]],
                  capsys)
    assert 'checkout' in err and 'give a directory outside it' in err
    assert len(err.splitlines()) == 1
    assert built == []


def test_a_link_into_this_checkout_is_refused(tmp_path, capsys, built):
    (tmp_path / 'static').symlink_to(os.path.join(ROOT, 'static'))
    err = refused([str(tmp_path / 'static' / 'sub'), '--engine', ENGINES[0]],
                  capsys)
    assert 'inside this checkout' in err and built == []


def test_a_dangling_link_is_refused_in_one_line(tmp_path, capsys, built):
    (tmp_path / 'site').symlink_to(tmp_path / 'gone')
    err = refused([str(tmp_path / 'site'), '--engine', ENGINES[0]], capsys)
    assert err.startswith('new-site: %s is a symbolic link to %s, which does '
                          'not exist' % (tmp_path / 'site', tmp_path / 'gone'))
    assert len(err.splitlines()) == 1 and built == []


def test_a_relative_directory_is_the_callers(tmp_path, monkeypatch, built):
    """From the directory the command was run in: run.sh, which runs the
    generator from the checkout, says which one (--called-from)."""
    caller = tmp_path / 'home'
    caller.mkdir()
    monkeypatch.chdir(ROOT)
    assert newsite.main(['mysite', '--engine', ENGINES[0],
                         '--called-from', str(caller)]) == 0
    monkeypatch.chdir(caller)
    assert newsite.main(['../other', '--engine', ENGINES[0]]) == 0
    assert built == [str(caller / 'mysite'), str(tmp_path / 'other')]


@pytest.mark.server     # a process (bash), though no server
def test_run_sh_gives_new_site_the_callers_directory(tmp_path):
    """./run.sh cds into its checkout: new-site is told where it was run
    from. A copy of run.sh with its installs found done and a stand-in
    for the virtualenv's python."""
    checkout, bin_, caller = (tmp_path / n for n in ('checkout', 'bin', 'me'))
    for d in (checkout / '.venv' / 'bin', bin_, caller):
        d.mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, 'run.sh'), str(checkout / 'run.sh'))
    (checkout / 'requirements.txt').write_text('')
    stubs = {
        bin_ / 'dpkg-query': 'echo "install ok installed"',
        # The interpreters run.sh looks for: a 3.11, and no 3.7.
        bin_ / 'python3.11': '[ "$1" = -V ] && echo "Python 3.11.0"; exit 0',
        bin_ / 'python3.7': 'exit 1',
        checkout / '.venv' / 'bin' / 'python':
            'pwd > "%s"; printf "%%s\\n" "$@" >> "%s"' % (
                tmp_path / 'called', tmp_path / 'called'),
    }
    for path, text in stubs.items():
        path.write_text('#!/bin/sh\n%s\n' % text)
        path.chmod(0o755)
    empty = hashlib.sha256(b'').hexdigest()[:16]
    (checkout / '.venv' / '.installed').write_text(
        '%s-Python3.11.0\n' % empty)
    done = subprocess.run(
        [str(checkout / 'run.sh'), 'new-site', 'mysite', '--engine', 'x'],
        cwd=str(caller), capture_output=True, text=True, timeout=60,
        env=dict(os.environ, PATH='%s:/usr/bin:/bin' % bin_,
                 PYENV_ROOT=str(tmp_path / 'no-pyenv')))
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / 'called').read_text().splitlines()
    assert lines == [str(checkout), '-m', 'newsite', '--called-from',
                     str(caller), 'mysite', '--engine', 'x']


def site_sources(engine):
    """{path: source} of the engine's site: its modules and tests."""
    from newsite import plan, tests
    e = engines.BY_NAME[engine]
    site_tests = tests.sources(e)
    return dict(plan.sources(e, extra=site_tests.values()), **site_tests)


@pytest.mark.parametrize('engine', ENGINES)
def test_a_site_has_none_of_the_benchmarks_start_options(engine):
    """--forget-visitors drops every visitor at start, --snapshots-at-start
    stops the database's checkpoints and rewrites (its log grows until a
    restart): the benchmark's, not a site's, nor their code."""
    for path, text in site_sources(engine).items():
        for word in ('forget-visitors', 'forget_visitors',
                     'snapshots-at-start', 'snapshots_at_start',
                     'TNT_SNAPSHOTS'):
            assert word not in text, (path, word)


@pytest.mark.server     # server.py --help
def test_a_sites_help_lists_no_benchmark_option(tmp_path):
    for path, text in site_sources(ENGINES[2]).items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    done = subprocess.run([sys.executable, 'server.py', '--help'],
                          cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert '--redis-fsync' in done.stdout and '--workers' in done.stdout
    assert '--forget-visitors' not in done.stdout
    assert '--snapshots-at-start' not in done.stdout


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
@pytest.mark.parametrize('engine', ENGINES + ORM_ENGINES)
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
    database = table.of(engines.BY_NAME[engine]).name
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

"""plugins/tools.py: a test whose program is missing fails where run.sh
installs that program (wrk, nginx, py-spy), and, for oha and loadgen, which
need a cargo run.sh cannot install, is skipped on a developer's machine and
fails under CI (CI=true)."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from plugins import tools

TESTS = os.path.join(ROOT, 'tests')


@pytest.fixture
def no_tools(monkeypatch, tmp_path):
    """No cargo, oha, loadgen, wrk or nginx: an empty PATH and cargo home."""
    monkeypatch.setenv('PATH', str(tmp_path))
    monkeypatch.setenv('CARGO_HOME', str(tmp_path))
    monkeypatch.setattr(tools.mixed, 'BINARY', str(tmp_path / 'loadgen'))


@pytest.mark.parametrize('need', [tools.need_oha, tools.need_loadgen])
def test_not_built_skips_here_and_fails_under_ci(monkeypatch, no_tools,
                                                 need):
    monkeypatch.delenv('CI', raising=False)
    with pytest.raises(pytest.skip.Exception, match='no cargo here'):
        need()
    monkeypatch.setenv('CI', 'true')
    with pytest.raises(pytest.fail.Exception,
                       match=r'no cargo here.*\(CI=true'):
        need()


def test_not_built_with_cargo_there_fails(monkeypatch, no_tools, tmp_path):
    """run.sh should have built them with it: not a skip, CI or not."""
    cargo = tmp_path / 'cargo'
    cargo.write_text('#!/bin/sh\n')
    cargo.chmod(0o755)
    monkeypatch.delenv('CI', raising=False)
    with pytest.raises(pytest.fail.Exception, match='loadgen is not built'):
        tools.need_loadgen()
    with pytest.raises(pytest.fail.Exception, match='oha .* is missing'):
        tools.need_oha()


def test_what_run_sh_installs_fails_when_missing(monkeypatch, no_tools):
    monkeypatch.delenv('CI', raising=False)
    with pytest.raises(pytest.fail.Exception,
                       match='wrk and nginx missing: ./run.sh setup'):
        tools.need('wrk', 'nginx')
    from bench import profile
    monkeypatch.setattr(profile, 'py_spy', lambda: None)
    with pytest.raises(pytest.fail.Exception, match='py-spy missing'):
        tools.need_py_spy()


TINY = '''
import sys
sys.path[:0] = [%r, %r]
from plugins.tools import mixed, need, need_loadgen, need_oha
mixed.BINARY = %r     # as if loadgen/ were not built

def test_mix():
    need_loadgen()

def test_latency():
    need_oha()

def test_wrk():
    need('wrk')
''' % (ROOT, TESTS, '/nonexistent/loadgen')


@pytest.mark.bench
@pytest.mark.parametrize('ci, outcome', [
    (None, '1 failed, 2 skipped'), ('true', '3 failed')])
def test_a_run_without_the_tools(tmp_path, ci, outcome):
    """A pytest run of tests that need them, with none there: under CI it
    fails; elsewhere only what run.sh installs fails."""
    (tmp_path / 'test_tiny.py').write_text(TINY)
    env = dict(os.environ, PATH=str(tmp_path / 'bin'),
               CARGO_HOME=str(tmp_path), HOME=str(tmp_path))
    env.pop('CI', None)
    if ci:
        env['CI'] = ci
    done = subprocess.run(
        [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
         '-rfEs', 'test_tiny.py'], cwd=str(tmp_path), env=env,
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith(outcome), done.stdout
    assert 'wrk missing: ./run.sh setup installs it' in done.stdout

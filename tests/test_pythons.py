"""The interpreter axis: finding CPythons, their environments, why an
engine cannot run on one, and a quick bench.py run on two of them."""
import json
import os
import subprocess
import sys

import pytest

from bench import pythons
from conftest import ROOT
from runtime import processes
from test_bench import quick_bench
from test_target import descendants

MAIN_MINOR = pythons.short(pythons.MAIN.version)


@pytest.mark.bench
def test_a_version_is_found_in_pyenv_or_on_path():
    python = pythons.find(MAIN_MINOR)
    assert os.access(python, os.X_OK)
    assert pythons.short(pythons.version_of(python)) == MAIN_MINOR


def test_a_path_is_taken_as_it_is_and_a_missing_one_is_refused(tmp_path):
    assert pythons.find(sys.executable) == sys.executable
    with pytest.raises(LookupError, match='not an executable'):
        pythons.find(str(tmp_path / 'python9'))


@pytest.mark.parametrize('spec, message', [
    ('3.99', 'no Python 3.99 found'), ('three', 'neither a version')])
def test_an_unknown_interpreter_says_what_to_do(spec, message):
    with pytest.raises(LookupError, match=message):
        pythons.find(spec)


def test_versions_sort_as_numbers():
    assert sorted(['3.10.13', '3.9.18', '3.13.0'], key=pythons.version_key) == [
        '3.9.18', '3.10.13', '3.13.0']


def test_pip_s_reason_names_the_python_a_pin_needs():
    output = ('ERROR: Ignored the following versions that require a different '
              'python version: 0.162.6 Requires-Python >=3.11; 0.165.0 '
              'Requires-Python >=3.12\nERROR: No matching distribution found '
              'for fastapi==0.165.0\n')
    assert pythons.pip_reason('fastapi==0.165.0', output) == \
        'fastapi==0.165.0 needs Python >=3.12'
    assert pythons.pip_reason('x==1', 'ERROR: No matching distribution found '
                              'for x==1\n') == 'No matching distribution found for x==1'


@pytest.fixture(scope='module')
def bare_environment(tmp_path_factory):
    """An environment of a real interpreter made from pins pip cannot get
    (no index): every pin is noted in missing.json with pip's reason."""
    pins = tmp_path_factory.mktemp('pins') / 'requirements.txt'
    pins.write_text('aiohttp==3.14.5\nasynctnt==2.4.0\n')
    target = str(tmp_path_factory.mktemp('env') / 'venv')
    said = []
    env = dict(os.environ, PIP_NO_INDEX='1', PIP_FIND_LINKS=str(pins.parent))
    old = os.environ.copy()
    os.environ.update(env)
    try:
        pythons.make(target, pythons.find(MAIN_MINOR), pythons.MAIN.version,
                     str(pins), said.append)
    finally:
        os.environ.clear()
        os.environ.update(old)
    return target, said


@pytest.mark.timeout(600)
def test_pins_with_no_build_are_noted_with_pip_s_reason(bare_environment):
    target, said = bare_environment
    with open(os.path.join(target, pythons.NOT_BUILT)) as f:
        missing = json.load(f)
    assert set(missing) == {'aiohttp', 'asynctnt'}
    assert 'aiohttp==3.14.5' in missing['aiohttp']
    assert any('aiohttp' in line for line in said)     # progress, then why
    assert said[-1].startswith('  ready in')


@pytest.mark.timeout(600)
def test_an_engine_whose_package_has_no_build_is_skipped_with_the_reason(
        bare_environment):
    target, _ = bare_environment
    there = pythons.Interpreter(pythons.MAIN.version,
                                os.path.join(target, 'bin', 'python'))
    status = pythons.engines_on(there)
    runs, why = status['aiohttp-tarantool-one']
    assert why == ('aiohttp has no build for Python %s: No matching '
                   'distribution found for aiohttp==3.14.5' % MAIN_MINOR)
    assert runs != 'yes'    # the legacy environment may serve it instead
    # Not in the pins at all: said plainly.
    assert status['granian-tarantool-one'] == [
        'no: granian is not installed for Python %s' % MAIN_MINOR,
        'granian is not installed for Python %s' % MAIN_MINOR]


@pytest.mark.bench
def test_list_says_which_engines_run_on_each_interpreter():
    done = subprocess.run(
        [sys.executable, 'bench.py', '--list', '--pythons', sys.executable,
         '--engines', 'aiohttp-tarantool-one,japronto-tarantool-one'],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ['ENGINE', 'PYTHON', pythons.MAIN.version]
    assert lines[1].split() == ['aiohttp-tarantool-one', 'yes']
    assert lines[2].startswith('japronto-tarantool-one')
    assert 'yes' not in lines[2]


@pytest.mark.bench
def test_an_unknown_interpreter_fails_the_run_with_a_message():
    done = subprocess.run(
        [sys.executable, 'bench.py', '--pythons', '3.99', '--out', '/nonexistent'],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert 'no Python 3.99 found' in done.stderr


LEGACY_PYTHON = os.path.join(ROOT, '.venv37', 'bin', 'python')


@pytest.fixture(scope='module')
def two_pythons(tarantool, tmp_path_factory):
    """A quick run of one engine on this interpreter and on the legacy 3.7."""
    if not os.access(LEGACY_PYTHON, os.X_OK):
        pytest.skip('needs .venv37 (./run.sh setup with CPython 3.7)')
    done, out = quick_bench(
        tarantool, tmp_path_factory, '--engines', 'aiohttp-tarantool-one',
        '--pages', 'ugly,good', '--plain', '--runs', '2',
        '--pythons', '%s,3.7' % MAIN_MINOR)
    with open(out / 'results.json') as f:
        return json.load(f), out


@pytest.mark.timeout(600)
def test_a_run_on_two_interpreters_records_both(two_pythons):
    results, out = two_pythons
    legacy = pythons.version_of(LEGACY_PYTHON)
    assert results['settings']['pythons'] == [pythons.MAIN.version, legacy]
    engines = {t['name']: t for t in results['targets'] if t['kind'] != 'nginx'}
    assert {n: (t['python'], t['status']) for n, t in engines.items()} == {
        'aiohttp-tarantool-one@' + MAIN_MINOR: (pythons.MAIN.version, 'ok'),
        'aiohttp-tarantool-one@3.7': (legacy, 'ok'),
        'hello-aiohttp@' + MAIN_MINOR: (pythons.MAIN.version, 'ok'),
        'hello-aiohttp@3.7': (legacy, 'ok')}
    assert LEGACY_PYTHON in engines['aiohttp-tarantool-one@3.7']['command']
    for run in results['runs']:
        if run['target'] != 'nginx':
            assert run['python'] == engines[run['target']]['python']


@pytest.mark.timeout(600)
def test_the_interpreters_take_turns(two_pythons):
    results, _ = two_pythons
    order = [r['target'] for r in results['runs']
             if r['page'] == 'ugly' and not r['warmup'] and r['target'] != 'nginx']
    turn = ['aiohttp-tarantool-one@' + MAIN_MINOR, 'hello-aiohttp@' + MAIN_MINOR,
            'aiohttp-tarantool-one@3.7', 'hello-aiohttp@3.7']
    assert order == turn * 2


@pytest.mark.timeout(600)
def test_results_md_has_the_engine_by_interpreter_table(two_pythons):
    results, out = two_pythons
    text = (out / 'results.md').read_text()
    section = text.split('## Interpreters')[1]
    header = '| engine | Python %s | Python 3.7 | 3.7 ÷ %s |' % (
        MAIN_MINOR, MAIN_MINOR)
    assert header in section
    row = next(line for line in section.split('### good')[1].splitlines()
               if line.startswith('| aiohttp-tarantool-one |'))
    cells = [c.strip() for c in row.strip('|').split('|')]
    medians = [float(c.replace(',', '')) for c in cells[1:3]]
    assert all(m > 0 for m in medians)
    assert abs(float(cells[3]) - medians[1] / medians[0]) < 0.01
    for page in ('ugly', 'good'):
        assert (out / ('chart-pythons-%s.png' % page)).is_file()


def server_pids(parent, python):
    """Pids of the server.py processes under parent run by this
    interpreter (only this run's: another lane's may be running)."""
    return [pid for pid in descendants(parent) if is_server(pid, python)]


def is_server(pid, python):
    argv = processes.command_line(pid)
    return argv[:1] == [python.encode()] and any(
        a.endswith(b'server.py') for a in argv)


def test_an_interpreter_s_server_that_dies_fails_alone(tarantool, tmp_path):
    """The 3.7 copy of an engine is killed mid-run: it is failed with its
    log, and this interpreter's copy finishes its pages."""
    if not os.access(LEGACY_PYTHON, os.X_OK):
        pytest.skip('needs .venv37 (./run.sh setup with CPython 3.7)')
    import signal
    from conftest import TEST_PACKS, free_port, tarantool_address
    a = tarantool_address(tarantool)
    out = tmp_path / 'out'
    bench = subprocess.Popen(
        [sys.executable, 'bench.py', '--engines', 'aiohttp-tarantool-one',
         '--pages', 'ugly,good', '--plain', '--duration', '2', '--warmup', '0',
         '--runs', '2', '--pythons', '%s,3.7' % MAIN_MINOR,
         '--tarantool', '%s:%d' % (a.host, a.port), '--packs', str(TEST_PACKS),
         '--port', str(free_port()), '--out', str(out)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    said = []
    try:
        for line in bench.stdout:     # the progress, a line a step
            said.append(line)
            if '@3.7 · ugly · plain · run 1/2' in line:
                break                   # verified, into its timed runs
        for pid in server_pids(bench.pid, LEGACY_PYTHON):
            os.kill(pid, signal.SIGKILL)
        said = ''.join(said) + bench.communicate(timeout=180)[0]
    finally:
        bench.kill()
    assert bench.returncode == 1, said
    with open(out / 'results.json') as f:
        results = json.load(f)
    status = {t['name']: t for t in results['targets']}
    assert status['aiohttp-tarantool-one@3.7']['status'] == 'failed'
    assert 'server.py died during' in status['aiohttp-tarantool-one@3.7']['reason']
    assert status['aiohttp-tarantool-one@' + MAIN_MINOR]['status'] == 'ok'
    good = [r for r in results['runs'] if r['page'] == 'good' and not r['warmup']]
    assert [r['target'] for r in good] == ['aiohttp-tarantool-one@' + MAIN_MINOR] * 2
    assert all(r['wrk']['requests'] > 0 for r in good)

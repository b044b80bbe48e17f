"""bench.instructions: instructions per request under valgrind repeat, see
work added to a page, and the regression check fails on a rise."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from bench import compare, instructions
from plugins.checkouts import copy_checkout

# Each test starts server.py under valgrind itself.
pytestmark = [pytest.mark.skipif(instructions.valgrind() is None,
                                 reason=instructions.MISSING),
              pytest.mark.server, pytest.mark.bench]
ENGINE = 'aiohttp-tarantool-one-uvloop'
SMALL = ['--packs', '20']           # a copy's first start loads its data set
LOOP = 2000                         # iterations of the work added to /ugly
ADDED = '''
    @page('GET', '/ugly', waits=False, guarded=False)
    async def ugly(self, request):
        for _ in range(%d):
            pass
        return UGLY
''' % LOOP


LOOP_ALONE = 'def f():\n    for _ in range(%d):\n        pass\nf()'


@pytest.fixture(scope='module')
def checkout(tmp_path_factory):
    return copy_checkout(str(tmp_path_factory.mktemp('instr') / 'checkout'))


def count(checkout, folder, n1=50, n2=250):
    [found] = instructions.measure(ENGINE, ['ugly'], n1, n2, root=checkout,
                                   folder=str(folder), args=SMALL)
    return found


@pytest.fixture(scope='module')
def before(checkout, tmp_path_factory):
    return count(checkout, tmp_path_factory.mktemp('before'))


def loop_cost(tmp_path):
    """Instructions of LOOP empty iterations in this interpreter: python
    -c with the loop in a function (as in the handler: a local, not a
    global), less with none, under cachegrind."""
    found = []
    for n in (0, LOOP):
        out = str(tmp_path / ('loop.%d' % n))
        subprocess.run([instructions.valgrind(), '--tool=cachegrind',
                        '--cache-sim=no', '--cachegrind-out-file=' + out,
                        sys.executable, '-S', '-c', LOOP_ALONE % n],
                       check=True, capture_output=True,
                       env=dict(os.environ, PYTHONHASHSEED='0'))
        with open(out) as f:
            found.append(int([x for x in f if x.startswith('summary:')][0].split()[1]))
    return found[1] - found[0]


def test_two_runs_of_one_build_agree(checkout, before, tmp_path):
    again = count(checkout, tmp_path)
    assert before['per_request'] > 10000
    change = abs(again['per_request'] - before['per_request']) / float(before['per_request'])
    # Within a run the three estimates agree to some 0.5 %; two server runs
    # of /ugly on aiohttp have differed by up to 1.6 %: compare's band.
    assert change < instructions.NOISE / 100, (before['estimates'], again['estimates'])
    assert before['parts']['interpreter'] > 0 and before["runs"][0]["requests"] == 50


def test_added_work_raises_the_count_and_compare_marks_it(checkout, before, tmp_path):
    site = os.path.join(checkout, 'pages', 'site.py')
    shutil.copy(site, str(tmp_path / 'site.py'))
    with open(site) as f:
        text = f.read()
    plain = text[text.index("    @page('GET', '/ugly'"):text.index("    @page('GET', '/about'")]
    try:
        with open(site, 'w') as f:
            f.write(text.replace(plain, ADDED.lstrip('\n') + '\n'))
        after = count(checkout, tmp_path / 'after')
    finally:
        shutil.copy(str(tmp_path / 'site.py'), site)
    rise, expected = after['per_request'] - before['per_request'], loop_cost(tmp_path)
    assert abs(rise - expected) < 0.1 * expected, (rise, expected)
    a = {'runs': [], 'targets': [], 'instructions': [before]}
    b = {'runs': [], 'targets': [], 'instructions': [after]}
    lines, worse = compare.compare(a, b)
    assert worse == 1
    [row] = [x for x in lines if x.startswith('| instructions/request')]
    assert ENGINE in row and 'worse' in row
    assert compare.compare(a, a)[1] == 0


def baseline(path, counts):
    with open(instructions.BASELINE) as f:
        saved = json.load(f)
    saved.update(engines=[ENGINE], pages=['ugly'], counts=counts)
    with open(path, 'w') as f:
        json.dump(saved, f)
    return path


def test_check_passes_on_the_committed_baseline_and_fails_on_a_lower_one(
        checkout, tmp_path, capsys):
    with open(instructions.BASELINE) as f:
        committed = json.load(f)['counts']
    key = ENGINE + ' ugly'
    ours = baseline(str(tmp_path / 'same.json'), {key: committed[key]})
    assert instructions.check(ours, root=checkout, args=SMALL) == 0
    lower = int(committed[key] * 0.9)
    ours = baseline(str(tmp_path / 'lower.json'), {key: lower})
    assert instructions.check(ours, root=checkout, args=SMALL) == 1
    said = capsys.readouterr().out
    assert '%s: before %s' % (key, '{:,}'.format(lower)) in said
    assert 'ROSE above 3%' in said
    assert 'counted again: %s (%s rose)' % (ENGINE, key) in said


@pytest.mark.parametrize('counts, status', [
    ([104, 101], 0),    # one count high, the next as before: kept the lower
    ([104, 105], 1),    # high both times: a rise
    ([101], 0),         # within the threshold: counted once
])
def test_a_count_that_rose_is_counted_again(tmp_path, monkeypatch, capsys,
                                            counts, status):
    key = ENGINE + ' ugly'
    left = list(counts)

    def measure(engine, pages, *args, **kwargs):
        return [{'engine': engine, 'page': 'ugly',
                 'per_request': left.pop(0) * 1000}]
    monkeypatch.setattr(instructions, 'measure', measure)
    ours = baseline(str(tmp_path / 'b.json'), {key: 100000})
    assert instructions.check(ours) == status
    assert not left
    said = capsys.readouterr().out
    assert ('counted again' in said) == (len(counts) == 2)
    assert 'after {:,}'.format(min(counts) * 1000) in said


@pytest.mark.parametrize('log, said', [
    ('==1== Command: python server.py\nvex amd64->IR: unhandled instruction '
     'bytes: 0x66 0xF 0x3A 0x61\nWorker crashed on signal SIGILL!\n',
     'valgrind cannot run it: it stopped the server at a machine instruction '
     'it does not emulate (SIGILL; see '),
    ('2026-11-26 INFO server: serving\nTraceback: something else\n',
     'the server closed the connection; the end of its log ('),
])
def test_a_server_that_closes_is_failed_with_why(tmp_path, log, said):
    """A server valgrind cannot run (japronto's parser: an SSE 4.2 form it
    does not emulate), or that dies otherwise, fails with the reason from
    its log, not a traceback."""
    path = tmp_path / 'server.log'
    path.write_text(log)
    why = instructions.closed(instructions.Closed(
        'the server closed the connection'), str(path))
    assert why.startswith(said) and str(path) in why
    assert ('something else' in why) == ('Traceback' in log)


def test_a_hello_gets_a_cookie_of_the_site_s_session_shape():
    """The hello's /ugly gets the bytes the site's does: a Cookie of a
    session's length and form (uuid.signature)."""
    from pages import sessions
    value = instructions.HELLO_COOKIE
    assert len(value) == sessions.LENGTH
    session, _, signature = value.partition('.')
    assert len(session) == 36 and len(signature) == 22

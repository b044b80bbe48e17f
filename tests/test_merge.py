"""bench.py merge: runs made apart, on engines of their own, as one run's
results (results.json with its demand and cost again, results.md, the
page); parts that cannot sit in one table refused with the reason."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, TEST_PACKS, free_port, tarantool_address
from plugins import tools


def part(tarantool, out, engine):
    a = tarantool_address(tarantool)
    argv = [sys.executable, 'bench.py', '--quick', '--engines', engine,
            '--pages', 'ugly,good', '--plain', '--latency', '--rates', '100',
            '--rate-pages', 'good:1', '--slo', 'p99=50ms',
            '--tarantool', '%s:%d' % (a.host, a.port), '--packs', str(TEST_PACKS),
            '--port', str(free_port()), '--out', str(out)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def merge(*args):
    return subprocess.run([sys.executable, 'bench.py', 'merge'] + [str(a) for a in args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope='module')
def parts(tarantool, tmp_path_factory):
    tools.need('wrk', 'nginx')
    tools.need_oha()
    base = tmp_path_factory.mktemp('parts')
    return [part(tarantool, base / 'a', 'aiohttp-tarantool-one'),
            part(tarantool, base / 'b', 'granian-tarantool-one')]


@pytest.mark.timeout(900)
def test_two_parts_are_one_run(parts, tmp_path):
    a, b = parts
    done = merge(a, b, '--out', tmp_path / 'out')
    assert done.returncode == 0, done.stderr
    merged = json.loads((tmp_path / 'out' / 'results.json').read_text())
    each = [json.loads((p / 'results.json').read_text()) for p in parts]
    assert merged['settings']['engines'] == ['aiohttp-tarantool-one',
                                             'granian-tarantool-one']
    for key in ('runs', 'latency', 'capacity'):
        assert len(merged[key]) == sum(len(x[key]) for x in each), key
    # nginx ran in both parts: one target, its runs pooled
    assert [t['name'] for t in merged['targets']].count('nginx') == 1
    nginx = [r for r in merged['runs'] if r['target'] == 'nginx']
    assert len(nginx) == sum(1 for x in each for r in x['runs'] if r['target'] == 'nginx')
    assert {d['target'] for d in merged['demand']} == set(merged['settings']['engines'])
    assert {r['target'] for r in merged['cost']['rows']} == set(merged['settings']['engines'])
    assert merged['started'] == each[0]['started'] and merged['finished'] == each[1]['finished']
    md = (tmp_path / 'out' / 'results.md').read_text()
    assert '- Parts (bench.py merge' in md and '2. ' + each[1]['started'] in md
    capacity = md.split('## Capacity')[1].split('\n## ')[0]
    for name in merged['settings']['engines']:
        assert '| %s |' % name in capacity
        assert '| hello-%s |' % name.split('-')[0] in md
    assert (tmp_path / 'out' / 'results.html').is_file()


@pytest.mark.timeout(900)
def test_parts_that_are_not_one_run_are_refused(parts, tmp_path):
    a, b = parts
    assert 'aiohttp-tarantool-one is in parts 1 and 2' in merge(
        a, a, '--out', tmp_path / 'x').stderr
    assert 'give two parts or more' in merge(a, '--out', tmp_path / 'x').stderr
    for change, said in ((lambda r: r['settings'].update(duration=7),
                          'the parts differ in duration'),
                         (lambda r: r['settings']['latency']['slo'].update(ms=5.0),
                          'the parts differ in latency slo'),
                         (lambda r: r['versions'].update(tarantool='0.0'),
                          'the parts differ in versions'),
                         (lambda r: r.update(interrupted=True), 'was interrupted'),
                         (lambda r: r['settings']['latency'].update(
                             searches={'good': 2}),
                          'the parts search good a different number of times: '
                          '1 and 2')):
        results = json.loads((b / 'results.json').read_text())
        change(results)
        odd = tmp_path / 'odd'
        odd.mkdir(exist_ok=True)
        (odd / 'results.json').write_text(json.dumps(results))
        done = merge(a, odd, '--out', tmp_path / 'x')
        assert done.returncode == 2 and said in done.stderr, done.stderr
    # a page --rate-pages left out was searched --runs times
    for name, change in (('a3', lambda r: r['settings'].update(runs=3)),
                         ('b3', lambda r: (r['settings'].update(runs=3),
                                           r['settings']['latency'].update(searches={})))):
        results = json.loads(((a if name == 'a3' else b) / 'results.json').read_text())
        change(results)
        (tmp_path / name).mkdir()
        (tmp_path / name / 'results.json').write_text(json.dumps(results))
    done = merge(tmp_path / 'a3', tmp_path / 'b3', '--out', tmp_path / 'x')
    assert done.returncode == 2 and ('the parts search good a different number '
                                     'of times: 1 and 3') in done.stderr, done.stderr
    assert not (tmp_path / 'x').exists()
    (tmp_path / 'junk.json').write_text('[1]')
    done = merge(a, tmp_path / 'junk.json', '--out', tmp_path / 'x')
    assert done.returncode == 2 and 'is not a bench.py run' in done.stderr


def test_pages_the_page_list_does_not_name_come_last():
    """The mix is no page of wrk's: parts with it still merge."""
    from bench.merge import union
    from bench.wrk import PAGES
    assert union([['ugly', 'good', 'mix'], ['index', 'mix']], PAGES) == [
        'ugly', 'good', 'index', 'mix']


def test_a_run_kept_gzipped_is_read_and_written_back_as_it_is(tmp_path):
    """A folder holding results.json.gz alone (docs/results is kept so):
    every reader finds it, the page gets its answer from it, and a change
    written into it stays gzipped; results.json wins where both are."""
    import gzip
    from bench import cluster_batches, html, merge, results_file
    source = os.path.join(ROOT, 'docs', 'results-apart')
    folder = tmp_path / 'run'
    shutil.copytree(source, folder)
    with open(folder / 'results.json', 'rb') as f, \
            gzip.open(folder / 'results.json.gz', 'wb') as packed:
        packed.write(f.read())
    os.remove(folder / 'results.json')
    expected = results_file.load(source)
    assert results_file.path(str(folder)).endswith('results.json.gz')
    assert results_file.load(str(folder)) == expected
    assert merge.load(str(folder))['targets'] == expected['targets']
    # the page's answer comes from the record: none without one
    page = open(html.write(str(folder))).read()
    os.rename(folder / 'results.json.gz', tmp_path / 'away.gz')
    assert open(html.write(str(folder))).read() != page
    os.rename(tmp_path / 'away.gz', folder / 'results.json.gz')
    cluster_batches.into(str(folder), {'votes_per_call': []})
    assert not os.path.exists(folder / 'results.json')
    assert results_file.load(str(folder))['cluster_batches'] == {
        'votes_per_call': []}
    with open(folder / 'results.json', 'w') as f:
        f.write('{"plain": 1}')
    assert results_file.load(str(folder)) == {'plain': 1}

"""One definition per figure on the committed run: results.md, the charts
and bench.py advise give the same number for the same thing, or label
the point each comes from."""
import json
import os
import re

import pytest

from bench import advise, report
from bench.latency import chart
from bench.latency.cells import capacities

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def committed():
    with open(os.path.join(ROOT, 'docs', 'results', 'results.json')) as f:
        results = json.load(f)
    return results, report.render(results)


def table(markdown, heading):
    """The first table under heading: {(engine, page or None): cells}."""
    part = markdown.split('\n## %s\n' % heading, 1)[1].split('\n## ', 1)[0]
    lines = part.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith('|'))
    rows = []
    for line in lines[first:]:
        if not line.startswith('|'):
            break
        rows.append([c.strip() for c in line.strip().strip('|').split('|')])
    return rows[0], rows[2:]


def flat(text):
    return ' '.join(line.strip() for line in text.splitlines())


def test_a_capacity_chart_says_how_many_searches_results_md_does(committed):
    results, markdown = committed
    once = re.search(r'\n- (.*): one search each', markdown).group(1).split(', ')
    found = capacities(results)
    for page in results['settings']['pages']:
        said = chart.searched([c for (_, p), c in found.items() if p == page])
        assert ('one search each' in said) == (page in once), (page, said)
    assert chart.searched([c for (_, p), c in found.items() if p == 'mix']) == \
        'median of 3 searches, whiskers min-max'


def test_the_demand_table_is_what_advise_sizes_from(committed):
    """results.md's CPU µs per mix request are the figures advise's notes
    say it measured at the capacity found."""
    results, markdown = committed
    head, rows = table(markdown, 'Demand per tier')
    col = {name: i for i, name in enumerate(head)}
    shown = {r[0]: r for r in rows if r[1] == 'mix'}
    _, ranked = advise.advise(results, 5000)
    checked = 0
    for row in ranked:
        m = re.search(r'measured there: CPU µs per request \(server ([\d,]+), '
                      r'database ([\d,]+) on its [a-z ]+ \+ ([\d,]+)\)',
                      flat(advise.text([], [row])))
        if not m:
            continue
        name, (server, serial, spread) = row['engine'], m.groups()
        r = shown[name]
        assert [r[col['server µs']], r[col['serial µs']], r[col['spread µs']]] == [
            server, serial, spread], name
        checked += 1
    assert checked >= 10
    socketify = shown['socketify-tarantool-one-uvloop']
    assert socketify[col['at, req/s']] == '4,270'


def test_the_cost_per_million_is_labelled_by_its_rate(committed):
    """The cost table's mix column (one core at its capacity) is advise's
    $/M at a rate equal to that capacity; advise labels its own with the
    rate asked."""
    results, markdown = committed
    head, rows = table(markdown, 'Cost per million requests')
    mix = head.index('mix (at capacity)')
    caps = {n: c['rate']['median'] for (n, p), c in capacities(results).items()
            if p == 'mix'}
    stored = {c['target']: c['per_million'] for c in results['cost']['rows']
              if c['page'] == 'mix'}
    for r in rows:
        if r[0] not in caps or not caps[r[0]]:
            continue
        _, ranked = advise.advise(results, caps[r[0]], framework=advise.framework_of(r[0]))
        row = next(x for x in ranked if x['engine'] == r[0])
        assert row['basis'] == 'measured' and row['cores'] == 1
        # the same arithmetic; results.json keeps it to 5 figures
        assert row['per_million'] == pytest.approx(stored[r[0]], rel=1e-4), r[0]
        assert abs(row['per_million'] - float(r[mix])) < 0.0001, r[0]
        text = flat(advise.text([], [row]))
        assert '$/M requests at %s/s %.4f' % ('{:,.0f}'.format(caps[r[0]]),
                                            row['per_million']) in text


def test_the_committed_results_md_is_what_the_code_writes(committed, tmp_path):
    """docs/results/results.md and results.html as written from its
    results.json now (python -m bench.render docs/results writes them)."""
    import shutil
    from bench import html
    results, markdown = committed
    folder = os.path.join(ROOT, 'docs', 'results')
    with open(os.path.join(folder, 'results.md')) as f:
        assert f.read() == markdown
    copy = tmp_path / 'results'
    shutil.copytree(folder, copy)
    with open(os.path.join(folder, 'results.html')) as f:
        assert open(html.write(str(copy))).read() == f.read()

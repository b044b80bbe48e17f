"""One definition per figure on the committed run: results.md, the charts
and bench.py advise give the same number for the same thing, or label
the point each comes from."""
import os
import re

import pytest

from bench import advise, report, results_file
from bench.latency import chart
from bench.latency.cells import capacities

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def committed():
    results = results_file.load(os.path.join(ROOT, 'docs', 'results'))
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
    mix = results['settings']['latency']['searches']['mix']
    assert mix > 1 and chart.searched([c for (_, p), c in found.items()
                                       if p == 'mix']) == \
        'median of %d searches, whiskers min-max' % mix


def curves(markdown):
    """{engine: [(rate, server µs)]} of results.md's demand curve, the mix."""
    found = {}
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip('|').split('|')]
        if len(cells) == 3 and cells[1] == 'mix' and ': ' in cells[2]:
            found[cells[0]] = [
                tuple(float(x.replace(',', '')) for x in
                      (p.split(': ')[0], p.split(': ')[1].split('/')[0]))
                for p in cells[2].split(' · ')]
    return found


def test_the_demand_table_is_what_advise_sizes_from(committed):
    """Each server figure advise's notes give is read on results.md's
    demand curve at the rate they name (interpolated between its
    neighbours, held past its ends); the demand table says the rate of
    its own figures (each search's point at its capacity)."""
    results, markdown = committed
    head, rows = table(markdown, 'Demand per tier')
    col = {name: i for i, name in enumerate(head)}
    shown = {r[0]: r for r in rows if r[1] == 'mix'}
    curve = curves(markdown)
    _, ranked = advise.advise(results, 5000)
    checked = 0
    for row in ranked:
        m = re.search(r"on the run's curve \([\d,]+–[\d,]+/s\): server (\d+) at "
                      r'([\d,]+)/s', flat(advise.text([], [row])))
        if not m:
            continue
        us, rate = float(m.group(1)), float(m.group(2).replace(',', ''))
        points = curve[row['engine']]
        below = [u for r, u in points if r <= rate] or [points[0][1]]
        above = [u for r, u in points if r >= rate] or [points[-1][1]]
        lo, hi = sorted((below[-1], above[0]))
        assert lo - 0.5 <= us <= hi + 0.5, (row['engine'], us, rate, points)
        checked += 1
    assert checked >= 10


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

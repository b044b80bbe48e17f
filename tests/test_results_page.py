"""results.html leads with the answer, and its ranking for a rate and a
p99 budget, computed in the page, is bench.py advise's for the same."""
import json
import os
import re
import shutil

import pytest

from bench import advise, html
from test_advise import ROOT, cluster_results, with_demand
from test_browser import browser  # noqa: F401  (the fixture)

INPUTS = [(2000, 10), (20000, 10), (100000, 10), (5000, 20), (500, 3)]


def committed_folder(tmp_path):
    folder = tmp_path / 'committed'
    folder.mkdir()
    for name in ('results.json', 'results.md', 'chart-capacity-mix.png'):
        shutil.copy(os.path.join(ROOT, 'docs', 'results', name), folder / name)
    return folder


def built_folder(tmp_path):
    """The hand-built run of test_advise with the split measured, memory
    as PSS, a run with read replicas and a Redis Cluster."""
    data = cluster_results()
    data['targets'].append({'name': 'a-tarantool-one (2 replicas)',
                            'kind': 'engine', 'status': 'ok'})
    with_demand(data, 'a-tarantool-one (2 replicas)', [1000.0, 4000.0, 4500.0],
                {'server_us': 150.0, 'serial_us': 20.0, 'spread_us': 10.0},
                1.6, 0.8, replicas=60.0)
    folder = tmp_path / 'built'
    folder.mkdir()
    (folder / 'results.json').write_text(json.dumps(data))
    (folder / 'results.md').write_text(
        '# Benchmark results\n\n- Run: by hand\n\n## Capacity at p99 ≤ 10 ms\n\ntext\n')
    return folder


def expected(results, rate, ms):
    """advise's rows as the page shows them, or its refusal."""
    try:
        _, rows = advise.advise(results, rate, {'percentile': 'p99', 'ms': float(ms)})
    except advise.Refused as e:
        return str(e), []
    return '', [[c[0], c[2], c[3], c[4], c[5]] for c in map(advise.cells, rows)]


async def shown(page, rate, ms):
    await page.fill('#advise-rate', str(rate))
    await page.fill('#advise-budget', str(ms))
    rows = await page.eval_on_selector_all(
        '#advise-out tr', 'trs => trs.map(tr => Array.from(tr.cells).map(td => td.textContent))')
    said = await page.text_content('#advise-said')
    return said, [[r[0], r[1], r[2], r[3], r[4]] for r in rows]


@pytest.mark.parametrize('which', ['committed', 'built'])
async def test_the_pages_ranking_is_advises(browser, tmp_path, which):  # noqa: F811
    folder = (committed_folder if which == 'committed' else built_folder)(tmp_path)
    path = html.write(str(folder))
    text = open(path).read()
    assert not re.search(r'(src|href)\s*=\s*["\']?(\w+:)?//', text)   # nothing fetched
    results = json.loads((folder / 'results.json').read_text())
    page = await browser.new_page()
    await page.goto('file://' + path)
    # it opens with the answer: the chart, the top stacks, the example
    # sizing; the run's metadata folded below them; then the sections
    order = [text.index(s) for s in ('<h2>Which stack', 'Top stacks',
                                     'One site for 20,000 requests/s',
                                     '<details><summary>The run', '<h2>Capacity')]
    assert order == sorted(order)
    for rate, ms in INPUTS:
        said, rows = await shown(page, rate, ms)
        want_said, want_rows = expected(results, rate, ms)
        assert said == want_said, (rate, ms)
        if not want_said:
            assert rows == want_rows, (rate, ms)
    if which == 'built':   # the replicas and the refused primary are there
        said, rows = await shown(page, 20000, 10)
        assert ['a-tarantool-one', '4', 'primary + 2 replicas, 4 cores', '8'] in [
            r[:4] for r in rows]
        said, rows = await shown(page, 8000, 10)
        assert ['e-rediscluster-pool', '4',
                'rankings + 2 replicas, 2 bucket shards + a replica each, '
                '7 cores', '11'] in [
            r[:4] for r in rows]


def test_the_committed_page_holds_each_chart_once_and_stays_small(tmp_path):
    """results.html is one file to send: its charts inline, each once (the
    answer's chart is linked from its section), under 2 MiB."""
    folder = tmp_path / 'results'
    shutil.copytree(os.path.join(ROOT, 'docs', 'results'), folder,
                    ignore=shutil.ignore_patterns('results.html'))
    text = open(html.write(str(folder))).read()
    pictures = re.findall(r'src="data:image/png;base64,([^"]+)"', text)
    charts = [n for n in os.listdir(folder) if n.endswith('.png')]
    assert len(pictures) == len(set(pictures)) == len(charts)
    assert '(capacity mix: the chart above)' in text
    assert len(text.encode()) < 2 * 2 ** 20

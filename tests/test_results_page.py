"""results.html leads with the answer, and its ranking for a rate and a
p99 budget, computed in the page, is bench.py advise's for the same; what a
line of results.md says cannot add script to it or embed another file."""
import base64
import json
import os
import re
import shutil
from html.parser import HTMLParser

import pytest

from bench import advise, html
from test_advise import ROOT, cluster_results, with_demand
from test_browser import browser  # noqa: F401  (the fixture)

INPUTS = [(2000, 10), (20000, 10), (100000, 10), (5000, 20), (500, 3), (500, 10),
          (3000, 10), (500, 1)]


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


# bench.py cluster-batches' figures as it writes them (µs per vote at each
# batch size; the mean batch at each rate votes were cast at)
BATCHES = {'sizes': {'1': [[345.0, 200.0], 5.3], '10': [[90.0, 45.0], 6.7],
                     '100': [[55.0, 30.0], 19.5], '1000': [[45.5, 17.0], 140.0]},
           'paced': {'100': [1.0, [520.0, 300.0]], '500': [83.0, [164.0, 80.0]]},
           'per_vote_mix_requests': 2 / 0.7}


def batches_folder(tmp_path):
    """The committed run carrying cluster-batches figures and a disk's
    write rate (50 MB/s: some sites' writes pass it)."""
    folder = committed_folder(tmp_path)
    data = json.loads((folder / 'results.json').read_text())
    data['cluster_batches'] = BATCHES
    data['machine']['disk'] = {'bytes_per_s': 50e6}
    (folder / 'results.json').write_text(json.dumps(data))
    return folder


def expected(results, rate, ms, database=None):
    """advise's rows as the page shows them, or its refusal."""
    try:
        _, rows = advise.advise(results, rate, {'percentile': 'p99', 'ms': float(ms)},
                                database=database)
    except advise.Refused as e:
        return str(e), []
    return '', [[c[0], c[2], c[3], c[4], c[5]] for c in map(advise.cells, rows)]


async def shown(page, rate, ms):
    await page.fill('#advise-rate', str(rate))
    await page.fill('#advise-budget', str(ms))
    rows = await page.eval_on_selector_all(
        '#advise-out tr, #advise-refused-out tr',
        'trs => trs.map(tr => Array.from(tr.cells).map(td => td.textContent))')
    said = await page.text_content('#advise-said')
    return said, [[r[0], r[1], r[2], r[3], r[4]] for r in rows]


@pytest.mark.parametrize('which', ['committed', 'built', 'batches'])
async def test_the_pages_ranking_is_advises(browser, tmp_path, which):  # noqa: F811
    folder = {'committed': committed_folder, 'built': built_folder,
              'batches': batches_folder}[which](tmp_path)
    path = html.write(str(folder))
    text = open(path).read()
    assert not re.search(r'(src|href)\s*=\s*["\']?(\w+:)?//', text)   # nothing fetched
    results = json.loads((folder / 'results.json').read_text())
    page = await browser.new_page()
    await page.goto('file://' + path)
    # it opens with the answer: the form and its ranking, the chart, the top
    # stacks, the example sizing; the run's metadata folded below them; then
    # the sections
    assert '<meta name="viewport" content="width=device-width' in text
    chart = ('<img',) if which != 'built' else ()
    order = [text.index(s) for s in ('<h2>Which stack', 'id="advise-rate"',
                                     'id="advise-out"') + chart + ('Top stacks',
                                     'One site for 20,000 requests/s',
                                     '<details><summary>The run', '<h2>Capacity')]
    assert order == sorted(order)
    for rate, ms in INPUTS:
        said, rows = await shown(page, rate, ms)
        want_said, want_rows = expected(results, rate, ms)
        assert said == want_said, (rate, ms)
        if not want_said:
            assert rows == want_rows, (rate, ms)
    if which == 'committed':   # a noisy cell says so, as advise does
        await shown(page, 2000, 10)
        notes = await page.eval_on_selector_all(
            '#advise-out tr', 'trs => trs.map(tr => tr.cells[7].textContent)')
        want = advise.cells(advise.advise(results, 2000)[1][0])[9]
        assert notes[0].startswith('runs 2,335–4,803/s (spread > 25%); measured: the '
                                   'run served 4,270/s') and notes[0] == want
    if which == 'batches':   # a sized row says where its figures were read
        await shown(page, 5000, 10)
        notes = await page.eval_on_selector_all(
            '#advise-out tr', 'trs => trs.map(tr => tr.cells[7].textContent)')
        assert re.search(r"CPU µs per request on the run's curve \([\d,]+–[\d,]+/s\): "
                         r'server \d+ at [\d,]+/s, serial \d+ at 5,000/s', notes[0]), notes[0]
        assert "rankings " in notes[-1] and 'at 5,000/s' in notes[-1], notes[-1]
    if which == 'built':   # the replicas and the refused primary are there
        said, rows = await shown(page, 20000, 10)
        assert ['a-tarantool-one', '8', 'modelled', 'primary + 2 replicas',
                'transaction thread at 32,000/s'] in rows
        said, rows = await shown(page, 6000, 10)
        assert ['e-rediscluster-pool', '8', 'modelled',
                'rankings + 2 replicas, 2 bucket shards + a replica each',
                "rankings' shard at 8,000/s"] in rows
        said, rows = await shown(page, 3000, 10)
        assert rows[0] == ['c-tarantool-one', '1', 'measured', '1 primary',
                           'measured to 5,000/s']
        said, rows = await shown(page, 20000, 10)   # a refused row is folded
        assert await page.text_content('#advise-refused-said') == (
            '2 stacks cannot serve it: why')
        assert not await page.eval_on_selector('#advise-refused', 'd => d.open')
        said, rows = await shown(page, 500, 1)
        assert rows == [] and said.endswith('was not measured: no rate the run '
                                            'tried kept it (it searched at p99 ≤ 10 ms)')


async def test_the_address_holds_the_rate_the_budget_and_the_database(
        browser, tmp_path):  # noqa: F811
    """?rate=5000&p99=10&db=postgres opens the ranking for those, as
    advise --database postgres gives it; what is typed goes to the
    address."""
    folder = committed_folder(tmp_path)
    path = html.write(str(folder))
    results = json.loads((folder / 'results.json').read_text())
    page = await browser.new_page()
    await page.goto('file://' + path + '?rate=5000&p99=10&db=postgres')
    assert await page.input_value('#advise-rate') == '5000'
    assert await page.input_value('#advise-db') == 'postgres'
    rows = await page.eval_on_selector_all(
        '#advise-out tr, #advise-refused-out tr',
        'trs => trs.map(tr => Array.from(tr.cells).map(td => td.textContent))')
    assert [r[:5] for r in rows] == expected(results, 5000, 10, 'postgres')[1]
    assert len(rows) == 4
    await page.fill('#advise-rate', '2000')
    await page.select_option('#advise-db', '')
    assert await page.evaluate('location.search') == '?rate=2000&p99=10'


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


class Tags(HTMLParser):
    """Each tag of a page with its attributes."""

    def __init__(self, text):
        super().__init__()
        self.found = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


def test_a_hostile_line_neither_runs_nor_embeds(tmp_path):
    """results.md lines a site could have written (its Server header, a
    failure's body) in every place the page writer reads: no attribute comes
    of their quotes, and no file but the folder's own charts is embedded,
    whether named by ../, by an absolute path or by a chart's name linked
    out; the folder's real chart still is."""
    secret = tmp_path / 'secret.key'
    secret.write_bytes(b'SECRET-KEY-BYTES ' * 8)
    folder = tmp_path / 'results'
    folder.mkdir()
    shutil.copy(os.path.join(ROOT, 'docs', 'results', 'chart-ugly.png'),
                folder / 'chart-ugly.png')
    (folder / 'chart-leak.png').symlink_to(secret)
    (folder / 'notes.png').write_bytes(secret.read_bytes())
    hostile = ['![k" onerror="document.body.dataset.pwned=1"](%s)' % name
               for name in ('../secret.key', str(secret), 'chart-leak.png',
                            'notes.png')]
    hostile.append("`x\" onmouseover='y'` **<script>z</script>**")
    markdown = '\n'.join(
        ['# Benchmark results', ''] + ['- Server: ' + h for h in hostile]
        + ['', '## ugly', '', '![ugly](chart-ugly.png)', '']
        + ['### %s' % h for h in hostile] + hostile
        + ['', '| engine | status | details |', '|---|---|---|']
        + ['| x | failed | %s |' % h for h in hostile]) + '\n'
    page = html.render(markdown, str(folder))
    tags = Tags(page).found
    assert not [(t, a) for t, a in tags for name in a if name.startswith('on')]
    assert not [t for t, _ in tags if t == 'script']
    assert 'SECRET-KEY' not in page
    assert base64.b64encode(secret.read_bytes()).decode() not in page
    chart = base64.b64encode((folder / 'chart-ugly.png').read_bytes()).decode()
    assert [a['src'] for t, a in tags if t == 'img'] == [
        'data:image/png;base64,' + chart]

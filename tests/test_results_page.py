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

from bench import advise, html, results_file
from bench.latency.cells import capacities
from test_advise import ROOT, cluster_results, with_demand
from conftest import ARTIFACTS
from test_browser import browser  # noqa: F401  (the fixture)

INPUTS = [(2000, 10), (20000, 10), (100000, 10), (5000, 20), (500, 3), (500, 10),
          (3000, 10), (500, 1)]


def committed_folder(tmp_path):
    folder = tmp_path / 'committed'
    folder.mkdir()
    for name in ('results.md', 'chart-capacity-mix.png'):
        shutil.copy(os.path.join(ROOT, 'docs', 'results', name), folder / name)
    (folder / 'results.json').write_text(json.dumps(
        results_file.load(os.path.join(ROOT, 'docs', 'results'))))
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


def expected(results, rate, ms, pct='p99', **options):
    """advise's answer as the page shows it: (its refusal or '', the
    compact table's rows, the numbered notes, each on one line)."""
    try:
        _, rows = advise.advise(results, rate, {'percentile': pct, 'ms': float(ms)},
                                **options)
    except advise.Refused as e:
        return str(e), [], []
    table, notes = advise.text([], rows).strip('\n').split('\n\n')
    return '', [re.split(r'\s{2,}', line.strip()) for line in table.splitlines()[1:]], [
        ' '.join(line.strip() for line in block.splitlines())
        for block in re.split(r'\n(?=\[\d+\] )', notes)]


async def answer(page):
    """The page's answer: (said, compact rows, notes), folded rows too."""
    rows = await page.eval_on_selector_all(
        '#advise-out tr, #advise-refused-out tr',
        'trs => trs.map(tr => Array.from(tr.cells).map(td => td.textContent))')
    notes = await page.eval_on_selector_all('#advise-notes li',
                                            'lis => lis.map(li => li.textContent)')
    return await page.text_content('#advise-said'), rows, notes


async def shown(page, rate, ms):
    await page.fill('#advise-rate', str(rate))
    await page.fill('#advise-budget', str(ms))
    return await answer(page)


def same(got, want):
    said, rows, notes = got
    assert said == want[0]
    if not want[0]:
        assert rows == want[1]
        assert notes == want[2]


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
    # it opens with the answer: the form, the compact table, the refused
    # rows folded, the notes, then the charts, the top stacks; the run's
    # metadata folded below them; then the sections
    assert '<meta name="viewport" content="width=device-width' in text
    chart = ('<img',) if which != 'built' else ()
    order = [text.index(s) for s in ('<h2>Which stack', 'id="advise-rate"',
                                     'id="advise-out"', 'id="advise-refused"',
                                     'id="advise-notes"') + chart + ('Top stacks',
                                     'One site for 20,000 requests/s',
                                     '<details><summary>The run', '<h2>Capacity')]
    assert order == sorted(order)
    for rate, ms in INPUTS:
        same(await shown(page, rate, ms), expected(results, rate, ms))
    if which == 'committed':   # a noisy cell says so, as advise does
        noisy = sorted((c['rate']['median'], name) for (name, p), c in
                       capacities(results).items()
                       if p == 'mix' and c['noisy'] and c['rate']['min'])
        median, name = noisy[-1]
        rate = capacities(results)[(name, 'mix')]['rate']
        said, rows, notes = await shown(page, int(median), 10)
        assert any(n.split('Notes: ')[-1].startswith(
            'runs {:,}–{:,}/s (spread > 25%); measured: the run served {:,}/s'.format(
                round(rate['min']), round(rate['max']), round(median)))
            for n in notes), notes
        assert name in await page.text_content('#advise-warn')
    if which == 'batches':   # a sized row says where its figures were read
        said, rows, notes = await shown(page, 5000, 10)
        assert any(re.search(r"CPU µs per request on the run's curve \([\d,]+–[\d,]+/s\): "
                             r"server \d+ at [\d,]+/s .* at 5,000/s \(the site's rate\)", n)
                   for n in notes), notes
        assert any("from bench.py cluster-batches (each server's votes in batches of" in n
                   for n in notes), notes
    if which == 'built':   # the replicas and the refused primary are there
        said, rows, notes = await shown(page, 20000, 10)
        [n] = [i for i, r in enumerate(rows) if r[0] == 'a-tarantool-one']
        assert rows[n][1:4] == ['8', '%.2f' % (8 * 29.2), 'transaction thread at 32,000/s']
        assert 'database primary + 2 replicas' in notes[n]
        said, rows, notes = await shown(page, 6000, 10)
        assert any(r[0] == 'e-rediscluster-pool' and r[3] == "rankings' shard at 8,000/s"
                   for r in rows)
        said, rows, notes = await shown(page, 3000, 10)
        assert rows[0] == ['c-tarantool-one', '1', '29.20', 'measured to 5,000/s',
                           'measured [1]']
        said, rows, notes = await shown(page, 20000, 10)   # a refused row is folded
        assert await page.text_content('#advise-refused-said') == (
            '2 stacks cannot serve it: why')
        assert not await page.eval_on_selector('#advise-refused', 'd => d.open')
        said, rows, notes = await shown(page, 500, 1)
        assert rows == [] and said.endswith('was not measured: no rate the run '
                                            'tried kept it (it searched at p99 ≤ 10 ms)')


# The address's parameters and advise's options that mean the same.
ADDRESSES = [
    ('', {}),
    ('&db=postgres', {'database': 'postgres'}),
    ('&fw=aiohttp&headroom=0.7&price=40', {'framework': 'aiohttp', 'headroom': 0.7,
                                          'price': 40 / advise.HOURS}),
    ('&p99=5&pct=p90&db=tarantool', {'ms': 5, 'pct': 'p90', 'database': 'tarantool'}),
    ('&p99=20&pct=p99.9&fw=granian', {'ms': 20, 'pct': 'p99.9', 'framework': 'granian'}),
]


@pytest.mark.parametrize('rate', [500, 2000, 5000, 20000, 100000])
async def test_the_address_gives_the_sites_advise_gives(browser, tmp_path, rate):  # noqa: F811
    """?rate=…&p99=…&pct=…&db=…&fw=…&headroom=…&price=… opens the ranking
    advise gives with --rate, --slo, --database, --framework, --headroom,
    --price; what is typed goes back to the address."""
    folder = committed_folder(tmp_path)
    path = html.write(str(folder))
    results = json.loads((folder / 'results.json').read_text())
    page = await browser.new_page()
    for query, options in ADDRESSES:
        options = dict(options)
        ms, pct = options.pop('ms', 10), options.pop('pct', 'p99')
        await page.goto('file://%s?rate=%d%s' % (path, rate, query))
        assert await page.input_value('#advise-rate') == str(rate)
        want = expected(results, rate, ms, pct, **options)
        same(await answer(page), want)
    await page.fill('#advise-rate', '2000')
    await page.select_option('#advise-fw', '')
    await page.fill('#advise-headroom', '0.8')
    await page.fill('#advise-price', '29.20')
    assert await page.evaluate('location.search') == '?rate=2000&p99=20&pct=p99.9'


async def test_the_form_and_the_top_answer_fit_a_phone_s_first_screen(
        browser, tmp_path):  # noqa: F811
    """At 390 x 844 CSS pixels the whole form and the first row of the
    answer show before any scrolling, and nothing is wider than the screen
    but the tables that scroll inside it."""
    path = html.write(str(committed_folder(tmp_path)))
    page = await browser.new_page(viewport={'width': 390, 'height': 844})
    await page.goto('file://' + path)
    form = await page.locator('#advise').bounding_box()
    first = await page.locator('#advise-out tr').first.bounding_box()
    assert form['x'] >= 0 and form['x'] + form['width'] <= 390
    assert first['y'] + first['height'] <= 844, first
    assert await page.evaluate('document.documentElement.scrollWidth') <= 390
    size = await page.evaluate('getComputedStyle(document.querySelector('
                               '"#advise-out td")).fontSize')
    assert float(size.rstrip('px')) >= 12
    os.makedirs(ARTIFACTS, exist_ok=True)
    await page.screenshot(path=os.path.join(ARTIFACTS, 'results-390.png'))


async def test_the_machine_s_warnings_are_advise_s(browser, tmp_path):  # noqa: F811
    """The floor's warnings for a budget, in the page and in advise."""
    from bench.latency import floor
    path = html.write(str(committed_folder(tmp_path)))
    results = results_file.load(os.path.join(ROOT, 'docs', 'results'))
    page = await browser.new_page()
    await page.goto('file://' + path)
    data = advise.embedded(results)
    for pct, ms in (('p99', 10), ('p99', 0.3), ('p50', 0.14), ('max', 1), ('p90', 0.2)):
        want = ['Machine: ' + line.replace('`', '') for line in
                floor.lines(results['floor'], {'percentile': pct, 'ms': ms})[1:]]
        got = await page.evaluate('([f, p, m]) => window.adviseMachine(f, p, m)',
                                  [data['floor'], pct, ms])
        assert got == want, (pct, ms)
    assert any(floor.lines(results['floor'], {'percentile': 'p99', 'ms': 0.3})[1:])


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


@pytest.mark.parametrize('query, said', [
    ('rate=1e12', 'the rate must be at most 10,000,000 (got 1e12): past that the '
                  'answer is arithmetic, not a site.'),
    ('rate=0', 'the rate must be above zero (got 0).'),
    ('rate=1e-9', 'the rate must be at least 1 request/s (got 1e-9).'),
    ('rate=5000&p99=-1', 'the budget must be above zero (got -1).'),
    ('rate=5000&headroom=2', 'the headroom must be at most 1 (got 2).'),
    ('rate=inf', 'the rate must be a finite number above zero.'),
])
async def test_a_rate_or_budget_past_sense_is_said_not_ranked(
        browser, tmp_path, query, said):  # noqa: F811
    """As advise refuses them (exit 2), the page says why and ranks nothing."""
    path = html.write(str(committed_folder(tmp_path)))
    page = await browser.new_page()
    await page.goto('file://%s?%s' % (path, query))
    assert await page.text_content('#advise-said') == said
    assert await page.eval_on_selector_all('#advise-out tr', 'trs => trs.length') == 0

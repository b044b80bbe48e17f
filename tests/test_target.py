"""bench.py --target: a site already running, verified and timed like an
engine but not started by the bench; a dead or wrong site fails, a bad URL
is refused, and what a site sends is text in the results."""
import asyncio
import base64
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT, free_port, wait_until
from bench import cli, html, profile, remote, report, stats
from runtime.processes import answers
from plugins import tools
from test_browser import browser  # noqa: F401  (the fixture)

ENGINE = 'aiohttp-tarantool-one'
PAGES = ['ugly', 'good', 'vote']


def command_line(pid):
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            return f.read().replace(b'\0', b' ').decode('utf-8', 'replace')
    except OSError:
        return ''


def descendants(pid):
    parent = {}
    for p in profile.pids():
        s = profile.stat(p)
        if s:
            parent[p] = s[0]
    found, todo = [], [pid]
    while todo:
        kids = [p for p, up in parent.items() if up == todo[0]]
        found += kids
        todo = todo[1:] + kids
    return found


def bench(out, *options):
    """(exit code, stderr, command lines of every process bench.py started)
    of one bench.py run, watched while it runs."""
    bench_py = subprocess.Popen(
        [sys.executable, 'bench.py', '--quick', '--out', str(out)]
        + list(options), cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    seen = set()

    def ended():
        seen.update(command_line(pid) for pid in descendants(bench_py.pid))
        return bench_py.poll() is not None
    wait_until(ended, 240, 0.2, 'bench.py still running after 240 s')
    _, err = bench_py.communicate(timeout=10)
    return bench_py.returncode, err, seen


@pytest.fixture(scope='module')
def site(shared_server):
    tools.need('wrk', 'nginx')
    return shared_server(ENGINE)


@pytest.fixture(scope='module')
def target_run(site, tmp_path_factory):
    out = tmp_path_factory.mktemp('target') / 'out'
    code, err, seen = bench(out, '--target', site.url, '--label', 'mine',
                            '--pages', ','.join(PAGES))
    assert code == 0, err
    return out, seen


@pytest.mark.timeout(600)
def test_a_target_is_verified_and_timed_like_an_engine(target_run, site):
    out, _ = target_run
    results = json.loads((out / 'results.json').read_text())
    assert results['settings']['sites'] == [{'label': 'mine', 'url': site.url}]
    assert results['settings']['engines'] == []
    assert results['machine']['cores'] >= 1
    t = {t['name']: t for t in results['targets']}['mine']
    assert (t['kind'], t['status'], t['url']) == ('remote', 'ok', site.url)
    assert t['started_by_bench'] is False and t['address'] == '127.0.0.1'
    assert 'server_header' in t
    assert [c['check'] for c in t['verification'] if c['ok']] == [
        'ugly', 'api', 'good', 'bad', 'about', 'pack', 'sticker', 'index', 'vote']
    timed = [r for r in results['runs'] if r['target'] == 'mine' and not r['warmup']]
    assert sorted((r['page'], r['mode']) for r in timed) == [
        ('good', 'pipelined'), ('good', 'plain'), ('ugly', 'pipelined'),
        ('ugly', 'plain'), ('vote', 'plain')]
    for r in timed:
        assert r['exit_code'] == 0 and r['wrk']['requests_per_sec'] > 0
        if r['page'] == 'vote':
            assert r['vote_check']['ok'] and r['wrk']['votes'] > 0, r['vote_check']


@pytest.mark.timeout(600)
def test_results_md_marks_the_target_row(target_run):
    out, _ = target_run
    results = json.loads((out / 'results.json').read_text())
    md = (out / 'results.md').read_text()
    assert re.search(r'^- † Not started by the bench \(--target\): mine at '
                     r'http://127\.0\.0\.1:\d+', md, re.M)
    assert re.search(r'^\| mine † \| ok \| http://127\.0\.0\.1:\d+, not started '
                     r'by the bench.*; verified: ugly, api', md, re.M)
    for page, mode in (('ugly', 'plain'), ('good', 'pipelined'), ('vote', 'plain')):
        rps = stats.median([r['wrk']['requests_per_sec'] for r in results['runs']
                            if (r['target'], r['page'], r['mode'], r['warmup'])
                            == ('mine', page, mode, False)])
        section = md.split('### %s · %s\n' % (page, mode))[1].split('\n## ')[0]
        m = re.search(r'^\| mine † \| ([\d,]+) \(.*$', section, re.M)
        assert m and abs(int(m.group(1).replace(',', '')) - rps) <= 0.5, section
        if page == 'vote':
            assert m.group(0).endswith('| 1/1 runs |')
    ugly = md.split('### ugly · plain\n')[1].split('\n## ')[0]
    assert '÷ nginx' in ugly and '÷ bare hello' not in ugly
    # Its start and memory cannot be measured from here: null, and said so.
    t = {t['name']: t for t in results['targets']}['mine']
    assert t['start_s'] is None and t['memory'] is None
    assert '| mine | not measured (--target) |' in md


@pytest.mark.timeout(600)
def test_the_bench_started_no_server_for_the_target(target_run, site):
    out, seen = target_run
    assert any(re.match(r'(taskset .* )?wrk ', line) for line in seen), seen
    assert not [line for line in seen if 'server.py' in line
                or 'bench.hello' in line], seen
    results = json.loads((out / 'results.json').read_text())
    assert [t['name'] for t in results['targets']] == ['mine', 'nginx']
    assert site.process.poll() is None and answers('127.0.0.1', site.port)


@pytest.mark.timeout(600)
@pytest.mark.bench
def test_a_dead_or_wrong_site_fails_with_the_reason(site, tmp_path):
    (tmp_path / 'ugly').write_text('UGLY!')
    port = free_port()
    wrong = subprocess.Popen(
        [sys.executable, '-m', 'http.server', '-b', '127.0.0.1', str(port)],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if answers('127.0.0.1', port):
                break
            time.sleep(0.05)
        dead = 'http://127.0.0.1:%d' % free_port()
        code, err, _ = bench(tmp_path / 'out', '--target', '%s,http://127.0.0.1:%d'
                             % (dead, port), '--label', 'dead', '--label',
                             'wrong', '--pages', 'good')
    finally:
        wrong.terminate()
        wrong.wait()
    assert code == 1, err
    assert 'Traceback' not in err and 'failed: dead, wrong' in err
    results = json.loads((tmp_path / 'out' / 'results.json').read_text())
    status = {t['name']: t for t in results['targets']}
    assert status['dead']['status'] == 'failed'
    assert status['dead']['reason'] == 'no answer at ' + dead
    assert status['wrong']['status'] == 'failed'
    assert status['wrong']['reason'].startswith("verification failed: ugly: body b'UGLY!'")
    assert results['runs'] == []


class Elsewhere(http.server.BaseHTTPRequestHandler):
    """Another site: every request it gets is recorded."""

    def do_GET(self):
        self.server.seen.append(self.path)
        body = b'ELSEWHERE-PRIVATE-BODY'
        self.send_response(200)
        self.send_header('Content-Type', 'text/plain; charset=utf-8')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args):
        pass


class Redirecting(Elsewhere):
    """Every page moved to the same path at another port."""

    def do_GET(self):
        self.send_response(302)
        self.send_header('Location', self.server.to + self.path)
        self.send_header('Content-Length', '0')
        self.end_headers()

    do_POST = do_GET


def serve(handler):
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    server.seen = []
    server.verify_request = lambda request, address: server.seen.append(
        'a connection') or True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, 'http://127.0.0.1:%d' % server.server_address[1]


@pytest.mark.timeout(600)
@pytest.mark.bench
def test_a_redirect_is_a_failed_check_not_followed(tmp_path):
    """A target that redirects every page to another site: that site is
    never asked for anything, the check says why it failed, and nothing of
    the other site is written into the results."""
    tools.need('wrk')
    other, other_url = serve(Elsewhere)
    moved, url = serve(Redirecting)
    moved.to = other_url
    try:
        code, err, _ = bench(tmp_path / 'out', '--target', url, '--label',
                             'moved', '--pages', 'good')
    finally:
        moved.shutdown()
        other.shutdown()
    assert code == 1 and 'Traceback' not in err, err
    assert moved.seen and other.seen == []
    results = json.loads((tmp_path / 'out' / 'results.json').read_text())
    target = {t['name']: t for t in results['targets']}['moved']
    assert target['status'] == 'failed'
    assert target['reason'] == ('verification failed: ugly: HTTP 302, a '
                                'redirect: its Location was not followed')
    assert results['runs'] == []
    for name in ('results.json', 'results.md'):
        text = (tmp_path / 'out' / name).read_text()
        assert 'ELSEWHERE' not in text and other_url not in text, name


# Markdown meant to run script in results.html and embed a file of the
# machine the bench ran on.
HOSTILE = '![k" onerror="document.body.dataset.pwned=1"](%s)'
SECRET = b'SECRET-KEY-BYTES ' * 8


class Hostile(http.server.BaseHTTPRequestHandler):
    """A site whose Server header, /ugly body (a failure quotes 40 bytes of
    it) and Content-Type are what server.header, .body and .type say."""

    def version_string(self):
        return self.server.header

    def do_GET(self):
        self.send_response(200)
        self.send_header('Content-Type', self.server.type)
        self.send_header('Content-Length', str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, *args):
        pass


@pytest.mark.timeout(600)
@pytest.mark.bench
async def test_what_a_site_sends_is_text_in_the_results(browser, tmp_path):  # noqa: F811
    """Two sites fail verification with a Server header that names the
    secret by its absolute path and carries an onerror, one on its /ugly
    body (naming it by ../) and one on its Content-Type: results.md shows
    it all as text, and results.html in Chromium runs no handler and holds
    nothing of the secret."""
    tools.need('wrk')
    secret = tmp_path / 'secret.key'
    secret.write_bytes(SECRET)
    sites = []
    for body, kind in ((b'|![s](../secret.key)`<i>`**x**', 'text/plain'),
                       (b'UGLY', HOSTILE % '../secret.key')):
        server, url = serve(Hostile)
        server.header, server.body, server.type = HOSTILE % secret, body, kind
        sites.append((server, url))
    out = tmp_path / 'out'
    try:
        code, err, _ = await asyncio.to_thread(
            bench, out, '--target', ','.join(url for _, url in sites),
            '--label', 'a', '--label', 'b', '--pages', 'good')
    finally:
        for server, _ in sites:
            server.shutdown()
    assert code == 1 and 'Traceback' not in err, err
    results = json.loads((out / 'results.json').read_text())
    assert [(t['status'], t['server_header']) for t in results['targets']
            if t['kind'] == 'remote'] == [('failed', HOSTILE % secret)] * 2
    md = (out / 'results.md').read_text()
    assert not re.search(r'!\[[^\]]*\]\((?!chart-)', md)
    said = [line for line in md.splitlines() if 'dataset.pwned=1' in line]
    assert len(said) == 3, said     # the header line and two rows, as text
    assert not [line for line in said if re.search(r'`|\*\*|<|\]\(', line)]
    rows = [line for line in md.splitlines() if re.match(r'\| [ab] †', line)]
    assert len(rows) == 2 and all(r.count('|') == 4 for r in rows), rows
    text = (out / 'results.html').read_text()
    assert 'SECRET-KEY' not in text and base64.b64encode(SECRET).decode() not in text
    page = await browser.new_page()
    await page.goto('file://%s' % (out / 'results.html'))
    await page.wait_for_timeout(500)
    assert 'dataset.pwned=1' in await page.text_content('body')
    assert await page.evaluate('document.body.dataset.pwned') is None
    assert await page.evaluate("document.querySelectorAll('[onerror]').length") == 0


def test_a_sites_text_cannot_make_markdown():
    """The status table and the header line of a --target site whose Server
    header and failure would make a picture, code, bold, a tag, a new row
    or a new line: one row of three cells, none of it markup."""
    bad = HOSTILE % '../../var/session.key'
    site = {'name': 'box', 'kind': 'remote', 'status': 'failed',
            'url': 'http://10.0.0.5:80', 'server_header': bad,
            'reason': "verification failed: ugly: Content-Type '%s `c` **b** "
                      "<script>x</script> | new | cells |\n| row |'" % bad}
    results = {'targets': [site]}
    lines = report.status_table(results)[2:] + report.remote_line(results)
    assert len(lines) == 2 and lines[0].count('|') == 4, lines
    for line in lines:
        assert not re.search(r'!\[|\]\(|`|\*\*|<|\n', line), line
        assert 'onerror="document.body.dataset.pwned=1"' in line
    page = html.render('\n'.join(report.status_table(results) + ['']
                                  + report.remote_line(results)), os.devnull)
    assert '<img' not in page and '<script' not in page and '<b>' not in page


@pytest.mark.timeout(600)
@pytest.mark.bench
def test_a_target_at_fixed_rates_has_no_cpu_figures(site, tmp_path):
    tools.need_oha()
    code, err, _ = bench(tmp_path, '--target', site.url, '--latency',
                         '--pages', 'good', '--rates', '100', '--slo', 'p50=50ms',
                         '--confirm', '1')
    assert code == 0, err
    results = json.loads((tmp_path / 'results.json').read_text())
    steps = [r for r in results['latency'] if r['rate'] == '100/s']
    assert steps and steps[0]['oha']['requests'] > 0
    assert steps[0]['us_per_request'] == {'server': None, 'database': None}
    assert [c['target'] for c in results['capacity']] == [remote.default_label(site.url)]


@pytest.mark.parametrize('url, expected', [
    ('http://example.com', 'http://example.com:80'),
    ('http://10.0.0.5:8080/', 'http://10.0.0.5:8080'),
    ('http://[::1]:1717', 'http://[::1]:1717'),
])
def test_target_urls(url, expected):
    assert remote.parse(url) == expected
    assert remote.default_label(expected) == expected[len('http://'):]


@pytest.mark.parametrize('argv, message', [
    (['--target', 'https://example.com'], 'only http:// URLs'),
    (['--target', 'example.com:8080'], 'only http:// URLs'),
    (['--target', 'http://'], 'no host'),
    (['--target', 'http://h:port'], 'bad port'),
    (['--target', 'http://h/site'], 'without a path'),
    (['--target', 'http://a,http://b', '--label', 'one'], 'one per --target'),
    (['--target', 'http://a:1,http://a:1'], 'a label of its own'),
    (['--target', 'http://a', '--label', 'nginx'], 'makes itself'),
    (['--target', 'http://a', '--label', ENGINE], 'makes itself'),
    (['--target', 'http://a', '--label', 'a@3.12'], "no ' (', '@'"),
    (['--target', 'http://a', '--profile'], '--profile applies to the engines'),
    (['--target', 'http://a', '--workers', '2'], '--workers applies'),
    (['--target', 'http://a', '--pythons', '3.11'], '--pythons applies'),
    (['--target', 'http://a', '--tarantool-engine', 'vinyl'],
     '--tarantool-engine applies'),
])
def test_bad_targets_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        cli.plan(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_a_target_alone_runs_no_engine():
    s = cli.plan(['--target', 'http://a:1', '--out', os.devnull])
    assert s.engines == [] and s.remotes == [('a:1', 'http://a:1')]
    s = cli.plan(['--target', 'http://a:1', '--label', 'box', '--engines',
                      ENGINE, '--tarantool-engine', 'vinyl', '--out', os.devnull])
    assert [e.name for e in s.engines] == [ENGINE] and s.storages == ['vinyl']
    assert s.remotes == [('box', 'http://a:1')]

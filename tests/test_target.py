"""bench.py --target: a site already running, verified and timed like an
engine but not started by the bench; a dead or wrong site fails, a bad URL
is refused."""
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
from bench import cli, profile, remote, stats
from runtime.processes import answers
from plugins import tools

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


@pytest.mark.timeout(600)
@pytest.mark.bench
def test_a_target_at_fixed_rates_has_no_cpu_figures(site, tmp_path):
    tools.need_oha()
    code, err, _ = bench(tmp_path, '--target', site.url, '--latency',
                         '--pages', 'good', '--rates', '100', '--slo', 'p50=50ms')
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

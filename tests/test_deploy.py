"""deploy/ as docs/deploy.md shows it: the nginx front passes `nginx -t`
and fronts a real server over HTTPS (pages, a vote, static files from
nginx, the visitor's address reaching the per-IP limits, nginx's own limits
per address, a visitor served through a flood of half-sent heads), and the
systemd unit passes `systemd-analyze verify` and stops its command in
order. Only the paths, ports and the
certificate differ from the files in the repository."""
import asyncio
import os
import re
import shutil
import signal
import ssl
import subprocess
import time

import aiohttp
import pytest

from bench.nginx import temp_paths
from bench.pagecheck import ballots, session_cookie
from conftest import ROOT, ServerProcess, engine_args, free_port, wait_until
from runtime import processes
from runtime.processes import answers
from runtime.settings import DEFAULTS
from test_supervision import lines, wait_lines

DEPLOY = os.path.join(ROOT, 'deploy')
MAIN = '''daemon off;
master_process off;
error_log {dir}/error.log warn;
pid {dir}/nginx.pid;
include {deploy}/nginx-main.conf;
http {{
    include /etc/nginx/mime.types;
    access_log off;
{temp_paths}
    include {dir}/site.conf;
}}
'''


def site_config(upstream, http, https, cert, key):
    """deploy/nginx-stickers.conf for this checkout and these ports."""
    with open(os.path.join(DEPLOY, 'nginx-stickers.conf')) as f:
        text = f.read()
    swaps = [('/srv/stickers', ROOT), ('127.0.0.1:1717', '127.0.0.1:%d' % upstream),
             ('listen 80;', 'listen 127.0.0.1:%d;' % http),
             ('listen 443 ssl http2;', 'listen 127.0.0.1:%d ssl http2;' % https),
             ('listen [::]:80;', ''), ('listen [::]:443 ssl http2;', ''),
             ('/etc/letsencrypt/live/stickers.example.org/fullchain.pem', cert),
             ('/etc/letsencrypt/live/stickers.example.org/privkey.pem', key)]
    for old, new in swaps:
        assert old in text, old
        text = text.replace(old, new)
    return text


@pytest.fixture(scope='module')
def front(request, tmp_path_factory, start_server):
    """(https base URL, the server behind it) with nginx in front."""
    if shutil.which('nginx') is None or shutil.which('openssl') is None:
        pytest.fail('nginx and openssl are missing: ./run.sh setup installs them')
    d = str(tmp_path_factory.mktemp('front'))
    cert, key = os.path.join(d, 'cert.pem'), os.path.join(d, 'key.pem')
    subprocess.run(['openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes',
                    '-keyout', key, '-out', cert, '-days', '1', '-subj',
                    '/CN=localhost'], check=True, capture_output=True)
    engine = 'aiohttp-tarantool-one'
    server = start_server(engine, *engine_args(request, engine), '--proxy',
                          '127.0.0.1', '--limit-sessions', '3/m')
    http, https = free_port(), free_port()
    with open(os.path.join(d, 'site.conf'), 'w') as f:
        f.write(site_config(server.port, http, https, cert, key))
    with open(os.path.join(d, 'nginx.conf'), 'w') as f:
        f.write(MAIN.format(dir=d, deploy=DEPLOY, temp_paths=temp_paths(d)))
    argv = ['nginx', '-p', d, '-c', os.path.join(d, 'nginx.conf')]
    checked = subprocess.run(argv + ['-t'], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    nginx = subprocess.Popen(argv, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: answers('127.0.0.1', https), 10, 0.05,
                   lambda: (nginx.stderr.read() if nginx.poll() is not None
                            else 'nginx does not answer'), nginx)
        yield 'https://127.0.0.1:%d' % https, 'http://127.0.0.1:%d' % http, server
    finally:
        nginx.terminate()
        nginx.wait(10)


def visitor(address='127.0.0.1', cookie=None):
    """A client that connects from a loopback address of its own."""
    connector = aiohttp.TCPConnector(ssl=False, local_addr=(address, 0))
    headers = {'Cookie': 'sid=' + cookie} if cookie else {}
    return aiohttp.ClientSession(connector=connector, headers=headers,
                                 cookie_jar=aiohttp.DummyCookieJar())


async def test_pages_and_a_vote_through_the_front(front):
    base, _, _ = front
    async with visitor() as s:
        async with s.get(base + '/') as r:
            assert r.status == 200 and r.headers['Server'].startswith('nginx')
            assert r.headers.getall('X-Frame-Options') == ['DENY']
            assert r.headers.getall('X-Content-Type-Options') == ['nosniff']
            assert 'max-age' in r.headers['Strict-Transport-Security']
            cookie = session_cookie(r.headers)
            (_, win, lose), _ = ballots(await r.text())
    async with visitor(cookie=cookie) as s:
        async with s.post(base + '/', data={'win': win, 'lose': lose}) as r:
            assert r.status == 200 and 'Vote counted.' in await r.text()
        for path in ('/good', '/about', '/ugly', '/stickers'):
            async with s.get(base + path) as r:
                assert r.status == 200, path
        async with s.post(base + '/', data={'pad': 'x' * 9000}) as r:
            assert r.status == 413


async def test_http_goes_to_https(front):
    _, plain, _ = front
    async with visitor() as s:
        async with s.get(plain + '/good', allow_redirects=False) as r:
            assert r.status == 301 and r.headers['Location'].startswith('https://')


async def test_static_files_come_from_nginx(front):
    base, _, _ = front
    async with visitor() as s:
        async with s.get(base + '/static/style.css') as r:
            body = await r.read()
            # expires and ETag: nginx's own file answer, not server.py's.
            assert r.status == 200 and 'max-age=3600' in r.headers['Cache-Control']
            assert r.headers.get('ETag') and r.headers.getall(
                'X-Content-Type-Options') == ['nosniff']
        with open(os.path.join(ROOT, 'static', 'style.css'), 'rb') as f:
            assert body == f.read()
        async with s.get(base + '/packs') as r:      # not a static path
            assert r.status == 404
        async with s.get(base + '/static/../server.py') as r:
            assert r.status in (400, 403, 404)


async def test_the_visitor_address_reaches_the_limits(front):
    """--limit-sessions 3/m per visitor: the fourth new session from one
    address is refused, whatever X-Forwarded-For it sends, and another
    address still gets one; nginx's own address is not what counts."""
    base, _, _ = front

    async def new_session(address, spoof=None):
        async with visitor(address) as s:
            headers = {'X-Forwarded-For': spoof} if spoof else {}
            async with s.get(base + '/good', headers=headers) as r:
                return r.status
    statuses = [await new_session('127.0.0.2') for _ in range(3)]
    assert statuses == [200, 200, 200]
    assert await new_session('127.0.0.2', spoof='203.0.113.9') == 429
    assert await new_session('127.0.0.3') == 200


async def tls_connection(port, address, data, timeout=5):
    """(reader, writer) of a TLS connection from `address` that has sent
    `data`."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    reader, writer = await asyncio.wait_for(asyncio.open_connection(
        '127.0.0.1', port, ssl=context, local_addr=(address, 0)), timeout)
    writer.write(data)
    await writer.drain()
    return reader, writer


def https_port(base):
    return int(base.rsplit(':', 1)[1])


def test_the_front_keeps_the_edge_timeouts():
    with open(os.path.join(DEPLOY, 'nginx-stickers.conf')) as f:
        text = f.read()
    for directive, seconds in (('client_header_timeout', DEFAULTS.header_timeout),
                               ('client_body_timeout', DEFAULTS.body_timeout),
                               ('keepalive_timeout', DEFAULTS.keepalive_timeout)):
        found = set(re.findall(r'^\s*%s (\d+)s;' % directive, text, re.M))
        assert found == {str(int(seconds))}, (directive, found)


async def test_a_half_head_flood_leaves_room_for_a_visitor(front):
    """800 TLS connections from one address, each with half a request
    head: a new visitor still gets its page, from an nginx that names no
    version and marks the cookie Secure; the half heads are dropped after
    the header timeout."""
    base, _, _ = front
    deadline = time.monotonic() + 20

    async def half_head():
        """One connection held, as an attacker would: again when refused."""
        while time.monotonic() < deadline:
            try:
                return await tls_connection(https_port(base), '127.0.0.8', (
                    b'GET / HTTP/1.1\r\nHost: localhost\r\nUser-'), timeout=None)
            except (OSError, ssl.SSLError):
                await asyncio.sleep(0.1)
    flood = [asyncio.ensure_future(half_head()) for _ in range(800)]
    await asyncio.wait(flood, timeout=8)
    try:
        async with visitor('127.0.0.4') as s:
            async with s.get(base + '/', timeout=aiohttp.ClientTimeout(total=5)) as r:
                assert r.status == 200 and r.headers['Server'] == 'nginx'
                flags = [p.strip().lower() for p in r.headers['Set-Cookie'].split(';')]
                assert flags[0].startswith('sid=') and 'secure' in flags, flags
        # The flood was there all along: every half head still open.
        assert all(c.done() and c.result() for c in flood)
        held = [c.result()[0] for c in flood]
        assert not any(reader.at_eof() for reader in held)
        started = time.monotonic()

        async def dropped(reader):
            try:
                return await asyncio.wait_for(reader.read(), 20) == b''
            except (OSError, ssl.SSLError):
                return True
        assert all(await asyncio.gather(*(dropped(r) for r in held)))
        assert time.monotonic() - started < DEFAULTS.header_timeout + 5
    finally:
        for c in flood:
            c.cancel()
            if c.done() and not c.cancelled() and not c.exception() and c.result():
                c.result()[1].transport.abort()


async def test_requests_per_address_are_bounded(front):
    """limit_req: past the burst, one address's requests get nginx's 429
    while another address is served; limit_conn: an address holding 20 slow
    bodies gets a 429 for the 21st request."""
    base, _, _ = front
    async with visitor('127.0.0.5') as s:
        statuses = []
        for _ in range(200):
            async with s.get(base + '/about') as r:
                statuses.append(r.status)
                if r.status == 429:
                    assert r.headers['Server'] == 'nginx' and 'nginx' in await r.text()
    assert statuses[:100] == [200] * 100 and 429 in statuses, statuses
    port = https_port(base)
    head = (b'POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: '
            b'application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nwin=')
    slow = [await tls_connection(port, '127.0.0.6', head) for _ in range(20)]
    try:
        await asyncio.sleep(0.3)
        reader, writer = await tls_connection(port, '127.0.0.6', head)
        answer = await asyncio.wait_for(reader.readline(), 5)
        writer.transport.abort()
        assert answer.startswith(b'HTTP/1.1 429'), answer
        assert not any(r.at_eof() for r, _ in slow)
    finally:
        for _, writer in slow:
            writer.transport.abort()
    async with visitor('127.0.0.7') as s:
        async with s.get(base + '/about') as r:
            assert r.status == 200


@pytest.mark.server
def test_the_unit_file_verifies(tmp_path):
    if shutil.which('systemd-analyze') is None:
        pytest.skip('no systemd-analyze here (systemd is not installed)')
    with open(os.path.join(DEPLOY, 'stickers.service')) as f:
        text = f.read()
    assert '/srv/stickers/.venv/bin/python server.py' in text
    unit = tmp_path / 'stickers.service'
    unit.write_text(text.replace('/srv/stickers', ROOT))
    done = subprocess.run(['systemd-analyze', 'verify', str(unit)],
                          capture_output=True, text=True)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    # The command it runs is one server.py accepts.
    command = re.search(r'ExecStart=\S+ (server\.py.*?)\n(?!\s)', text.replace(
        '\\\n', ' ')).group(1).split()
    help_ = subprocess.run([os.path.join(ROOT, '.venv', 'bin', 'python')] + command[:1]
                           + ['--help'], capture_output=True, text=True, cwd=ROOT)
    for option in (o for o in command if o.startswith('-')):
        assert option in help_.stdout, option


def unit():
    """{key: value} of deploy/stickers.service (continued lines joined)."""
    with open(os.path.join(DEPLOY, 'stickers.service')) as f:
        text = f.read().replace('\\\n', ' ')
    return dict(line.split('=', 1) for line in text.splitlines()
                if '=' in line and not line.startswith('#'))


def tree(pid):
    found = set(processes.children(pid))
    for child in list(found):
        found |= tree(child)
    return found


@pytest.mark.server
def test_the_unit_stops_the_site_in_order(checkout, tmp_path):  # noqa: F811
    """The unit's command in a fresh copy of the checkout (no var/), stopped
    as systemd stops it with the unit's KillMode: the parent stops its
    workers, then the Tarantool it started, restarts nothing and exits 0
    before anything is left for the final SIGKILL."""
    settings = unit()
    assert settings['ReadWritePaths'].startswith('-')
    assert not os.path.exists(os.path.join(checkout, 'var'))
    argv = settings['ExecStart'].split()
    assert argv[1] == 'server.py' and argv[2] == '-e' and argv[6] == '-p'
    env = {'STICKERS_TARANTOOL_PORT': str(free_port())}
    site = ServerProcess(argv[3], argv[4:6] + argv[8:], str(tmp_path / 'log'),
                         root=checkout, env=env)
    try:
        wait_lines(site, 'serving ', 1, 30)
        everything = tree(site.process.pid)
        assert len(everything) >= 3, everything      # two workers, Tarantool
        mode = settings.get('KillMode', 'control-group')
        for pid in [site.process.pid] + (
                sorted(everything) if mode == 'control-group' else []):
            os.kill(pid, signal.SIGTERM)
        code = site.process.wait(int(settings['TimeoutStopSec']))
        left = [p for p in everything if processes.state(p) not in (None, 'Z')]
    finally:
        site.stop()
    for pid in everything:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    output = site.output()
    assert code == 0 and left == [], (left, output)
    assert not lines(output, 'restarted') and not lines(output, 'starting another'), output
    stopped = lines(output, 'Tarantool stopped')
    assert len(stopped) == 1, output
    order = [line for line in output.splitlines()
             if re.search(r'worker \d+ server: stopped|Tarantool stopped', line)]
    assert len(order) == 3 and 'Tarantool stopped' in order[-1], output

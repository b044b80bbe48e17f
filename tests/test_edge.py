"""The HTTP edge on every framework: slow clients time out, a connection cap
keeps visitors served, HEAD and security headers, per-IP limits, and a
database outage logged in a few lines."""
import asyncio
import os
import re
import socket
import sys
import time

import pytest

from bench.engine import FROZEN
from bench.pagecheck import all_stickers, ballots, client, vote_total
from conftest import (ServerProcess, engine_args, fetch, load_small,
                      remove_postgres, start_postgres, start_tarantool,
                      tarantool_address, until)
from runtime import frameworks
from runtime.processes import ESTABLISHED, tcp_sockets
from plugins.servers import one_of_each

ENGINES = one_of_each(['aiohttp-tarantool-one-uvloop', 'sanic-tarantool-one',
           'japronto-tarantool-one-uvloop', 'uvicorn-tarantool-one',
           'granian-tarantool-one-uvloop', 'fastapi-tarantool-one',
           'socketify-tarantool-one'])
# uWebSockets has a fixed timeout (10 s) for heads and bodies, no connection
# cap, and pipelines only answers that need no waiting (see README).
UWS = ('socketify-tarantool-one',)
# granian's core, under ASGI or RSGI: its own limits stand in for edge's.
GRANIAN = ('granian-', 'rsgi-')
# The engines whose framework is served through runtime/edge.py.
EDGED = [e for e in ENGINES if frameworks.BY_NAME[e.split('-')[0]].edge]
# Robyn's actix-web has no head, body or keep-alive timeout and no
# connection cap that Robyn lets its caller set (docs/robyn.md).
ROBYN = 'robyn-'


# Where a test is for some engines only, it is asked of those alone.
# Timed: head, body and keep-alive timeouts (not Robyn's actix-web);
TIMED = [e for e in ENGINES if not e.startswith(ROBYN)]
# as set, with a connection cap (not uWebSockets' fixed 10 s and no cap);
SET = [e for e in TIMED if e not in UWS]
# the cap closing the oldest idle connection (granian's makes new ones wait).
EVICTING = [e for e in SET if not e.startswith(GRANIAN)]
GRANIANS = [e for e in ENGINES if e.startswith(GRANIAN)]


# Short head and body limits, so that a test sees them act; the keep-alive
# limit longer than a test waits, so that it does not act in their place.
SHORT = ['--header-timeout', '1', '--body-timeout', '1',
         '--keepalive-timeout', '60']
LENGTH = re.compile(br'\r\ncontent-length: *(\d+)', re.IGNORECASE)
STATUS = re.compile(br'HTTP/1\.[01] (\d{3}) ')
# Long enough for any answer on a busy machine; what never closes, fails.
PATIENCE = 20


@pytest.fixture(scope='module', params=ENGINES)
def engine(request):
    return request.param


@pytest.fixture(scope='module')
def short(request, engine, start_server):
    return start_server(engine, *(engine_args(request, engine) + SHORT))


async def closed(port, data=b'', trickle=None):
    """Seconds until the server ends a connection that sent `data` (then
    one byte of `trickle` every 0.2 s)."""
    reader, writer = await asyncio.open_connection('127.0.0.1', port)
    start = time.monotonic()

    async def drip():
        for byte in trickle or b'':
            await asyncio.sleep(0.2)
            writer.write(bytes([byte]))
    dripping = asyncio.ensure_future(drip())
    try:
        writer.write(data)
        try:
            while await asyncio.wait_for(reader.read(65536), PATIENCE):
                pass
        except ConnectionResetError:
            pass
        return time.monotonic() - start
    finally:
        dripping.cancel()
        writer.close()


async def answers(port, *requests, apart=False):
    """[(status, head, body)] of the answers to raw requests sent at once
    (apart: each after the answer to the one before)."""
    reader, writer = await asyncio.open_connection('127.0.0.1', port)
    try:
        if not apart:
            writer.write(b''.join(requests))
        result = []
        for sent in requests:
            if apart:
                writer.write(sent)
            head = await asyncio.wait_for(reader.readuntil(b'\r\n\r\n'),
                                          PATIENCE)
            length = LENGTH.search(head)
            body = b''
            if length and not sent.startswith(b'HEAD '):
                body = await reader.readexactly(int(length.group(1)))
            result.append((int(STATUS.match(head).group(1)), head, body))
        return result
    finally:
        writer.close()


def get(path, method=b'GET'):
    return b'%s %s HTTP/1.1\r\nHost: t\r\n\r\n' % (method, path)


@pytest.mark.parametrize('engine', SET, scope='module')
async def test_partial_head_is_closed(short, engine):
    assert await closed(short.port, b'GET /ugly HTTP/1.1\r\nHost: t\r\n') \
        < PATIENCE
    # A byte now and then does not keep it open.
    assert await closed(short.port, b'GET /ugly HTTP/1.1\r\n',
                        trickle=b'X-Slow: ' + b'z' * 200) < PATIENCE


@pytest.mark.parametrize('engine', SET, scope='module')
async def test_partial_body_is_closed(short, engine):
    head = (b'POST / HTTP/1.1\r\nHost: t\r\nContent-Type: '
            b'application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n')
    assert await closed(short.port, head + b'win=') < PATIENCE
    assert await closed(short.port, head, trickle=b'w' * 99) < PATIENCE


class CountingSearch:
    """A compiled pattern that counts the bytes its searches start on."""

    def __init__(self, pattern):
        self.pattern, self.scanned = pattern, 0

    def search(self, string, pos=0, *args):
        self.scanned += len(string) - pos
        return self.pattern.search(string, pos, *args)


class Inner(asyncio.Protocol):
    """The framework's protocol behind an edge: takes what it is given."""
    pipeline_empty = True

    def __init__(self):
        self.received = b''

    def data_received(self, data):
        self.received += data


class Transport(asyncio.Transport):
    def get_write_buffer_size(self):
        return 0

    def is_closing(self):
        return False

    def pause_reading(self):
        pass

    def resume_reading(self):
        pass


def edge_connection():
    from runtime import edge
    gate = edge.Gate(edge.LIMITS, asyncio.new_event_loop())
    return edge.Edge(gate, Inner)


def japronto_connection():
    from runtime import edge
    from japronto_server.pipeline import Connection
    gate = edge.Gate(edge.LIMITS, asyncio.new_event_loop())
    return Connection(gate, Inner, (b'GET /ugly ',), 8192, set())


@pytest.mark.parametrize('make', [
    edge_connection,
    pytest.param(japronto_connection,
                 marks=[pytest.mark.legacy, pytest.mark.needs('japronto')])])
def test_a_head_sent_byte_by_byte_is_scanned_once(monkeypatch, make):
    """A 60 KiB head arriving a byte at a time: the search for its end
    resumes where it stopped, so the bytes searched stay a few times the
    head (from byte 0 on every byte, they were some 10^9), and the request
    still goes through whole."""
    from runtime import edge
    counting = CountingSearch(edge.HEAD_END)
    monkeypatch.setattr(edge, 'HEAD_END', counting)
    connection = make()
    connection.connection_made(Transport())
    head = (b'GET /about HTTP/1.1\r\nHost: t\r\nX-Slow: ' + b'z' * 60000
            + b'\r\n\r\n')
    for i in range(len(head)):
        connection.data_received(head[i:i + 1])
    assert connection.inner.received == head
    assert connection.phase == edge.IDLE
    assert counting.scanned < 16 * len(head)


@pytest.mark.parametrize('make', [
    edge_connection,
    pytest.param(japronto_connection,
                 marks=[pytest.mark.legacy, pytest.mark.needs('japronto')])])
def test_a_body_sent_byte_by_byte_is_not_scanned_again(monkeypatch, make):
    """Behind a request, a POST whose body arrives a byte at a time: its
    head is searched for once, not once per byte of the body, and both
    requests go through whole."""
    from runtime import edge
    counting = CountingSearch(edge.HEAD_END)
    monkeypatch.setattr(edge, 'HEAD_END', counting)
    connection = make()
    connection.connection_made(Transport())
    body = b'win=' + b'w' * 8000
    sent = (get(b'/ugly') + b'POST / HTTP/1.1\r\nHost: t\r\nContent-Length: '
            + str(len(body)).encode() + b'\r\n\r\n')
    connection.data_received(sent + body[:100])
    for i in range(100, len(body)):
        connection.data_received(body[i:i + 1])
    assert connection.inner.received == sent + body
    assert counting.scanned < 4 * len(sent + body)


@pytest.mark.parametrize('engine', TIMED)
async def test_idle_connection_is_closed(request, engine, start_server):
    short = start_server(engine, *(engine_args(request, engine) + [
        '--keepalive-timeout', '1', '--header-timeout', '60',
        '--body-timeout', '60']))
    if engine not in UWS:   # its fixed 10 s before a first request
        assert await closed(short.port) < PATIENCE
    assert await closed(short.port, get(b'/ugly')) < PATIENCE
    # A connection in use is not: three requests spaced by half the limit.
    reader, writer = await asyncio.open_connection('127.0.0.1', short.port)
    try:
        for _ in range(3):
            writer.write(get(b'/ugly'))
            head = await reader.readuntil(b'\r\n\r\n')
            assert await reader.readexactly(
                int(LENGTH.search(head).group(1))) == b'UGLY'
            await asyncio.sleep(0.5)
    finally:
        writer.close()
    assert short.process.poll() is None
    assert 'Traceback' not in short.output()


@pytest.mark.parametrize('engine', EVICTING)
async def test_connection_cap_keeps_visitors_served(request, engine,
                                                    start_server):
    server = start_server(engine, *(engine_args(request, engine) + [
        '--max-connections', '50', '--header-timeout', '120']))
    slow = []
    try:
        for _ in range(200):
            reader, writer = await asyncio.open_connection('127.0.0.1',
                                                           server.port)
            writer.write(b'GET /ugly HTTP/1.1\r\nHost: t\r\n')
            slow.append((reader, writer))
        started = time.monotonic()
        assert [a[0] for a in await answers(server.port, get(b'/ugly'))] \
            == [200]
        assert time.monotonic() - started < PATIENCE
        # The oldest slow ones made room: at most the cap stay open.
        await asyncio.sleep(0.5)
        still_open = 0
        for reader, _ in slow:
            try:
                data = await asyncio.wait_for(reader.read(1), 0.01)
            except asyncio.TimeoutError:
                still_open += 1
            except ConnectionResetError:
                pass
            else:
                still_open += bool(data)
        assert still_open <= 50
    finally:
        for _, writer in slow:
            writer.close()
    assert server.process.poll() is None


@pytest.mark.parametrize('engine', GRANIANS)
async def test_granian_cap_makes_new_connections_wait(request, engine,
                                                      start_server):
    """granian's core accepts no connection beyond the cap until one
    ends: a visitor waits for the slow ones' head timeout."""
    server = start_server(engine, *(engine_args(request, engine) + [
        '--max-connections', '5', '--header-timeout', '3']))
    slow = []
    try:
        for _ in range(5):
            reader, writer = await asyncio.open_connection('127.0.0.1',
                                                           server.port)
            writer.write(b'GET /ugly HTTP/1.1\r\nHost: t\r\n')
            slow.append((reader, writer))
        visitor = asyncio.ensure_future(answers(server.port, get(b'/ugly')))
        done, _ = await asyncio.wait([visitor], timeout=1)
        assert not done
        assert [a[0] for a in await visitor] == [200]
        for reader, _ in slow:      # closed by the head timeout
            assert await asyncio.wait_for(reader.read(), PATIENCE) == b''
    finally:
        for _, writer in slow:
            writer.close()
    assert server.process.poll() is None


@pytest.mark.parametrize('engine', TIMED)
async def test_clients_that_never_read_are_closed(request, engine,
                                                  start_server):
    """Clients that pipeline many requests and read no answer hold a
    connection only while their pages work and then a keep-alive period:
    at the cap a new visitor is served, and none of them stays open."""
    server = start_server(engine, *(engine_args(request, engine) + [
        '--max-connections', '10', '--keepalive-timeout', '2']))
    stuffed = []
    try:
        for _ in range(10):
            sock = socket.create_connection(('127.0.0.1', server.port))
            # A small receive window fills at once.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            try:
                sock.send(get(b'/about') * 2000)
            except BlockingIOError:
                pass
            stuffed.append(sock)
        # While their pages still work (filling the buffers), a visitor
        # may be refused; once they stall, they make room.
        began = time.monotonic()

        async def served():
            try:
                return await answers(server.port, get(b'/ugly'))
            except (ConnectionError, asyncio.IncompleteReadError):
                return None
        got = await until(served, PATIENCE, 0.5, 'visitors locked out')
        assert [a[0] for a in got] == [200]
        await until(lambda: not tcp_sockets(server.process.pid, server.port,
                                            ESTABLISHED),
                    PATIENCE - (time.monotonic() - began), 0.2,
                    'a non-reader stays open')
    finally:
        for sock in stuffed:
            sock.close()
    assert server.process.poll() is None


# Bodies that never come, each sent on 20 sockets at a cap of 20: a head
# announcing a chunked body, a length in odd capitals, and a chunked body
# dribbled a chunk every DRIP s.
CHUNKED_HEAD = (b'POST / HTTP/1.1\r\nHost: x\r\n'
                b'Transfer-Encoding: chunked\r\n\r\n')
BODILESS = {
    'chunked': (CHUNKED_HEAD, b''),
    'odd capitals': (b'POST / HTTP/1.1\r\nHost: x\r\ncontent-LengtH: 100'
                     b'\r\n\r\n', b''),
    'trickle': (CHUNKED_HEAD, b'1\r\nw\r\n'),
}
BODY_TIMEOUT = 2
DRIP = 0.5


async def _ends(reader, writer, drip, within):
    """True if the server ends the connection within `within` seconds
    while `drip` is sent every DRIP s."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if not await asyncio.wait_for(reader.read(65536), DRIP):
                return True
        except asyncio.TimeoutError:
            if drip:
                writer.write(drip)
        except ConnectionError:
            return True
    return False


async def hold(held, port, count, head):
    """count more connections to port in held, each sent head."""
    for _ in range(count):
        held.append(await asyncio.open_connection('127.0.0.1', port))
        held[-1][1].write(head)


async def visitor_served(port, within, why):
    """Seconds until a new visitor's GET /ugly is answered 200, trying
    while fewer than `within` have passed (then failing with `why`)."""
    started = time.monotonic()
    while True:
        try:
            served = await answers(port, get(b'/ugly'))
            break
        except (ConnectionError, asyncio.IncompleteReadError):
            assert time.monotonic() - started < within, why
            await asyncio.sleep(0.05)
    assert [a[0] for a in served] == [200]
    return time.monotonic() - started


@pytest.mark.parametrize('engine', TIMED)
async def test_bodies_that_never_come_do_not_lock_visitors_out(
        request, engine, start_server):
    """A visitor is served within the body timeout plus a second, and each
    connection whose body does not come is closed by the body timeout (a
    trickle does not extend it)."""
    server = start_server(engine, *(engine_args(request, engine) + [
        '--max-connections', '20', '--header-timeout', str(BODY_TIMEOUT),
        '--body-timeout', str(BODY_TIMEOUT), '--keepalive-timeout', '10']))
    # uWebSockets: its own fixed 10 s and no cap, so the three at once.
    closes_within = (10 if engine in UWS else BODY_TIMEOUT) + 2

    async def attack(name, head, drip):
        held = []
        try:
            await hold(held, server.port, 20, head)
            await asyncio.sleep(0.2)
            waited = await visitor_served(server.port, BODY_TIMEOUT + 1,
                                          'visitors locked out by %s bodies' % name)
            assert waited < BODY_TIMEOUT + 1, name
            ended = await asyncio.gather(*(
                _ends(reader, writer, drip, closes_within)
                for reader, writer in held))
            assert all(ended), '%d %s connections stay open' % (
                ended.count(False), name)
        finally:
            for _, writer in held:
                writer.close()
    attacks = [attack(name, *how) for name, how in BODILESS.items()]
    if engine in UWS:
        await asyncio.gather(*attacks)
    else:
        for one in attacks:
            await one
    assert server.process.poll() is None
    assert 'Traceback' not in server.output()


async def test_a_length_of_many_digits_is_refused(short, engine):
    """More digits than int() takes (4,300): a 4xx, no traceback."""
    head = (b'POST / HTTP/1.1\r\nHost: t\r\nContent-Length: ' + b'9' * 5000
            + b'\r\n\r\n')
    [(status, _, _)] = await answers(short.port, head)
    assert 400 <= status < 500
    assert [a[0] for a in await answers(short.port, get(b'/ugly'))] == [200]
    assert 'Traceback' not in short.output()


HTML_PATHS = [b'/', b'/good', b'/bad', b'/about', b'/nope']
OTHER_PATHS = [b'/ugly', b'/stickers', b'/static/style.css', b'/favicon.ico']


async def test_head_answers_like_get(short, engine):
    for path in HTML_PATHS + OTHER_PATHS:
        # The GET behind the HEAD on the same connection proves it had no body.
        (h_status, h_head, h_body), (g_status, g_head, g_body) = await answers(
            short.port, get(path, b'HEAD'), get(path),
            apart=engine in UWS)
        assert h_status == g_status, path
        assert h_body == b''
        assert g_body, path
        assert header_names(h_head) == header_names(g_head), path
        # Robyn's HEAD answers say Content-Length: 0 (docs/robyn.md).
        if ('japronto' not in engine and not engine.startswith(ROBYN)
                and path in OTHER_PATHS):
            assert LENGTH.search(h_head).group(1) == str(len(g_body)).encode()


def header_names(head):
    # A HEAD may leave out what depends on the body alone.
    return {line.split(b':')[0].decode().lower()
            for line in head.split(b'\r\n')[1:] if line} - {'content-length'}


async def test_security_headers(short):
    for path in HTML_PATHS + OTHER_PATHS:
        for method in (b'GET', b'HEAD'):
            [(status, head, _)] = await answers(short.port, get(path, method))
            assert re.search(br'(?i)\r\nx-content-type-options: nosniff\r\n',
                             head), (path, head)
            server = re.search(br'(?i)\r\nserver: *([^\r]*)\r\n', head)
            assert server and server.group(1) == b'stickers', head
            html = b'text/html' in head
            assert html == (path in HTML_PATHS), path
            assert bool(re.search(br'(?i)\r\nx-frame-options: deny\r\n',
                                  head)) == html, head
            assert bool(re.search(
                br"(?i)\r\ncontent-security-policy: frame-ancestors 'none'\r\n",
                head)) == html, head
    # What the framework answers by itself names no versions either.
    [(status, head, _)] = await answers(short.port, b'DELETE /good HTTP/1.1\r\n'
                                        b'Host: t\r\n\r\n')
    assert status in (404, 405)
    server = re.search(br'(?i)\r\nserver: *([^\r]*)\r\n', head)
    assert server is None or not re.search(br'\d', server.group(1)), head


async def test_long_static_paths_are_refused(short, engine):
    """A static path up to the head limit is refused (404 from the page,
    or the server's own 4xx for a head that long), and the site serves on."""
    for path in (b'/static/' + b'a/' * 32000 + b'style.css',
                 b'/img/' + b'x' * 60000, b'/static/a/../../server.py'):
        try:
            [(status, _, body)] = await answers(short.port, get(path))
        except (ConnectionError, asyncio.IncompleteReadError):
            continue    # closed at once for a head that long
        if status == 505 and engine.startswith('socketify') and len(path) > 8192:
            continue    # uWebSockets, for a head read in parts (docs/socketify.md)
        assert 400 <= status < 500, path[:40]
        assert b'import' not in body
    [(status, _, _)] = await answers(short.port, get(b'/static/style.css'))
    assert status == 200


# A POST whose Content-Length comes before 66,000 bytes of padding in a
# header's value: past edge's head limit, however the framework counts.
PADDED = (b'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nX:'
          + b' ' * 66000 + b'a\r\n\r\n')


@pytest.mark.parametrize('engine', EDGED)
async def test_heads_past_the_limit_do_not_hold_the_cap(request, engine,
                                                       start_server):
    """16 heads past the limit, at a cap of 16, with long timeouts: each is
    refused (a 4xx, or closed), and a new visitor is served within a
    second (they held the cap until the body timeout)."""
    server = start_server(engine, *(engine_args(request, engine) + [
        '--max-connections', '16', '--header-timeout', '60',
        '--body-timeout', '60']))
    held = []
    try:
        await hold(held, server.port, 16, PADDED)
        for reader, _ in held:
            try:
                head = await asyncio.wait_for(reader.read(65536), PATIENCE)
            except ConnectionResetError:
                continue
            if head:
                assert 400 <= int(STATUS.match(head).group(1)) < 500, head
        await visitor_served(server.port, 1, 'visitors locked out')
    finally:
        for _, writer in held:
            writer.close()
    assert 'Traceback' not in server.output()


async def test_other_http_versions_are_refused(short, engine):
    """HTTP/2.0 or 0.9 in an HTTP/1 request line: a 4xx or 505, no
    traceback; through edge, after the answer to a request before it on the
    connection, then closed."""
    for version in (b'HTTP/2.0', b'HTTP/0.9', b'HTTP/1.2', b'HTTP/3'):
        head = b'GET /ugly %s\r\nHost: t\r\n\r\n' % version
        try:
            [(status, _, _)] = await answers(short.port, head)
        except (ConnectionError, asyncio.IncompleteReadError):
            assert engine not in EDGED, version    # edge always answers
            continue
        assert 400 <= status < 500 or status == 505, (version, status)
        if engine in EDGED:
            [(first, _, _), (second, head, _)] = await answers(
                short.port, get(b'/ugly'),
                b'GET /ugly %s\r\nHost: t\r\n\r\n' % version)
            assert first == 200 and second in (400, 505), (version, second)
            assert b'connection: close' in head.lower()
    assert [a[0] for a in await answers(short.port, get(b'/ugly'))] == [200]
    assert 'Traceback' not in short.output()


async def test_limits_refuse_a_burst_and_count_what_they_allow(
        request, engine, start_server):
    server = start_server(engine, *(engine_args(request, engine) + [
        '--limit-sessions', '4/m', '--limit-votes', '3/m']))
    url = server.url
    status, headers, html = await fetch(url + '/')
    assert status == 200
    cookie = headers['Set-Cookie'].split(';')[0].split('=', 1)[1]
    async with client() as s:
        before = vote_total(await all_stickers(s, url))
    for _ in range(3):
        _, win, lose = ballots(html)[0]
        status, _, html = await fetch(url, cookie, {'win': win, 'lose': lose})
        assert status == 200 and 'Vote counted.' in html
    _, win, lose = ballots(html)[0]
    status, headers, html = await fetch(url, cookie, {'win': win, 'lose': lose})
    assert status == 429
    assert int(headers['Retry-After']) >= 1
    assert 'Too many requests' in html
    async with client() as s:
        assert vote_total(await all_stickers(s, url)) == before + 3
    # New sessions: one was taken above; three more, then no more.
    statuses = [(await fetch(url + '/good'))[0] for _ in range(5)]
    assert statuses == [200, 200, 200, 429, 429]
    # A visitor with a session is not a new one.
    assert (await fetch(url + '/good', cookie))[0] == 200


async def test_without_limits_nothing_is_refused(short):
    statuses = [(await fetch(short.url + path))[0]
                for path in ('/', '/good') * 15]
    assert set(statuses) == {200}
    for _ in range(15):
        status, _, _ = await fetch(short.url, form={'win': 'a' * 22,
                                                    'lose': 'b' * 22})
        assert status == 409


class TarantoolOutage:
    def __init__(self, tmp_path):
        self.db = start_tarantool(str(tmp_path / 'db'))

    async def load(self):
        from data_interface.address import as_admin
        from data_interface.tarantool.asynctnt_data import AsynctntData
        await load_small(AsynctntData(as_admin(tarantool_address(self.db))))
        return ['--tarantool', '%s:%d' % (self.db.host, self.db.port)]

    def down(self):
        self.db.kill()

    def up(self):
        self.db.start()

    def remove(self):
        self.db.stop()


class PostgresOutage:
    def __init__(self, tmp_path):
        self.db = start_postgres()

    async def load(self):
        from data_interface.postgres.asyncpg_data import PostgresData
        await load_small(PostgresData(self.db.owner_dsn))
        return ['--postgres', self.db.dsn]

    def down(self):
        self.db.stop('immediate')

    def up(self):
        self.db.start()

    def remove(self):
        remove_postgres(self.db)


class DjangoOutage(PostgresOutage):
    """The Django ORM's own tables, loaded in a process of their own
    (Django has one database per process), the site as their owner."""

    async def load(self):
        loader = await asyncio.create_subprocess_exec(
            sys.executable, '-c', 'import asyncio, sys; '
            'sys.path[:0] = [".", "tests"]; from plugins.databases import load_small; '
            'from data_interface.django_orm.data import DjangoData; '
            'asyncio.run(load_small(DjangoData(sys.argv[1])))',
            self.db.owner_dsn,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        assert await loader.wait() == 0
        return ['--postgres', self.db.owner_dsn]


@pytest.mark.db
@pytest.mark.server
@pytest.mark.parametrize('engine, database', [
    (e, TarantoolOutage) for e in ENGINES] + [
    ('sanic-tarantool-multi-uvloop', TarantoolOutage),
    ('aiohttp-postgres-pool-uvloop', PostgresOutage),
    ('aiohttp-django-pool-uvloop', DjangoOutage),
    ('django-django-pool-uvloop', DjangoOutage)])
async def test_outage_is_logged_in_a_few_lines(tmp_path, engine, database):
    db = database(tmp_path)
    try:
        server = ServerProcess(engine, await db.load(),
                               str(tmp_path / 'server.log'))
        try:
            async with client() as s:
                async def status(path):
                    async with s.get(server.url + path) as r:
                        await r.read()
                        return r.status
                assert await status('/good') == 200
                before = len(server.output().splitlines())
                db.down()
                statuses = []
                # Spread over a few seconds: a line per retry or per second
                # would show.
                for _ in range(30):
                    statuses += await asyncio.gather(
                        *[status('/good') for _ in range(10)])
                    await asyncio.sleep(0.1)
                assert statuses == [503] * 300
                # Built at start, the pack list needs no database.
                assert await status('/stickers') == 200
                # (the start-up's last line may come late on a busy host)
                lines = [l for l in server.output().splitlines()[before:]
                         if FROZEN not in l]
                assert len(lines) <= 5, '\n'.join(lines)
                assert sum('database unavailable' in l for l in lines) == 1
                db.up()
                async def good():
                    return await status('/good') == 200
                await until(good, 30, 0.2, server.output)
            back = [l for l in server.output().splitlines()
                    if 'database back after' in l]
            assert len(back) == 1, server.output()
            refused = int(re.search(r'(\d+) requests got 503', back[0]).group(1))
            assert refused >= 300
        finally:
            assert server.stop() == 0
    finally:
        db.remove()


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class Lines:
    def __init__(self):
        self.lines = []

    def warning(self, text, *args):
        self.lines.append(text % args)


def test_outage_lines_start_summary_and_back():
    from pages.outage import Outage
    clock, log = Clock(), Lines()
    outage = Outage(log, every=5.0, clock=clock)
    outage.up()
    assert log.lines == []
    for _ in range(1279):       # 10 s of failures, 128 a second
        outage.down('refused')
        clock.now += 1 / 128
    outage.down('refused', refused=0)   # a background task: not a request
    assert len(log.lines) == 2
    assert log.lines[0] == 'database unavailable: refused'
    assert log.lines[1] == ('database still unavailable after 5 s: 640 '
                            'requests got 503 in the last 5 s (refused)')
    clock.now += 2
    outage.up()
    outage.up()
    assert log.lines[2] == 'database back after 12.0 s; 1279 requests got 503'
    assert len(log.lines) == 3


def test_rate_limit_refills_and_stays_bounded():
    from pages.limits import RateLimit, parse_rate
    assert parse_rate('3/m') == (3, 60) and parse_rate('5') == (5, 1)
    assert parse_rate('0') is None
    for bad in ('', 'x', '3/d', '-1/s', '1.5/s'):
        with pytest.raises(ValueError):
            parse_rate(bad)
    clock = Clock()
    limit = RateLimit(3, 60, max_addresses=100, clock=clock)
    assert [limit.take('a') for _ in range(4)] == [0, 0, 0, 20]
    assert limit.take('b') == 0     # each address has its own
    clock.now += 20
    assert [limit.take('a') for _ in range(2)] == [0, 20]
    for n in range(1000):
        limit.take(str(n))
        clock.now += 0.001
    assert len(limit.buckets) <= 100


def test_limits_are_on_by_default_beyond_loopback():
    from runtime import edge
    import server
    from pages.limits import parse_rate

    def limits(argv):
        s = server.parse_args(['-e', 'x'] + argv).settings
        return tuple(parse_rate(s.limit(what)) for what in ('sessions', 'votes'))
    assert limits([]) == (None, None)
    assert limits(['--host', '0.0.0.0']) == ((30, 60), (60, 60))
    assert limits(['--host', '0.0.0.0', '--limit-votes', '0',
                   '--limit-sessions', '2/s']) == ((2, 1), None)
    assert edge.limits_of(server.parse_args(
        ['-e', 'x', '--max-connections', '50', '--header-timeout', '2.5']
    ).settings) == (2.5, 10.0, 15.0, 50, False)
    assert edge.limits_of(server.parse_args(
        ['-e', 'x', '--workers', '2']).settings).reuse_port is True
    for bad in (['--limit-votes', '3/d'], ['--header-timeout', '0'],
                ['--keepalive-timeout', 'nan'], ['--max-connections', '0']):
        with pytest.raises(SystemExit) as e:
            server.parse_args(['-e', 'x'] + bad)
        assert e.value.code == 2

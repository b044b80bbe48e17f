"""Pipelined requests, as a pipelining wrk script sends them: every answer
arrives, in order, and the server lives on. japronto needs care for this
(japronto_server/pipeline.py); every other framework is held to it as well,
socketify to what uWebSockets does instead (docs/socketify.md). A test for
some engines only is parametrized over those, so that a skip here means an
engine that cannot run."""
import asyncio
import random
import re

import pytest
from plugins.servers import one_of_each


JAPRONTO = ['japronto-tarantool-one', 'japronto-tarantool-one-uvloop',
            'japronto-tarantool-multi', 'japronto-tarantool-multi-uvloop',
            'japronto-aiotarantool-one-uvloop', 'japronto-aiotarantool-multi']
# uWebSockets pipelines only requests answered without waiting: behind a
# page that waits on the database it closes the connection (see README).
SOCKETIFY = ['socketify-tarantool-multi-uvloop']
ENGINES = one_of_each(JAPRONTO + ['aiohttp-tarantool-one', 'sanic-tarantool-one-uvloop',
                      'uvicorn-tarantool-one-uvloop', 'granian-tarantool-one',
                      'fastapi-tarantool-one-uvloop',
                      'aiohttp-redis-one-uvloop'] + SOCKETIFY)
WHOLE = [e for e in ENGINES if e not in SOCKETIFY]   # answer any pipeline


def over(engines):
    """The module's server fixture, for these engines only."""
    return pytest.mark.parametrize('server', engines, indirect=True)

# What only the right answer to each path contains.
MARKS = {b'/good': b'The best 9', b'/bad': b'The worst 9', b'/ugly': b'UGLY',
         b'/about': b'id="stat-stickers"', b'/nope': b'There is no page here',
         b'/static/style.css': b'{'}
WAITING = (b'/good', b'/bad')    # pages that wait on the database


def pipelined(server):
    """The paths that the server answers in any pipeline."""
    if server.engine in SOCKETIFY:
        return sorted(p for p in MARKS if p not in WAITING)
    return sorted(MARKS)


LENGTH = re.compile(br'\r\ncontent-length: *(\d+)', re.IGNORECASE)
STATUS = re.compile(br'HTTP/1\.[01] (\d{3}) ')   # aiohttp's 400: 1.0


@pytest.fixture(scope='module', params=ENGINES)
def server(request, shared_server):
    return shared_server(request.param)


def get(path):
    return b'GET %s HTTP/1.1\r\nHost: t\r\n\r\n' % path


def post(body, content_type=b'application/x-www-form-urlencoded'):
    return (b'POST / HTTP/1.1\r\nHost: t\r\nContent-Type: %s\r\n'
            b'Content-Length: %d\r\n\r\n%s' % (content_type, len(body), body))


async def exchange(port, requests):
    """Send all requests in one write; [(status, body)] of the answers."""
    reader, writer = await asyncio.open_connection('127.0.0.1', port)
    try:
        writer.write(b''.join(requests))
        answers = []
        for _ in requests:
            head = await reader.readuntil(b'\r\n\r\n')
            body = await reader.readexactly(int(LENGTH.search(head).group(1)))
            answers.append((int(STATUS.match(head).group(1)), body))
        return answers
    finally:
        writer.close()


async def alive(server):
    assert server.process.poll() is None, server.output()
    assert await exchange(server.port, [get(b'/ugly')]) == [(200, b'UGLY')]


@pytest.mark.parametrize('connections, depth', [(4, 64), (100, 16)])
async def test_deep_pipelines_answer_in_order(server, connections, depth):
    paths = pipelined(server)

    async def one(n):
        sent = [paths[(n + i * (i + 1) // 2) % len(paths)] for i in range(depth)]
        answers = await exchange(server.port, [get(p) for p in sent])
        for path, (status, body) in zip(sent, answers):
            assert status == (404 if path == b'/nope' else 200), path
            assert MARKS[path] in body, path
    await asyncio.wait_for(
        asyncio.gather(*[one(n) for n in range(connections)]), 120)
    await alive(server)


@over(WHOLE)
async def test_pipelined_bodies_are_framed(server):
    ballots = b'win=%s&lose=%s' % (b'a' * 22, b'b' * 22)
    answers = await exchange(server.port, [
        post(b'win=x'), get(b'/ugly'), post(ballots), get(b'/bad'),
        post(b''), get(b'/ugly')])
    assert [status for status, _ in answers] == [400, 200, 409, 200, 400, 200]
    assert MARKS[b'/bad'] in answers[3][1]
    await alive(server)


@pytest.mark.parametrize('last', [
    b'GET /about HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n',
    b'GET /about HTTP/1.0\r\n\r\n'])
@over(WHOLE)
async def test_closing_request_ends_the_pipeline(server, last):
    # aiohttp refuses the whole pipeline if anything follows the last one.
    after = get(b'/ugly') if server.engine in JAPRONTO else b''
    reader, writer = await asyncio.open_connection('127.0.0.1', server.port)
    writer.write(get(b'/ugly') + get(b'/good') + last + after)
    answer = await asyncio.wait_for(reader.read(), 10)   # until it closes
    writer.close()
    assert re.findall(br'HTTP/1\.[01] (\d{3}) ', answer) == [b'200'] * 3
    assert answer.rstrip().endswith(b'</html>') and MARKS[b'/about'] in answer
    await alive(server)


@pytest.mark.parametrize('request_bytes, status', [
    (b'POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n'
     b'5\r\nwin=x\r\n0\r\n\r\n', 411),
    (b'POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n'
     b'Content-Length: 5\r\n\r\nwin=x', 400),
    (b'POST / HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n', 400),
    (b'GET /ugly HTTP/1.1\r\nHost: t\r\nX-Pad: ' + b'x' * 70000 + b'\r\n\r\n',
     431),
])
@over(JAPRONTO)     # only japronto frames requests itself
async def test_japronto_refuses_what_it_cannot_frame(server, request_bytes,
                                                     status):
    reader, writer = await asyncio.open_connection('127.0.0.1', server.port)
    writer.write(get(b'/good') + request_bytes + get(b'/ugly'))
    answer = await asyncio.wait_for(reader.read(), 10)   # until it closes
    writer.close()
    assert [int(s) for s in STATUS.findall(answer)] == [200, status]
    await alive(server)


LF_GOOD = b'GET /good HTTP/1.1\nHost: x\n\n'


async def send_and_read(port, data, answers=None, chunks=1, rng=None):
    """Send data in `chunks` writes; the bytes answered: up to `answers`
    whole responses (fewer if the server closes first), or (when None) all
    until the server closes or stays quiet for 0.3 s."""
    reader, writer = await asyncio.open_connection('127.0.0.1', port)
    got = b''
    try:
        cuts = sorted(rng.sample(range(1, len(data)), chunks - 1)) if rng else []
        for a, b in zip([0] + cuts, cuts + [len(data)]):
            writer.write(data[a:b])
            await writer.drain()
            if rng and rng.random() < 0.3:
                await asyncio.sleep(0.002)
        if answers is not None:
            for _ in range(answers):
                head = await asyncio.wait_for(reader.readuntil(b'\r\n\r\n'), 10)
                length = LENGTH.search(head)
                got += head + await asyncio.wait_for(
                    reader.readexactly(int(length.group(1))) if length
                    else reader.read(), 10)
            return got
        while True:
            try:
                more = await asyncio.wait_for(reader.read(65536), 0.3)
            except asyncio.TimeoutError:
                return got
            if not more:
                return got
            got += more
    except (ConnectionError, asyncio.IncompleteReadError):
        return got      # closed: what came before
    finally:
        writer.close()


def bare_lf_answers(engine, pages):
    """The statuses each engine may give a pipeline of bare-LF requests
    (docs/socketify.md, docs/robyn.md): never none."""
    if engine in JAPRONTO or engine.startswith('robyn-'):
        return [[200] * pages]      # read as HTTP allows
    if engine in SOCKETIFY:         # 'HTTP/1.1<LF>Host: x', an unknown version
        return [[505]]
    return [[200] * pages, [400]]   # every page, or a 400 and closed


@pytest.mark.parametrize('data, pages', [
    (LF_GOOD + get(b'/good'), 2),
    (LF_GOOD * 12 + get(b'/good'), 13),
    (b'\n'.join([LF_GOOD] * 3) + b'\r\n' + get(b'/ugly'), 4),
], ids=['lf-then-crlf', '12-lf-then-crlf', 'empty-lines-between'])
async def test_bare_lf_pipelines_do_no_harm(server, data, pages):
    for _ in range(5):
        answer = await send_and_read(server.port, data, pages)
        statuses = [int(s) for s in STATUS.findall(answer)]
        assert statuses in bare_lf_answers(server.engine, pages), statuses
    await alive(server)


def fuzz_pipeline(rng):
    """(bytes, expected [(status, mark, waits)] or None when the bytes are
    not plain CRLF HTTP): a random pipeline, now and then damaged. `waits`:
    the page waits on the database."""
    paths = sorted(MARKS)
    parts, expected, clean = [], [], True
    for _ in range(rng.randint(1, 24)):
        end = rng.choice([b'\r\n'] * 6 + [b'\n'])
        clean = clean and end == b'\r\n'
        if rng.random() < 0.15:
            body = rng.choice([b'win=x', b'', b'win=%s&lose=%s' % (
                b'a' * 22, b'b' * 22)])
            lines = [b'POST / HTTP/1.1', b'Host: t',
                     b'Content-Type: application/x-www-form-urlencoded',
                     b'Content-Length: %d' % len(body)]
            parts.append(end.join(lines) + end + end + body)
            expected.append((409 if b"lose" in body else 400, None, True))
        else:
            path = rng.choice(paths)
            lines = [b'GET ' + path + b' HTTP/1.1', b'Host: t']
            if rng.random() < 0.3:
                lines.append(b'User-Agent: ' + bytes(
                    rng.choice(range(32, 127)) for _ in range(rng.randint(0, 40))))
            parts.append(end.join(lines) + end + end)
            expected.append((404 if path == b'/nope' else 200, MARKS[path],
                             path in WAITING))
    data = b''.join(parts)
    for _ in range(rng.choice([0, 0, 0, 1, 2])):   # damage
        clean = False
        i = rng.randrange(len(data))
        how = rng.randrange(3)
        junk = bytes([rng.choice([0, 10, 13, 32, 58, 127, 255, 65])])
        data = (data[:i] + junk + data[i:] if how == 0 else
                data[:i] + data[i + 1:] if how == 1 else
                data[:i] + junk + data[i + 1:])
    return data, (expected if clean else None)


def one_per_framework_and_loop(engines):
    chosen, seen = [], set()
    for name in engines:
        kind = (name.split('-')[0], name.endswith('-uvloop'))
        if kind not in seen:
            seen.add(kind)
            chosen.append(name)
    return chosen


# The random pipelines: one engine of the module's per framework and loop.
FUZZED = one_per_framework_and_loop(ENGINES)


@over(SOCKETIFY)    # the others answer such pipelines whole
async def test_waiting_page_ends_a_uws_pipeline(server):
    """What uWebSockets does with a request behind a page that waits: it
    closes the connection; nothing is answered out of order or twice, and
    the server lives on. Behind pages that do not wait it goes on."""
    for behind in ([get(b'/ugly')], [post(b'win=x')], [get(b'/bad')] * 3):
        data = get(b'/ugly') + get(b'/about') + get(b'/good') + b''.join(behind)
        answer = await send_and_read(server.port, data)
        statuses = [int(s) for s in STATUS.findall(answer)]
        assert statuses == [200, 200][:len(statuses)], statuses
        if statuses:
            assert answer.startswith(b'HTTP/1.1 200 OK') and b'UGLY' in answer
        assert b'The best 9' not in answer
        await alive(server)
    ugly = await send_and_read(server.port, get(b'/ugly') * 20, 20)
    assert ugly.count(b'UGLY') == 20


@over(FUZZED)
async def test_random_pipelines_never_break_the_server(server):
    """Random pipelines, split at random points, some with bare LF or damaged
    bytes: no 5xx but a 505 to bytes that are not plain CRLF HTTP (a request
    line of another version, as damage makes 'HTTP/1<LF>.1', where japronto
    answers 400; socketify's answer to bare LF), well-formed ones answered
    in order (socketify: up to a request behind a page that waits), the
    server lives."""
    uws = server.engine in SOCKETIFY
    other_version = () if server.engine in JAPRONTO else (505,)
    rng = random.Random(server.engine)
    for _ in range(30):
        data, expected = fuzz_pipeline(rng)
        # uWebSockets fails a request line that comes in parts, its stated
        # limit (test_socketify.py): socketify gets each pipeline whole.
        chunks = rng.randint(1, 4)
        answer = await send_and_read(
            server.port, data, expected and len(expected),
            chunks=1 if uws else chunks, rng=rng)
        statuses = [int(s) for s in STATUS.findall(answer)]
        allowed = other_version if expected is None else ()
        assert all(s < 500 or s in allowed for s in statuses), (data, statuses)
        if expected is not None:
            answered = len(statuses)
            if uws and answered < len(expected):
                # Closed: a request came behind one still waiting.
                assert any(waits for _, _, waits in expected[answered:-1]), (
                    data, statuses)
                expected = expected[:answered]
            assert statuses == [s for s, _, _ in expected], data
            bodies = re.split(br'HTTP/1\.[01] ', answer)[1:]
            for body, (_, mark, _) in zip(bodies, expected):
                assert mark is None or mark in body, data
        assert server.process.poll() is None, (data, server.output())
    await alive(server)

"""Session cookies only the server issues (pages.sessions): the signer, then
through real HTTP on every framework, and across a restart."""
import base64
import hashlib
import hmac
import os
import pwd
import stat
import subprocess
import sys
import uuid
from collections import namedtuple

import pytest

from bench.pagecheck import ballots, session_cookie
from conftest import ServerProcess, engine_args, fetch
from pages.sessions import Sessions, usable_key
from runtime.settings import DEFAULTS, replace
from plugins.servers import one_of_each
from test_supervision import ports

# One engine of each framework's adapter.
ENGINES = one_of_each(['aiohttp-tarantool-one-uvloop', 'sanic-tarantool-one',
           'japronto-tarantool-one-uvloop', 'uvicorn-tarantool-one',
           'granian-tarantool-one-uvloop', 'fastapi-tarantool-one',
           'socketify-tarantool-one'])
Request = namedtuple('Request', 'cookies')


def forgeries(cookie):
    """Cookie values a visitor could make up from its own valid one."""
    session, signature = cookie.split('.')
    other = 'A' if signature[-1] != 'A' else 'B'
    return [session,                                # unsigned (the old form)
            str(uuid.uuid4()) + '.' + signature,    # another uuid, its mark
            cookie[:-1] + other,                    # a signature changed
            session.upper() + '.' + signature,
            cookie + '.', cookie + ' ', ' ' + cookie, cookie[1:],
            cookie * 200, '', '.', 'x' * 100000, cookie.replace('-', '\x00'),
            session + '.' + '\udcff' * 22]


def test_a_cookie_is_its_session_signed():
    sessions = Sessions('k' * 32)
    session, header = sessions.of(Request({}))
    name, value = header
    assert name == 'Set-Cookie' and value.startswith('sid=' + session + '.')
    assert 'HttpOnly' in value and 'SameSite=Lax' in value
    cookie = value[len('sid='):].split(';')[0]
    assert sessions.check(cookie) == session
    # The first 128 bits of HMAC-SHA256, base64url without padding.
    mac = hmac.new(b'k' * 32, session.encode(), hashlib.sha256).digest()
    assert cookie == '%s.%s' % (
        session, base64.urlsafe_b64encode(mac[:16]).decode().rstrip('='))
    assert sessions.of(Request({'sid': cookie})) == (session, None)
    # The same key signs the same way; another key does not.
    assert Sessions(b'k' * 32).check(cookie) == session
    assert Sessions('l' * 32).check(cookie) is None
    assert Sessions().check(cookie) is None


def test_a_cookie_the_server_did_not_issue_is_no_session():
    sessions = Sessions('k' * 32)
    cookie = sessions.cookie(str(uuid.uuid4()))
    for forged in forgeries(cookie) + [None, b'x' * 59, 59, ['a']]:
        assert sessions.check(forged) is None, forged
        session, header = sessions.of(Request({'sid': forged}))
        assert header and cookie.split('.')[0] != session


@pytest.mark.parametrize('key', [None, '', 'short', b'x' * 15, 12345])
def test_a_key_too_short_to_sign_with_is_refused(key):
    with pytest.raises(ValueError, match='at least 16 bytes'):
        usable_key(key)


@pytest.fixture(scope='module', params=ENGINES)
def engine(request):
    return request.param


async def test_only_issued_cookies_are_sessions_and_pairs_are_limited(
        request, engine, start_server):
    """Through each adapter: a forged cookie is a new session (so counted
    by --limit-sessions), not the session it names, even for a vote; a
    valid one is its session; and --limit-ballots refuses pairs."""
    server = start_server(engine, *(engine_args(request, engine) + [
        '--limit-sessions', '3/m', '--limit-ballots', '5/m']))
    url = server.url
    # Sessions 1, pairs 1.
    status, headers, html = await fetch(url + '/')
    cookie = session_cookie(headers)
    assert status == 200 and cookie
    session, _ = cookie.split('.')
    # The bare uuid voting this session's ballots: another visitor (pairs 2).
    _, win, lose = ballots(html)[0]
    status, _, body = await fetch(url, session, {'win': win, 'lose': lose})
    assert status == 409 and 'another visitor' in body
    # Forged cookies start sessions of their own: 2 and 3, then refused.
    answers = [await fetch(url + '/good', forged)
               for forged in forgeries(cookie)[:3]]
    assert [a[0] for a in answers] == [200, 200, 429]
    made = [session_cookie(a[1]) for a in answers[:2]]
    assert None not in made and cookie not in made and made[0] != made[1]
    # The issued cookie is its session, on every page.
    status, headers, _ = await fetch(url + '/good', cookie)
    assert status == 200 and 'Set-Cookie' not in headers
    status, _, html = await fetch(url, cookie, {'win': win, 'lose': lose})
    assert status == 200 and 'Vote counted.' in html   # pairs 3
    # Pairs 4 and 5, then refused.
    statuses = [(await fetch(url + '/', cookie))[0] for _ in range(3)]
    assert statuses == [200, 200, 429]
    status, headers, html = await fetch(url + '/', cookie)
    assert status == 429 and 'Too many requests' in html
    assert int(headers['Retry-After']) >= 1


async def test_each_limit_alone_answers_429(request, engine, start_server):
    """Each limit on by itself is a 429 with its page, never an error
    (japronto writes a 429 itself, on every connection any limit is on)."""
    for limit, page in (('--limit-ballots', '/'), ('--limit-votes', '/'),
                        ('--limit-sessions', '/good')):
        server = start_server(engine, *(engine_args(request, engine) + [
            limit, '1/m']))
        status, headers, html = await fetch(server.url + '/')
        cookie = session_cookie(headers)
        form = None
        if limit == '--limit-votes':
            _, win, lose = ballots(html)[0]
            form = {'win': win, 'lose': lose}
        else:
            cookie = cookie if page == '/' else None
        statuses = [(await fetch(server.url + page, cookie, form))[0]
                    for _ in range(2)]
        assert statuses[-1] == 429, (limit, statuses)
        assert server.process.poll() is None


@pytest.mark.server
async def test_the_key_is_kept_for_every_start(request, tmp_path):
    """A restarted server accepts the cookies it issued before: the key
    lives in var/session.key, readable by its owner only."""
    engine = 'aiohttp-tarantool-one'
    args = engine_args(request, engine)
    cookie = None
    for run in range(2):
        server = ServerProcess(engine, args, str(tmp_path / ('%d.log' % run)))
        try:
            status, headers, _ = await fetch(server.url + '/good', cookie)
        finally:
            assert server.stop() == 0
        assert status == 200
        if cookie is None:
            cookie = session_cookie(headers)
            assert cookie
        else:
            assert 'Set-Cookie' not in headers
    mode = os.stat(DEFAULTS.session_key_file).st_mode
    assert stat.S_IMODE(mode) == 0o600


def kept_key(root, mode):
    """Settings of a checkout at root whose var/session.key already holds a
    key, of that mode."""
    s = replace(DEFAULTS, root=str(root))
    os.makedirs(s.var)
    with open(s.session_key_file, 'w') as f:
        f.write('k' * 43 + '\n')
    os.chmod(s.session_key_file, mode)
    return s


def test_a_key_others_may_read_is_made_private(tmp_path):
    """A session key left 0644 (a wider umask, a copy) is made 0600 before
    it is used."""
    import server
    s = kept_key(tmp_path, 0o644)
    assert server.with_session_key(s).session_key == 'k' * 43
    assert stat.S_IMODE(os.stat(s.session_key_file).st_mode) == 0o600


@pytest.mark.server
@pytest.mark.skipif(os.geteuid() != 0, reason='needs root')
def test_a_key_another_account_owns_is_refused(bare_checkout):
    """That account may know the key, and so forge any cookie: server.py
    says so, and stops before it starts anything."""
    nobody = pwd.getpwnam('nobody')
    s = kept_key(bare_checkout, 0o600)
    os.chown(s.session_key_file, nobody.pw_uid, nobody.pw_gid)
    done = subprocess.run(
        [sys.executable, 'server.py', '-e', 'aiohttp-tarantool-one'],
        cwd=bare_checkout, capture_output=True, text=True, timeout=60,
        env=dict(os.environ, **ports()))
    assert done.returncode == 1, done.stderr
    assert ('session key: [Errno 1] belongs to uid %d, which may know what '
            'it holds' % nobody.pw_uid) in done.stderr, done.stderr
    assert "remove it: '%s'" % s.session_key_file in done.stderr
    assert os.listdir(s.var) == ['session.key']

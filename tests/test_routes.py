"""What routes and the data interface promise adapters and pages, checked
in-process over a real driver whose database is gone (a closed port)."""
import re
import uuid

import pytest

from conftest import free_port
from data_interface import DataInterface
from data_interface.address import TarantoolAddress
from data_interface.postgres.asyncpg_data import PostgresData
from data_interface.tarantool.asynctnt_data import AsynctntData
from pages import Request, Site
from pages.http import HTML, JSON
from runtime.settings import DEFAULTS

BALLOTS = b'win=' + b'a' * 22 + b'&lose=' + b'b' * 22
PARAMS = {'pack': 'cats', 'sticker': '1'}


def request(method='GET', path='/', cookies=None, body=b''):
    return Request(method, path, cookies or {}, '127.0.0.1', 'pytest', body)


@pytest.fixture
def site():
    gone = TarantoolAddress('127.0.0.1', free_port(), 'sticker_app', 'x')
    return Site(AsynctntData(gone, 'multi'), DEFAULTS)


def test_routes_are_the_pages_bound_to_the_site(site):
    routes = site.routes()
    assert [(r.method, r.path) for r in routes] == [
        ('GET', '/'), ('POST', '/'), ('GET', '/good'), ('GET', '/bad'),
        ('GET', '/ugly'), ('GET', '/about'), ('GET', '/packs/{pack}'),
        ('GET', '/packs/{pack}/{sticker}'), ('GET', '/stickers'),
        ('GET', '/stickers/{pack}'), ('GET', '/stickers/{pack}/{sticker}')]
    assert all(r.handler.__self__ is site for r in routes)
    assert [r.kind for r in routes] == ['html'] * 8 + ['json'] * 3
    # Only /ugly and /about never wait (/stickers may, before start).
    assert [r.waits for r in routes] == [True] * 4 + [False] * 2 + [True] * 5


async def test_a_waiting_page_answers_503_of_its_kind_in_an_outage(site):
    for route in site.routes():
        if not route.waits:
            continue
        params = {name: PARAMS[name]
                  for name in re.findall(r'{(\w+)}', route.path)}
        r = await route.handler(request(route.method, route.path,
                                        body=BALLOTS), **params)
        assert r.status == 503, route
        assert r.content_type == (JSON if route.kind == 'json' else HTML)
        assert dict(r.headers)['Retry-After'] == '1', route
    assert site.outage.since is not None


def test_a_page_that_does_not_wait_answers_at_once(site):
    for route in site.routes():
        if route.waits:
            continue
        answer = route.handler(request(route.method, route.path))
        with pytest.raises(StopIteration):
            answer.send(None)


async def test_unrouted_paths_under_the_api_answer_json(site):
    for path, kind in [('/stickers/a/1/x', JSON), ('/stickersx', JSON),
                       ('/nowhere', HTML), ('/sticker', HTML)]:
        r = await site.not_found(request(path=path))
        assert (r.status, r.content_type) == (404, kind), path


def test_pages_pick_the_session_cookie(site):
    session = str(uuid.uuid4())
    cookie = site.sessions.cookie(session)
    assert site.sessions.of(request(cookies={'x': '1', 'sid': cookie})) == (
        session, None)
    for cookies in [{}, {'SID': cookie}, {'sid': cookie + '\x00'},
                    {'sid': cookie.upper()}, {'other': cookie},
                    {'sid': session}]:
        new, header = site.sessions.of(request(cookies=cookies))
        assert new != session
        assert header[1].startswith('sid=%s.' % new)
        assert header[1].split(';')[0] == 'sid=' + site.sessions.cookie(new)


def test_the_interface_declares_what_a_backend_must_do():
    assert AsynctntData.sweeps_itself and not PostgresData.sweeps_itself

    class WithoutExpire(PostgresData):
        expire = DataInterface.expire
    with pytest.raises(TypeError, match='expire'):
        WithoutExpire('postgresql://nowhere/')
    with pytest.raises(TypeError):
        DataInterface()

"""The bench's verification refuses a site that serves the wrong thing:
a real engine behind a small proxy that changes one page, as a broken site
would, fails that check alone and says what is wrong."""
import http.client
import http.server
import re
import threading

import pytest

from bench import verify
from bench.pagecheck import CARD

ENGINE = 'aiohttp-tarantool-one'    # the one bench.py --target's tests run


class Proxy(http.server.BaseHTTPRequestHandler):
    """Every request passed to the site (at port server.site) and its
    answer passed back; a subclass changes one page."""

    def do_GET(self):
        self.answer(*self.forward())

    def do_POST(self):
        self.answer(*self.forward(body=self.body()))

    def body(self):
        return self.rfile.read(int(self.headers.get('Content-Length') or 0))

    def forward(self, method=None, path=None, body=None):
        """(status, headers, body) of the site's answer."""
        site = http.client.HTTPConnection('127.0.0.1', self.server.site,
                                          timeout=10)
        try:
            site.request(method or self.command, path or self.path, body,
                         {k: v for k, v in self.headers.items()
                          if k in ('Cookie', 'Content-Type')})
            r = site.getresponse()
            return r.status, r.getheaders(), r.read()
        finally:
            site.close()

    def answer(self, status, headers, body):
        self.send_response(status)
        for name, value in headers:
            if name in ('Content-Type', 'Set-Cookie', 'Location'):
                self.send_header(name, value)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class ReversedGood(Proxy):
    """/good with the site's nine stickers in reverse order, their places
    numbered as before."""

    def do_GET(self):
        status, headers, body = self.forward()
        if self.path == '/good':
            ids = iter(reversed(CARD.findall(body.decode())))
            body = CARD.sub(lambda m: '<article class="card" data-sticker-id='
                            '"%s" data-place="%s"' % (next(ids)[0], m.group(2)),
                            body.decode()).encode()
        self.answer(status, headers, body)


class UncountedVote(Proxy):
    """A vote answered as counted (the next pair, 'Vote counted.'; the same
    ballots again a 409) but never passed to the site."""

    def do_POST(self):
        form = self.body()
        if self.path != '/' or form in self.server.voted:
            self.answer(409, [], b'')
            return
        self.server.voted.add(form)
        status, headers, body = self.forward('GET', '/')
        self.answer(status, headers, body + b'<p>Vote counted.</p>')


def proxied(handler, site):
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    server.site, server.voted = site.port, set()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, 'http://127.0.0.1:%d' % server.server_address[1]


@pytest.fixture(scope='module')
def site(shared_server):
    return shared_server(ENGINE)


def verified(handler, site):
    server, url = proxied(handler, site)
    try:
        return verify.engine(url)
    finally:
        server.shutdown()
        server.server_close()


def failed(checks):
    return [c['check'] for c in checks if not c['ok']]


def test_the_proxy_alone_changes_nothing(site):
    checks = verified(Proxy, site)
    assert failed(checks) == [], verify.failure(checks)


def test_a_good_page_out_of_order_is_refused(site):
    checks = verified(ReversedGood, site)
    assert failed(checks) == ['good'], checks
    shown, ranked = re.match(r'good: stickers \[(.*)\], the API ranks '
                             r'\[(.*)\]$', verify.failure(checks)).groups()
    assert shown.split(', ') == ranked.split(', ')[::-1] != ranked.split(', ')


def test_a_vote_that_does_not_count_is_refused(site):
    checks = verified(UncountedVote, site)
    assert failed(checks) == ['vote'], checks
    assert re.match(r'vote: the vote did not count: stickers \d+ and \d+ '
                    r'unchanged$', verify.failure(checks)), checks

"""Every page of the site, written once for all frameworks and databases.

A handler takes a pages.http.Request (plus path parameters) and returns a
pages.http.Response; adapters serve Site.routes() and only translate those
to their framework.
"""
import asyncio
import ipaddress
import logging
import math
import os
import time
import types

from data_interface import (DataUnavailable, Visit, VoteOutcome,
                            VoteUnknown, cancel)
from .http import (FRAMING, HTML, SESSION_COOKIE, SLUG, STICKER_ID, Response,
                   Route, ballot_form, clean_text,
                   json_response, text_response)
from .limits import RateLimit, client_of, parse_rate
from .outage import Outage
from .render import Renderer
from .sessions import Sessions
from .visits import Visits

log = logging.getLogger('pages')

MAX_BODY = 8192
TOP_COUNT = 9
UGLY = text_response(200, 'UGLY')
# The JSON pages; unrouted paths under it are answered in JSON too.
API = '/stickers'
PACKS = '/packs'        # the HTML pages of packs and stickers
MAX_PACK_FRAMES = 10000


def ranking(s):
    """The order of /good (reversed) and of a pack's pages."""
    return s.rating, s.id


VOTE_ERRORS = {
    VoteOutcome.UNKNOWN: (409, 'This ballot is unknown or was already used.'),
    VoteOutcome.NOT_PAIR: (400, 'These two ballots were not issued together.'),
    VoteOutcome.FOREIGN: (409, 'This ballot was issued to another visitor.'),
    VoteOutcome.EXPIRED: (409, 'This ballot has expired: please pick again.'),
}


def sticker_json(s):
    return {'id': s.id, 'pack': s.pack, 'pack_title': s.pack_title,
            'image': s.image, 'rating': s.rating,
            'votes_plus': s.votes_plus, 'votes_minus': s.votes_minus}


UNAVAILABLE = 'The database is unavailable; try again soon.'
# Seconds a 503 asks a client to wait before it tries again.
RETRY_AFTER = (('Retry-After', '1'),)
VOTE_UNKNOWN = ('Your vote may not have been counted: the database did not '
                'answer. Send it again: a ballot counts once.')
NO_NEW_PAIR = ('Your vote was counted, but no new pair can be drawn now: the '
               'database is unavailable. Go back to the stickers in a '
               'moment.')
# With read replicas, a visitor who has just voted reads from the primary
# while a replica may still lag (settings.replica_lag), so that they see
# their vote: the vote's answer sets this cookie, which expires by itself
# and which every worker reads. It is signed for the voter's session and
# its end (pages.sessions): one a visitor makes up is ignored.
FRESH_COOKIE = 'fresh'
# (method, path, handler, kind, waits) of every page of Site, in order.
PAGES = []


def page(method, path, kind='html', waits=True, guarded=True):
    """Make a Site method the page at (method, path); see pages.http.Route.
    guarded: see guard()."""
    def register(handler):
        if guarded:
            handler = guard(kind)(handler)
        PAGES.append((method, path, handler, kind, waits))
        return handler
    return register


class Answered(DataUnavailable):
    """An outage a page answers in its own way (`answer`), raised from the
    database's error: never that error itself, which other calls waiting on
    the same read may share."""

    def __init__(self, error, answer):
        super().__init__(str(error))
        self.answer = answer


def guard(kind):
    """Turn a database outage into 503 (of this kind of page) instead of an
    error; log it in a few lines (pages.outage), not one per request."""
    def wrap(handler):
        async def guarded_page(self, request, **params):
            try:
                r = await handler(self, request, **params)
            except DataUnavailable as e:
                # A page's own answer to the outage, or the usual 503.
                answer = e.answer if isinstance(e, Answered) \
                    else self.unavailable[kind]
                self.outage.down(e, refused=int(answer.status >= 500))
                return answer
            # Some pages answer 4xx without asking the database.
            if self.outage.since is not None and r.status < 400:
                self.outage.up()
            return r
        guarded_page.__name__ = handler.__name__
        return guarded_page
    return wrap


class Site:
    """The pages over one started DataInterface (its owner closes it);
    start() before serving."""

    def __init__(self, data, settings):
        """settings: a settings.Settings (refresh period, ballot TTL, per-IP
        limits, the key of session cookies, where the templates and static
        files are). Expiry limits live in the database."""
        self.data = data
        self.settings = settings
        # The reads from the primary behind read replicas
        # (data_interface.replicated).
        self.primary = getattr(data, 'fresh', None)
        # Seconds: a replica in the read set may be up to the lag bound
        # behind, and more until its next check; the voter's next request
        # may come a moment later.
        self.fresh_for = math.ceil(2 * settings.replica_lag) + 1
        self.render = Renderer(settings.templates)
        # URL prefix -> directory served as static files; the favicon.
        self.static = (('/static', settings.static), ('/img', settings.images))
        self.favicon = os.path.join(settings.static, 'favicon.ico')
        # The frames of the pages that list stickers (pages.render).
        self.good = self.render.frame('top.html', 'cards', nav='good',
                                      heading='The best %d' % TOP_COUNT)
        self.bad = self.render.frame('top.html', 'cards', nav='bad',
                                     heading='The worst %d' % TOP_COUNT)
        self.index_frames = {
            notice: self.render.frame('index.html', 'duel', notice=notice)
            for notice in (None, 'Vote counted.')}
        # By the kind of page (pages.http.Route).
        self.unavailable = {
            'html': self.error_page(503, UNAVAILABLE, RETRY_AFTER),
            'json': json_response(503, {'error': 'database unavailable'},
                                  RETRY_AFTER),
        }
        self.refresh_every = settings.refresh_every
        self.ballot_ttl = settings.ballot_ttl
        self.sessions = Sessions(settings.session_key)
        sessions, votes, ballots = [
            parse_rate(settings.limit(what))
            for what in ('sessions', 'votes', 'ballots')]
        self.about_page = None
        self.packs_page = None
        self.outage = Outage(log)
        self.visits = Visits(data, self.outage, log)
        self.session_limit = sessions and RateLimit(*sessions)
        self.vote_limit = votes and RateLimit(*votes)
        # Ballot pairs: per address, and per session (many addresses may
        # share one session cookie).
        self.ballot_limit = ballots and RateLimit(*ballots)
        self.session_ballot_limit = ballots and RateLimit(*ballots)
        self.refusals = {limit: self.too_many(limit) for limit in (
            self.session_limit, self.vote_limit, self.ballot_limit) if limit}
        if ballots:
            self.refusals[self.session_ballot_limit] = self.too_many(
                self.session_ballot_limit, 'your session')
        self.proxies = frozenset(settings.proxies)
        self.pack_frames = {}   # (name, title) -> the frame of its page
        self._task = None

    def html(self, http_status, template, headers=(), **context):
        body = self.render.page(template, **context)
        return Response(http_status, HTML, body.encode('utf-8'),
                        FRAMING + tuple(headers) if headers else FRAMING)

    def error_page(self, status, message, headers=()):
        return self.html(status, 'error.html', headers, status=status,
                         message=message)

    def too_many(self, limit, who='your address'):
        return self.error_page(429, 'Too many requests from %s; try again '
                                    'in a moment.' % who,
                               [('Retry-After', str(limit.retry_after))])

    def routes(self):
        """Every page (pages.http.Route), its handler bound to this site."""
        return [Route(method, path, self.delayed(types.MethodType(handler, self))
                      if waits and self.settings.delay else
                      types.MethodType(handler, self), kind, waits)
                for method, path, handler, kind, waits in PAGES]

    def delayed(self, handler):
        """The page answered settings.delay ms late (server.py --delay)."""
        seconds = self.settings.delay / 1000.0

        async def late_page(request, **params):
            await asyncio.sleep(seconds)
            return await handler(request, **params)
        late_page.__name__ = handler.__name__
        return late_page

    async def start(self):
        await self.refresh()
        await self._build_packs_page()
        self._task = asyncio.ensure_future(self._refresh_forever())

    async def stop(self):
        """After serving: stop refreshing, write the visits left."""
        if self._task is not None:
            await cancel(self._task)
        await self.visits.close()

    async def refresh(self):
        """Render /about from fresh counts; sweep where the database does
        not sweep by itself."""
        if not self.data.sweeps_itself:
            await self.data.expire()   # by the database's own limits
        stats = await self.data.stats()
        refreshed = time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())
        self.about_page = self.html(200, 'about.html', nav='about', stats=stats,
                               refreshed=refreshed)

    async def _refresh_forever(self):
        while True:
            await asyncio.sleep(self.refresh_every)
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise   # stop(); on Python 3.7 it is an Exception too
            except DataUnavailable as e:
                self.outage.down(e, refused=0)
            except Exception:
                log.exception('background refresh failed')
            else:
                self.outage.up()

    def _refused(self, limit, key):
        """The 429 page if `limit` is on and refuses this key."""
        if limit is not None and limit.take(key):
            return self.refusals[limit]
        return None

    def client(self, request):
        """The visitor's address: the peer's, or behind a front server
        named in settings.proxies the last X-Forwarded-For entry (the one
        that server wrote)."""
        if self.proxies and request.ip in self.proxies and request.forwarded:
            last = request.forwarded.rpartition(',')[2].strip()
            try:
                return str(ipaddress.ip_address(last))
            except ValueError:
                pass
        return request.ip

    def _session(self, request):
        """(session, Set-Cookie header or None, 429 page or None): a
        visitor without a valid session cookie starts a session, within
        the per-IP limit."""
        session, cookie = self.sessions.of(request)
        refused = cookie and self._refused(self.session_limit,
                                           client_of(self.client(request)))
        return session, cookie, refused

    def _pair_refused(self, request, session):
        """The 429 page if a new ballot pair is beyond the limit of this
        session or of this address."""
        return (self._refused(self.session_ballot_limit, session)
                or self._refused(self.ballot_limit,
                                 client_of(self.client(request))))

    def _visited(self, request, session):
        """Once its page's database call succeeded: the visit is written
        later, in a batch (pages.visits)."""
        self.visits.add(Visit(session, clean_text(self.client(request), 64),
                              clean_text(request.user_agent, 256)))

    def _reader(self, request):
        """Where a read goes: the replicas (self.data), or the primary for
        a visitor who has just voted (FRESH_COOKIE)."""
        fresh = self.primary and request.cookies.get(FRESH_COOKIE)
        if fresh:
            session = self.sessions.check(request.cookies.get(SESSION_COOKIE))
            if self.sessions.is_fresh(fresh, session, self.fresh_for):
                return self.primary
        return self.data

    def _fresh_cookie(self, session):
        return ('Set-Cookie', '%s=%s; Path=/; Max-Age=%d; HttpOnly; '
                'SameSite=Lax' % (FRESH_COOKIE, self.sessions.fresh(
                    session, self.fresh_for), self.fresh_for))

    async def _pair_page(self, request, session, cookie, notice=None,
                         headers=FRAMING):
        tokens = self.data.ballot_tokens(session)
        a, b = await self.data.sticker_pair(session, tokens, self.ballot_ttl)
        self._visited(request, session)
        body = self.index_frames[notice].body(self.render.duel(a, b, tokens))
        return Response(200, HTML, body,
                        (headers + (cookie,)) if cookie else headers)

    @page('GET', '/')
    async def index(self, request):
        session, cookie, refused = self._session(request)
        refused = refused or self._pair_refused(request, session)
        if refused:
            return refused
        return await self._pair_page(request, session, cookie)

    @page('POST', '/')
    async def vote(self, request):
        refused = self._refused(self.vote_limit, client_of(self.client(request)))
        if refused:
            return refused
        if len(request.body) > MAX_BODY:
            return self.error_page(413, 'The form is too large.')
        tokens = ballot_form(request.body)
        if tokens is None:
            return self.error_page(400, 'The vote needs two different ballots, '
                                   '"win" and "lose".')
        # A vote answers with a new pair: refused before it is cast, so a
        # 429 leaves its ballots unused. An invalid cookie is a new
        # session, to which no ballot was issued (409).
        session, cookie = self.sessions.of(request)
        refused = self._pair_refused(request, session)
        if refused:
            return refused
        try:
            outcome = await self.data.cast_vote(session, *tokens)
        except VoteUnknown as e:
            raise Answered(e, self.error_page(503, VOTE_UNKNOWN,
                                              RETRY_AFTER)) from e
        if outcome != VoteOutcome.OK:
            return self.error_page(*VOTE_ERRORS[outcome])
        headers = FRAMING
        if self.primary is not None:
            headers = FRAMING + (self._fresh_cookie(session),)
        try:
            return await self._pair_page(request, session, cookie,
                                         notice='Vote counted.',
                                         headers=headers)
        except DataUnavailable as e:
            # The vote stands: its answer says so (200), without a pair.
            raise Answered(e, self.html(
                200, 'error.html', headers[len(FRAMING):] + (
                    (cookie,) if cookie else ()), status=200,
                heading='Vote counted', message=NO_NEW_PAIR)) from e

    async def _ranked(self, request, frame, fetch):
        session, cookie, refused = self._session(request)
        if refused:
            return refused
        stickers = await getattr(self._reader(request), fetch)(TOP_COUNT)
        self._visited(request, session)
        return Response(200, HTML, frame.body(self.render.cards(stickers)),
                        (FRAMING + (cookie,)) if cookie else FRAMING)

    @page('GET', '/good')
    async def good(self, request):
        return await self._ranked(request, self.good, 'top_stickers')

    @page('GET', '/bad')
    async def bad(self, request):
        return await self._ranked(request, self.bad, 'bottom_stickers')

    @page('GET', '/ugly', waits=False, guarded=False)
    async def ugly(self, request):
        return UGLY

    @page('GET', '/about', waits=False, guarded=False)
    async def about(self, request):
        return self.about_page

    def _pack_frame(self, pack):
        """A pack page's frame, rendered once per pack: its name and title
        change only when a data set loads."""
        key = (pack.name, pack.title)
        frame = self.pack_frames.get(key)
        if frame is None:
            if len(self.pack_frames) >= MAX_PACK_FRAMES:
                self.pack_frames.clear()
            frame = self.pack_frames[key] = self.render.frame(
                'pack.html', 'cards', pack=pack)
        return frame

    async def _ranked_pack(self, request, pack):
        """The pack with its stickers best first, or None."""
        found = (await self._reader(request).pack(pack) if SLUG.match(pack)
                 else None)
        return found and found._replace(stickers=sorted(
            found.stickers, key=ranking, reverse=True))

    @page('GET', PACKS + '/{pack}')
    async def pack_page(self, request, pack):
        session, cookie, refused = self._session(request)
        if refused:
            return refused
        found = await self._ranked_pack(request, pack)
        if found is None:
            return self.error_page(404, 'There is no such pack.')
        self._visited(request, session)
        body = self._pack_frame(found).body(self.render.cards(found.stickers))
        return Response(200, HTML, body,
                        (FRAMING + (cookie,)) if cookie else FRAMING)

    @page('GET', PACKS + '/{pack}/{sticker}')
    async def sticker_page(self, request, pack, sticker):
        session, cookie, refused = self._session(request)
        if refused:
            return refused
        found = (await self._ranked_pack(request, pack)
                 if STICKER_ID.match(sticker) else None)
        ids = [s.id for s in found.stickers] if found else []
        if not ids or int(sticker) not in ids:
            return self.error_page(404, 'There is no such sticker.')
        self._visited(request, session)
        place = ids.index(int(sticker)) + 1
        return self.html(200, 'sticker.html', (cookie,) if cookie else (),
                         s=found.stickers[place - 1], place=place,
                         of=len(ids))

    async def not_found(self, request, **params):
        if request.path.startswith(API):
            return json_response(404, {'error': 'not found'})
        return self.error_page(404, 'There is no page here.')

    async def _build_packs_page(self):
        # Packs and their counts change only when a data set loads, before
        # start: one full scan, then this response for every request.
        packs = await self.data.packs()
        self.packs_page = json_response(200, [
            {'name': p.name, 'title': p.title, 'stickers': p.stickers,
             'url': API + '/' + p.name} for p in packs])

    # Built at start: an outage cannot touch it (nor end, by answering).
    @page('GET', API, 'json', guarded=False)
    async def api_packs(self, request):
        return self.packs_page or await self._packs_page_now(request)

    @guard('json')
    async def _packs_page_now(self, request):
        await self._build_packs_page()
        return self.packs_page

    @page('GET', API + '/{pack}', 'json')
    async def api_pack(self, request, pack):
        found = (await self._reader(request).pack(pack) if SLUG.match(pack)
                 else None)
        if found is None:
            return json_response(404, {'error': 'no such pack'})
        return json_response(200, {
            'name': found.name, 'title': found.title,
            'stickers': [sticker_json(s) for s in found.stickers]})

    @page('GET', API + '/{pack}/{sticker}', 'json')
    async def api_sticker(self, request, pack, sticker):
        found = None
        if SLUG.match(pack) and STICKER_ID.match(sticker):
            found = await self._reader(request).sticker(pack, int(sticker))
        if found is None:
            return json_response(404, {'error': 'no such sticker'})
        return json_response(200, sticker_json(found))

"""The DataInterface on PostgreSQL through the Django ORM (queries.py),
with psycopg 3 and Django's connection pool. Arguments are checked here as
schema.sql's functions check them, and refused alike (REFUSED).

Django has one set of settings per process, so one database: every
DjangoData of a process shares Django's pool (sized by the first to start),
which close() leaves open.
The ORM's calls run in the thread asgiref gives each context (outside a
Django request, one thread for the process), where Django keeps that
thread's connection. Each call has `timeout` seconds: its caller is
answered by then, whatever the thread does, and the thread's waits on the
server end by then too (bounded.py), so a frozen server or a silent link
holds no thread.
While PostgreSQL cannot be reached, calls fail at once (DataUnavailable)
instead of each waiting in that thread: a probe connects anew every
PROBE_EVERY seconds, outside it, and once it could, the pool is replaced
(its connections may all be dead) and calls go to it again."""
import asyncio
import contextvars
import logging
import re
import time
from urllib.parse import unquote, urlsplit

import psycopg
from asgiref.sync import sync_to_async
from django.db import Error as DjangoError
from django.db import InterfaceError, OperationalError, close_old_connections
from django.db import connections
from psycopg_pool import PoolTimeout

from .. import (MAX_VISITS, REFUSED, DataInterface, DataUnavailable,
                VoteUnknown)
from ..postgres.common import ByDsn
from .bounded import DEADLINE, Connection

UUID = re.compile(r'[0-9a-f-]{36}\Z')
TOKEN = re.compile(r'[A-Za-z0-9_-]{22}\Z')
FAILED = (DjangoError, psycopg.Error)
LOST = (OperationalError, InterfaceError, psycopg.OperationalError)
EXPIRE_BATCH = 1000
MIGRATE_WITHIN = 60.0   # seconds: the migrations may wait for other processes
PROBE_EVERY = 0.5    # seconds between the probes of an unreachable database
# A connection slot the pool could not reopen for this long is given up
# (psycopg_pool's backoff would take minutes after an outage).
RECONNECT = 2.0
# Errors only, as psycopg_data: the pool logs each failed attempt to
# connect; pages.outage reports an outage in a few lines.
logging.getLogger('psycopg').setLevel(logging.ERROR)


def databases(dsn, min_size, max_size, timeout):
    """Django's DATABASES for a postgresql:// DSN, with its pool."""
    u = urlsplit(dsn)
    return {'default': {
        'ENGINE': 'django.db.backends.postgresql',
        'NAME': unquote(u.path.lstrip('/')),
        'USER': unquote(u.username or ''),
        'PASSWORD': unquote(u.password or ''),
        'HOST': u.hostname or '', 'PORT': str(u.port or ''),
        'OPTIONS': {'connect_timeout': max(2, round(timeout)),
                    'pool': {'min_size': min_size, 'max_size': max_size,
                             'timeout': timeout,
                             'reconnect_timeout': RECONNECT,
                             'connection_class': Connection}}}}


def text(value):
    """PostgreSQL text holds neither NUL nor lone surrogates: replace them as
    pages.http.clean_text does (a key with them then matches nothing)."""
    return value.replace('\x00', '\ufffd').encode(
        'utf-8', 'replace').decode('utf-8')


def refuse(what):
    raise DataUnavailable('%s: %s' % (REFUSED, what))


def _bytes(value):
    return len(value.encode('utf-8', 'surrogatepass'))


def check_session(session):
    if not (isinstance(session, str) and UUID.match(session)):
        refuse('session must be a uuid of 36 characters')


def check_token(token):
    if not (isinstance(token, str) and TOKEN.match(token)):
        refuse('ballot tokens must be 22 URL-safe characters')


def check_name(name):
    if not (isinstance(name, str) and _bytes(name) <= 64):
        refuse('pack name must be UTF-8 text of at most 64 bytes')


def check_visits(visits):
    if not isinstance(visits, list) or len(visits) > MAX_VISITS:
        refuse('visits must be a list of at most %d' % MAX_VISITS)
    for v in visits:
        if not (len(v) == 3 and isinstance(v[0], str) and UUID.match(v[0])
                and isinstance(v[1], str) and _bytes(v[1]) <= 64
                and isinstance(v[2], str) and _bytes(v[2]) <= 256):
            refuse('each visit needs a session uuid of 36 characters, an '
                   'ip of at most 64 bytes and a user agent of 256')


def is_lost(e):
    """Whether `e` lost its connection (a pool with no connection free in
    time has lost nothing)."""
    return isinstance(e, LOST) and not isinstance(
        e.__cause__ if isinstance(e, DjangoError) else e, PoolTimeout)


def close_pool():
    """Django's pool closed: the next call opens a new one."""
    connections['default'].close_pool()


def _retrieved(task):
    """A call given up on: its outcome, unasked for, is not logged."""
    if not task.cancelled():
        task.exception()


class DjangoData(ByDsn, DataInterface):
    """A pool of min_size..max_size connections (Django's, of psycopg_pool).
    The site's account owns these tables (the loader's is the same)."""

    sweeps_itself = False
    writes_tables = True

    def __init__(self, dsn, min_size=4, max_size=16, timeout=3.0,
                 replica=False):
        if replica:
            raise ValueError('the Django ORM backend has no replicas')
        self.dsn = dsn
        self.min_size, self.max_size = min_size, max_size
        self.timeout = timeout
        self.q = None     # queries.py, once start() has set Django up
        self.probe = None    # the probe while PostgreSQL is unreachable

    async def _run(self, call, *args, lost=DataUnavailable, within=None):
        """The coroutine call(*args), its database's failures as `lost`
        (where the connection went, or no answer came in time) or
        DataUnavailable. A lost connection starts the probe, until whose
        success calls fail at once."""
        if self.probe is not None:
            raise DataUnavailable('PostgreSQL at %s: unreachable' % self)
        try:
            return await self._within(within or self.timeout, call, *args)
        except self.q.Fewer:
            raise DataUnavailable('fewer than two stickers loaded') from None
        except asyncio.TimeoutError:
            raise lost('PostgreSQL at %s: no answer within %g s' % (
                self, within or self.timeout)) from None
        except FAILED as e:
            if is_lost(e):
                if self.probe is None:
                    self.probe = asyncio.get_running_loop().create_task(
                        self._probe(), context=contextvars.Context())
            else:
                # The thread's connection back to the pool, if broken
                # (Django looks only at a request's start and end).
                try:
                    await self._within(self.timeout, sync_to_async(
                        close_old_connections))
                except (asyncio.TimeoutError, *FAILED):
                    pass
            raise (lost if is_lost(e) else DataUnavailable)(
                'PostgreSQL at %s: %s' % (self, e)) from e

    @staticmethod
    async def _within(within, call, *args):
        """call(*args) in a task whose database waits end within `within`
        seconds (bounded.DEADLINE), awaited as long: the thread it waits
        for may be busy with others' calls. A task not done by then is
        cancelled, and asyncio.TimeoutError raised."""
        token = DEADLINE.set(time.monotonic() + within)
        try:
            task = asyncio.ensure_future(call(*args))   # with the deadline
        finally:
            DEADLINE.reset(token)
        try:
            done, _ = await asyncio.wait((task,), timeout=within)
        except BaseException:
            task.cancel()
            task.add_done_callback(_retrieved)
            raise
        if not done:
            task.cancel()
            task.add_done_callback(_retrieved)
            raise asyncio.TimeoutError()
        return task.result()

    async def _probe(self):
        """Connect every PROBE_EVERY seconds until PostgreSQL answers; then
        drop the thread's connection and replace the pool (a silent link
        leaves connections that would each wait out a call)."""
        while True:
            try:
                probe = await psycopg.AsyncConnection.connect(
                    self.dsn, connect_timeout=max(1, round(self.timeout)))
                await probe.close()
                break
            except psycopg.Error:
                await asyncio.sleep(PROBE_EVERY)
        try:
            await self._within(self.timeout,
                               sync_to_async(close_old_connections))
        except (asyncio.TimeoutError, *FAILED):
            pass    # the pool drops a dead connection when it is used
        try:
            await asyncio.get_running_loop().run_in_executor(None,
                                                             close_pool)
        except FAILED:
            pass
        finally:
            self.probe = None

    def _atomic(self, function, *args, lost=DataUnavailable, within=None):
        """A synchronous function of queries.py (a transaction.atomic
        block), run in asgiref's thread, its connection given back to the
        pool at its end: a unit of work as Django's pooling expects."""
        return self._run(sync_to_async(self.q.returned(function)), *args,
                         lost=lost, within=within)

    async def start(self):
        import django_settings
        django_settings.configure(databases(self.dsn, self.min_size,
                                            self.max_size, self.timeout))
        from . import queries
        self.q = queries
        try:
            await self._atomic(self.q.prepare, within=MIGRATE_WITHIN)
        except DataUnavailable as e:
            raise DataUnavailable('cannot connect to PostgreSQL at %s: %s'
                                  % (self, e)) from e

    async def close(self):
        if self.probe is not None:
            self.probe.cancel()
            self.probe = None
        if self.q is not None:
            await self._atomic(self.q.close)

    async def record_visits(self, visits):
        await self._call('record_visits', [[list(v) for v in visits]])

    async def sticker_pair(self, session, tokens, ttl):
        return await self._call('sticker_pair', [session, tokens[0],
                                                 tokens[1], ttl])

    async def cast_vote(self, session, win_token, lose_token):
        return await self._call('cast_vote', [session, win_token,
                                              lose_token])

    async def top_stickers(self, count):
        return await self._call('top_stickers', [count])

    async def bottom_stickers(self, count):
        return await self._call('bottom_stickers', [count])

    async def stats(self):
        return await self._run(self.q.stats)

    async def packs(self):
        return await self._run(self.q.packs)

    async def pack(self, name):
        return await self._call('pack_stickers', [name])

    async def sticker(self, pack, sticker_id):
        if type(sticker_id) is int and not 0 < sticker_id < 2 ** 31:
            return None
        return await self._call('get_sticker', [pack, sticker_id])

    async def _call(self, name, args):
        """The page operation `name`, its arguments checked as schema.sql's
        function of that name checks them (the contract suite calls it with
        anything)."""
        if name == 'record_visits':
            visits, = args
            check_visits(visits)
            if not visits:
                return 0
            return await self._atomic(self.q.record_visits, [
                (text(u), text(ip), text(agent)) for u, ip, agent in visits])
        if name == 'sticker_pair':
            session, a, b, ttl = args
            check_session(session)
            check_token(a)
            check_token(b)
            if a == b:
                refuse('the two ballot tokens must differ')
            if not (type(ttl) in (int, float) and 0 < ttl <= 3600):
                refuse('ttl must be a number of seconds in (0, 3600]')
            return await self._run(self.q.sticker_pair, session, (a, b), ttl)
        if name == 'cast_vote':
            session, win, lose = args
            check_session(session)
            check_token(win)
            check_token(lose)
            return await self._atomic(self.q.cast_vote, session, win, lose,
                                      lost=VoteUnknown)
        if name in ('top_stickers', 'bottom_stickers'):
            count, = args
            if type(count) is not int or not 1 <= count <= 100:
                refuse('count must be an integer in 1..100, not %.40r'
                       % (count,))
            return await self._run(self.q.ranked, count,
                                   name == 'top_stickers')
        if name == 'pack_stickers':
            pack, = args
            check_name(pack)
            return await self._run(self.q.pack, text(pack))
        if name == 'get_sticker':
            pack, sticker_id = args
            check_name(pack)
            if not (type(sticker_id) is int and 0 <= sticker_id < 2 ** 31):
                refuse('sticker id must be an integer in 0..2147483647')
            return await self._run(self.q.sticker, text(pack), sticker_id)
        raise ValueError(name)

    async def expire(self):
        limits = await self._atomic(self.q.limits)
        return await self.expire_below(*limits)

    async def expire_below(self, session_ttl, max_sessions, max_ballots):
        """The sweep by these limits, a transaction per batch."""
        removed = [0, 0]
        while True:
            batch = await self._atomic(self.q.sweep_batch, session_ttl,
                                       max_sessions, max_ballots,
                                       EXPIRE_BATCH)
            removed = [removed[0] + batch[0], removed[1] + batch[1]]
            if max(batch) < EXPIRE_BATCH:
                return tuple(removed)

    async def forget_visitors(self):
        return await self._atomic(self.q.forget_visitors)

    async def load_batch(self, packs, stickers):
        return await self._atomic(self.q.load_batch, packs, stickers)

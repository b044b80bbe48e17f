"""A primary and its read replicas behind the one data interface.

What writes or must see its own writes (sessions, ballots, votes, visits,
expiry, loading) goes to the primary. The reads that may lag a moment (the
ranked lists, the statistics, packs and stickers) go to the replicas that
have caught up, in turn, else to the primary.

A replica is in the read set while it answers and lags the primary by at
most `max_lag` seconds. Every CHECK_EVERY seconds the primary's position in
its log is noted with the time, and each replica's asked: a replica's lag is
the age of the oldest noted position it has not reached. A replica that
fails a read or a check, or lags more, is taken out at once (its reads go to
the next one, or the primary) and put back when it has answered REJOIN_AFTER
checks in a row and lags at most half the bound (one answer may come from a
server in the middle of dying). A primary that fails to answer is slow, not
down, until it has answered no check for `down_after` seconds (by default
DOWN_AFTER times the bound): while slow, the replicas are judged as before
(a lagging one stays out); once down, nothing new is written, so a replica
that answers is in, whatever it lacks.

A replica's start is bounded (START_TIMEOUT): one that cannot start then is
out of the read set and started again in the background, with backoff,
until it can; the primary and the other replicas serve meanwhile.
"""
import asyncio
import collections
import logging
import time

from . import REFUSED, DataInterface, DataUnavailable, cancel

log = logging.getLogger('replicas')

CHECK_EVERY = 0.2     # seconds
MAX_LAG = 1.0         # seconds, the default bound
DOWN_AFTER = 3        # times the bound without an answer: the primary is down
NOT_CHECKED = 'not checked yet'
START_WAIT = 10.0     # seconds start() waits for the replicas to catch up
START_TIMEOUT = 5.0   # seconds a replica's start may take
RETRY_FIRST = 1.0     # seconds before the first new start of a replica
RETRY_MAX = 30.0      # seconds between new starts, at most
REJOIN_AFTER = 2      # checks in a row a replica taken out must answer


class Replica:
    def __init__(self, data, name):
        self.data = data
        self.name = name
        self.lag = None     # seconds, at the last check
        self.why_out = NOT_CHECKED
        self.floor = 0      # a position it must reach to join the read set
        self.answered = 0   # checks answered in a row
        self.started = False


class Replicated(DataInterface):
    """`primary` and `replicas`: unstarted DataInterfaces of one driver;
    start() starts them all (a replica that cannot connect is left out
    until it can)."""

    def __init__(self, primary, replicas, max_lag=MAX_LAG, names=None,
                 down_after=None):
        self.primary = primary
        names = names or ['replica %d' % (i + 1) for i in range(len(replicas))]
        self.replicas = [Replica(r, n) for r, n in zip(replicas, names)]
        self.max_lag = max_lag
        self.down_after = down_after or DOWN_AFTER * max_lag
        self.reading = []       # the replicas in the read set
        self._turn = 0
        self._positions = collections.deque()   # (time, primary's position)
        self._primary_down = False
        self._answered = None   # when the primary last told its position
        self._checker = None
        self._starting = []     # the background starts of replicas
        self.fresh = Fresh(self)

    # What the wrapper does not define (address, dsn, pool sizes, ...) is
    # the primary's.
    def __getattr__(self, name):
        return getattr(self.primary, name)

    @property
    def sweeps_itself(self):
        return self.primary.sweeps_itself

    @sweeps_itself.setter
    def sweeps_itself(self, value):
        self.primary.sweeps_itself = value

    async def start(self):
        await self.primary.start()
        await self.start_replicas()

    async def start_replicas(self, wait=START_WAIT):
        """start() for a primary already started. A replica joins the read
        set once it has all the primary had now (the data set just loaded,
        say): this waits up to `wait` seconds for that. A replica that
        cannot start is left out, and started again in the background."""
        self._answered = time.monotonic()
        failed = await asyncio.gather(*(self._start(r) for r in self.replicas))
        for replica, why in zip(self.replicas, failed):
            if why:
                self._starting.append(asyncio.ensure_future(
                    self._start_later(replica, why)))
        try:
            floor = await self.primary.position()
        except DataUnavailable:
            floor = 0
        for replica in self.replicas:
            replica.floor = floor
        deadline = time.monotonic() + wait
        await self.check()
        while (len(self.reading) < sum(r.started for r in self.replicas)
               and time.monotonic() < deadline):
            await asyncio.sleep(CHECK_EVERY / 4)
            await self.check()
        for replica in self.replicas:
            if replica.started and replica.why_out == NOT_CHECKED:
                log.warning('%s has not caught up with the primary within '
                            '%g s: it serves no reads until it has',
                            replica.name, wait)
                replica.why_out = 'has not caught up with the primary'
        self._checker = asyncio.ensure_future(self._check_forever())

    async def _start(self, replica):
        """Start a replica's data interface within START_TIMEOUT: None, or
        why it did not start (then it is closed)."""
        try:
            await asyncio.wait_for(replica.data.start(), START_TIMEOUT)
        except asyncio.CancelledError:     # an Exception on Python 3.7
            raise
        except Exception as e:    # unavailable, or a driver's own error
            await replica.data.close()
            return str(e) or 'no answer within %g s' % START_TIMEOUT
        replica.started = True
        return None

    async def _start_later(self, replica, why):
        """Start it again and again, with backoff, until it starts; it
        joins the read set once caught up (check)."""
        log.warning('%s did not start (%s): it serves no reads until it '
                    'does (trying again in the background)', replica.name, why)
        replica.why_out = 'did not start: %s' % why
        delay = RETRY_FIRST
        while True:
            await asyncio.sleep(delay)
            why = await self._start(replica)
            if why is None:
                break
            replica.why_out = 'did not start: %s' % why
            delay = min(2 * delay, RETRY_MAX)
        replica.why_out = NOT_CHECKED   # _join says it is in

    async def close(self):
        for task in [self._checker] + self._starting:
            if task is not None:
                await cancel(task)
        self._checker, self._starting = None, []
        for replica in self.replicas:
            await replica.data.close()
        await self.primary.close()

    async def _check_forever(self):
        while True:
            await asyncio.sleep(CHECK_EVERY)
            try:
                await self.check()
            except asyncio.CancelledError:     # an Exception on Python 3.7
                raise
            except Exception:     # keep checking
                log.exception('checking the replicas failed')

    async def check(self):
        """Note the primary's position, then judge each replica."""
        now = time.monotonic()
        went_down = None
        try:
            position = await asyncio.wait_for(self.primary.position(),
                                              self.max_lag)
            self._positions.append((now, position))
            self._answered = time.monotonic()
            if self._primary_down:
                log.info('the primary answers again')
            self._primary_down = False
        except (DataUnavailable, asyncio.TimeoutError) as e:
            silent = time.monotonic() - (self._answered or now)
            if not self._primary_down and silent >= self.down_after:
                went_down = (str(e) or 'no answer within %g s' % self.max_lag,
                             silent)
                self._primary_down = True
        # Keep what a replica within twice the bound may not have reached,
        # and the last position noted (a lag grows while the primary is slow).
        while (len(self._positions) > 1 and
               self._positions[0][0] < now - 2 * self.max_lag - 1):
            self._positions.popleft()
        await asyncio.gather(*(self._judge(r) for r in self.replicas))
        if went_down:    # said once the replicas that answer are in
            log.warning('the primary does not answer (%s) for %.1f s: '
                        'reads go to every replica that answers', *went_down)

    async def _judge(self, replica):
        if not replica.started:
            return
        try:
            position = await asyncio.wait_for(replica.data.position(),
                                              self.max_lag)
        except (DataUnavailable, asyncio.TimeoutError) as e:
            self._fail(replica, 'does not answer: %s' % (
                str(e) or 'no answer within %g s' % self.max_lag))
            return
        replica.answered += 1
        replica.lag = self._lag(position)
        if position < replica.floor:
            if replica.why_out != NOT_CHECKED:    # quiet while it starts
                self._leave(replica, 'has not caught up with the primary')
        elif self._primary_down:
            self._join(replica)
        elif replica.lag > self.max_lag:
            self._leave(replica, 'lags the primary by %.1f s' % replica.lag)
        elif replica not in self.reading and replica.lag <= self.max_lag / 2:
            self._join(replica)

    def _lag(self, position):
        """Seconds since the oldest noted primary position beyond
        `position`; 0 if there is none."""
        now = time.monotonic()
        for noted, primary in self._positions:
            if primary > position:
                return now - noted
        return 0.0

    def _join(self, replica):
        if replica.why_out not in (None, NOT_CHECKED) and (
                replica.answered < REJOIN_AFTER):
            return
        if replica not in self.reading:
            self.reading.append(replica)
            log.info('%s is %s the read set (lag %.2f s)', replica.name,
                     'in' if replica.why_out == NOT_CHECKED else 'back in',
                     replica.lag or 0)
            replica.why_out = None

    def _fail(self, replica, why):
        """Out, and its count of answers in a row starts again."""
        replica.answered = 0
        self._leave(replica, why)

    def _leave(self, replica, why):
        if replica in self.reading:
            self.reading.remove(replica)
            log.warning('%s is out of the read set: %s', replica.name, why)
        elif replica.why_out in (None, NOT_CHECKED):
            log.warning('%s is not in the read set: %s', replica.name, why)
        replica.why_out = why

    async def _read(self, name, *args):
        """The read `name` on the next replica in the read set (the others in
        turn if it fails), else on the primary."""
        for _ in range(len(self.reading)):
            self._turn = (self._turn + 1) % len(self.reading)
            replica = self.reading[self._turn]
            try:
                return await getattr(replica.data, name)(*args)
            except DataUnavailable as e:
                if REFUSED in str(e):
                    raise
                self._fail(replica, 'a read failed: %s' % e)
            if not self.reading:
                break
        return await getattr(self.primary, name)(*args)

    async def _fresh(self, name, *args):
        """The read on the primary (Fresh), else as _read."""
        if not self._primary_down:
            try:
                return await getattr(self.primary, name)(*args)
            except DataUnavailable as e:
                if REFUSED in str(e):
                    raise
        return await self._read(name, *args)

    async def top_stickers(self, count):
        return await self._read('top_stickers', count)

    async def bottom_stickers(self, count):
        return await self._read('bottom_stickers', count)

    async def stats(self):
        return await self._read('stats')

    async def packs(self):
        return await self._read('packs')

    async def pack(self, name):
        return await self._read('pack', name)

    async def sticker(self, pack, sticker_id):
        return await self._read('sticker', pack, sticker_id)

    # Writes, and what must see them: the primary's.
    async def record_visits(self, visits):
        return await self.primary.record_visits(visits)

    def ballot_tokens(self, session):
        return self.primary.ballot_tokens(session)

    async def sticker_pair(self, session, tokens, ttl):
        return await self.primary.sticker_pair(session, tokens, ttl)

    async def cast_vote(self, session, win_token, lose_token):
        return await self.primary.cast_vote(session, win_token, lose_token)

    async def expire(self):
        return await self.primary.expire()

    async def load_batch(self, packs, stickers):
        return await self.primary.load_batch(packs, stickers)

    async def position(self):
        return await self.primary.position()


class Fresh:
    """The reads of a Replicated from its primary, for a visitor who must
    see their own write; from the replicas while the primary is down."""

    def __init__(self, replicated):
        self._of = replicated

    async def top_stickers(self, count):
        return await self._of._fresh('top_stickers', count)

    async def bottom_stickers(self, count):
        return await self._of._fresh('bottom_stickers', count)

    async def pack(self, name):
        return await self._of._fresh('pack', name)

    async def sticker(self, pack, sticker_id):
        return await self._of._fresh('sticker', pack, sticker_id)

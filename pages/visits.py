"""Visits (a session and a view each) written in batches after the page is
answered: one call and one transaction for all the visits that came while
the batch before was being written, so a busy site writes many per call and
a quiet one writes each at once.

A crash loses the visits not yet written: some views, and sessions whose
visitors then start new ones. Nothing else waits for them: ballots carry
their session, and the next visit of a session writes it anyway."""
import asyncio
import time
from collections import deque

from data_interface import MAX_VISITS, REFUSED, DataUnavailable

RETRY_AFTER = 0.5       # seconds after the database failed a batch
MAX_PENDING = 20000     # visits kept waiting; beyond, the oldest go
CLOSE_TIMEOUT = 5.0     # seconds close() waits for the last batches
LOG_EVERY = 5.0         # seconds between lines about lost visits
# Visits per call: encoding 1,000 held the loop about 1.2 ms, 250 under
# one (a backlog after an outage goes in more calls, each giving it back).
SLICE = min(250, MAX_VISITS)


class Visits:
    """add() a pages Visit once its page is answered; close() writes what
    is left (or gives up after CLOSE_TIMEOUT)."""

    def __init__(self, data, outage, log):
        self.data = data
        self.outage = outage
        self.log = log
        self.pending = deque()
        self.lost = 0           # dropped: too many pending, or refused
        self._logged = None     # when lost visits were last logged
        self._task = None

    def add(self, visit):
        # Bounded always: a slow database (not down) lets them pile up too.
        if len(self.pending) >= MAX_PENDING:
            self.pending.popleft()
            self._lose(1, 'more than %d wait' % MAX_PENDING)
        self.pending.append(visit)
        if self._task is None:
            # Runs after this loop turn: what else comes in it joins.
            self._task = asyncio.ensure_future(self._write())

    async def _write(self):
        try:
            while self.pending:
                batch = [self.pending.popleft() for _ in
                         range(min(SLICE, len(self.pending)))]
                try:
                    await self.data.record_visits(batch)
                except DataUnavailable as e:
                    if REFUSED in str(e):   # a bug: see below
                        self._lose(len(batch), 'refused: %s' % e)
                        continue
                    # Only what is not written yet (PartlyWritten).
                    self.pending.extendleft(
                        reversed(getattr(e, 'unwritten', batch)))
                    self._trim()
                    self.outage.down(e, refused=0)
                    await asyncio.sleep(RETRY_AFTER)
                    continue
                except Exception:
                    # A bug, not an outage: trying again would not help.
                    self._lose(len(batch), 'they failed')
                    self.log.exception('recording visits failed')
                    continue
                if self.outage.since is not None:
                    self.outage.up()
        finally:
            self._task = None

    def _trim(self):
        over = len(self.pending) - MAX_PENDING
        if over > 0:
            for _ in range(over):
                self.pending.popleft()
            self._lose(over, 'the database fails and %d wait' % MAX_PENDING)

    def _lose(self, count, why):
        self.lost += count
        now = time.monotonic()
        if self._logged is None or now - self._logged >= LOG_EVERY:
            self._logged = now
            self.log.warning('visits not recorded: %d now, %d in all (%s)',
                             count, self.lost, why)

    async def flush(self):
        """Return when every visit added so far is written."""
        while self._task is not None:
            await asyncio.shield(self._task)

    async def close(self):
        try:
            await asyncio.wait_for(self.flush(), CLOSE_TIMEOUT)
        except asyncio.TimeoutError:
            if self._task is not None:
                self._task.cancel()
            self._lose(len(self.pending), 'still failing at shutdown')
            self.pending.clear()

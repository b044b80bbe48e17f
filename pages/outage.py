"""A database outage in a few log lines: when it starts (why), a summary
every `every` seconds while it lasts, and when it ends."""
import time


class Outage:
    def __init__(self, log, every=5.0, clock=time.monotonic):
        self.log = log
        self.every = every
        self.clock = clock
        self.since = None       # when it started; None: no outage
        self.refused = 0        # requests answered 503 since then
        self.reported = 0       # of those, counted in a line already
        self.last_line = 0.0

    def down(self, reason, refused=1):
        """The database failed a request (refused=1) or a background task
        (refused=0)."""
        now = self.clock()
        if self.since is None:
            self.since, self.last_line = now, now
            self.refused = self.reported = refused
            self.log.warning('database unavailable: %s', reason)
            return
        self.refused += refused
        if now - self.last_line >= self.every:
            self.log.warning(
                'database still unavailable after %.0f s: %d requests got 503 '
                'in the last %.0f s (%s)', now - self.since,
                self.refused - self.reported, now - self.last_line, reason)
            self.last_line, self.reported = now, self.refused

    def up(self):
        if self.since is None:
            return
        self.log.warning('database back after %.1f s; %d requests got 503',
                         self.clock() - self.since, self.refused)
        self.since = None

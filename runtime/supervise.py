"""What keeps a child running: the delays between restarts."""

FIRST_DELAY, MAX_DELAY = 0.5, 10.0     # seconds before a restart
STAYED_UP = 30.0        # seconds up after which a death is a new one


class Backoff:
    """Restart delays: 0.5 s, doubling up to 10 s while a process keeps
    dying or failing to start, back to 0.5 s once it stayed up a while."""

    def __init__(self):
        self.delay = FIRST_DELAY
        self.since = None       # when it last started

    def started(self, now):
        self.since = now

    def next(self, now):
        """The delay before the next start (after a death, or a start that
        failed)."""
        if self.since is not None and now - self.since > STAYED_UP:
            self.delay = FIRST_DELAY
        self.since = None
        delay, self.delay = self.delay, min(self.delay * 2, MAX_DELAY)
        return delay

"""A gate that lets callers through in the order they came, at most `size`
at a time: the pool's (pool.py). asyncpg's pool waits on an asyncio.Queue,
which lets a newcomer take a connection just freed before the caller woken
for it, and sends that one to the back of the line: under a flood, some
requests waited seconds while most took milliseconds."""
import asyncio
import collections


class FifoGate:
    """`async with gate.enter(timeout)`, or wait() then leave(): at most
    `size` holders at once; a freed place goes to the longest waiter;
    asyncio.TimeoutError if none comes within `timeout` seconds (None: no
    limit)."""

    def __init__(self, size):
        self.size = size
        self.free = size
        self.waiters = collections.deque()   # futures, in arrival order

    def enter(self, timeout):
        return _Held(self, timeout)

    async def wait(self, timeout):
        """Take a place, waiting in line for one."""
        if self.free and not self.waiters:
            self.free -= 1
            return
        loop = asyncio.get_event_loop()
        place = loop.create_future()
        self.waiters.append(place)
        timer = (loop.call_later(timeout, _time_out, place)
                 if timeout is not None else None)
        try:
            await place
        except BaseException:
            if place.done() and not place.cancelled() \
                    and place.exception() is None:
                self.leave()    # given a place, then cancelled: pass it on
            else:
                place.cancel()   # leave() skips it
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def leave(self):
        """Give a place back: to the longest waiter, if any."""
        while self.waiters:
            place = self.waiters.popleft()
            if not place.done():
                place.set_result(None)
                return
        self.free += 1


def _time_out(place):
    if not place.done():
        place.set_exception(asyncio.TimeoutError())


class _Held:
    def __init__(self, gate, timeout):
        self.gate, self.timeout = gate, timeout

    async def __aenter__(self):
        await self.gate.wait(self.timeout)

    async def __aexit__(self, *exc):
        self.gate.leave()

"""Polling until something holds: one helper for every test that waits."""
import asyncio
import inspect
import time


def _failure(message, timeout):
    if callable(message):
        message = message()
    return AssertionError(message if message is not None
                          else 'not true within %s s' % timeout)


def wait_until(predicate, timeout, interval=0.1, message=None):
    """predicate()'s first true value, asked every `interval` seconds; an
    AssertionError with `message` (a string, or a function called only
    then) once `timeout` seconds have passed without one."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise _failure(message, timeout)
        time.sleep(interval)


async def until(predicate, timeout, interval=0.1, message=None):
    """wait_until's twin inside an event loop: predicate may be a coroutine
    function."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise _failure(message, timeout)
        await asyncio.sleep(interval)

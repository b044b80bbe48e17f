"""Polling until something holds: one helper for every test that waits."""
import asyncio
import inspect
import time


def _failure(message, why):
    if callable(message):
        message = message()
    return AssertionError(message if message is not None else why)


def _check(value, process, message, deadline, timeout):
    """Whether to stop polling: a true value, or a failure."""
    if value:
        return True
    if process is not None and process.poll() is not None:
        raise _failure(message, 'exited with %s' % process.returncode)
    if time.monotonic() > deadline:
        raise _failure(message, 'not true within %s s' % timeout)
    return False


def wait_until(predicate, timeout, interval=0.1, message=None, process=None):
    """predicate()'s first true value, asked every `interval` seconds; an
    AssertionError with `message` (a string, or a function called only
    then) once `timeout` seconds have passed without one, or once
    `process` (a Popen that must keep running meanwhile) has exited."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if _check(value, process, message, deadline, timeout):
            return value
        time.sleep(interval)


async def until(predicate, timeout, interval=0.1, message=None,
                process=None):
    """wait_until's twin inside an event loop: predicate may be a coroutine
    function."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if _check(value, process, message, deadline, timeout):
            return value
        await asyncio.sleep(interval)

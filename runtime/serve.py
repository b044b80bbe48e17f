"""Serving from this process (or as one of --workers N), on the engine's
event loop, with the adapter server.py picked for its framework."""
import asyncio
import gc
import logging
import os
import signal
import sys

from pages import Site
from . import edge, stalls, workers
from .databases import open_databases
from .processes import LISTEN, tcp_sockets

log = logging.getLogger('server')
# The collector's thresholds once the start-up objects are frozen: a young
# generation of 2,000 objects, not 700, took about half its CPU, in young
# passes of 6.4 ms at most (docs/where-the-time-goes.md).
THRESHOLDS = (2000, 10, 10)


def stop_event():
    """An event set by SIGINT or SIGTERM."""
    stopped = asyncio.Event()
    loop = asyncio.get_event_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopped.set)
    return stopped


async def once_listening(port):
    """Once this process listens on `port` (the adapter has built its app),
    collect, then freeze what is alive: the start-up objects (templates,
    routes, the framework's own) leave the collector's full passes, which
    then walk only what requests made."""
    loop = asyncio.get_event_loop()
    while not await loop.run_in_executor(None, tcp_sockets, os.getpid(),
                                         port, LISTEN):
        await asyncio.sleep(0.05)
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    log.info('start-up objects frozen: %d; collector thresholds %s',
             gc.get_freeze_count(), ', '.join(map(str, gc.get_threshold())))


async def serve(adapter, engine, s, worker=None):
    """Serve the site with `adapter` (a *_server package) from this
    process; a worker (workers.py) uses the databases its parent runs, as
    told in `worker` (the parent's settings)."""
    stopped = stop_event()   # before any database starts: none is left
    opened = (workers.given_databases(engine, worker) if worker
              else open_databases(engine, s, stopped))
    async with opened as data:
        site = Site(data, s)
        await site.start()
        if worker:
            workers.watch_parent(stopped)
            ready = asyncio.ensure_future(
                workers.report_ready(worker['ready'], s.port))
        else:
            log.info('serving %s on http://%s:%d/ (Python %s)', engine.name,
                     s.host, s.port, sys.version.split()[0])
        listening = asyncio.ensure_future(once_listening(s.port))
        listening.add_done_callback(stalls.start_after)
        try:
            await adapter.serve(site, s.host, s.port, stopped,
                                edge.limits_of(s))
        finally:
            listening.cancel()
            stalls.stop()
            if worker:
                ready.cancel()
            await site.stop()
        log.info('stopped')


async def serve_workers(engine, s, argv):
    """The parent of s.workers workers (workers.py)."""
    await workers.parent(engine, s, argv, stop_event())
    log.info('stopped')

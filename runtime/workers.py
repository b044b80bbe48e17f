"""server.py --workers N: N processes serve one port, one parent keeps them.

The parent starts the local databases and loads the data set once, keeps
them running (runtime/databases), runs what must happen once, and keeps N
workers running: `python server.py ARGS --worker I`, same interpreter. A
worker is told it is one by --worker; it reads the database addresses the
parent resolved and the key of session cookies from its stdin (one JSON
line: passwords and keys stay off command lines, which `ps` shows) and
binds the port with SO_REUSEPORT. It stops, as on SIGTERM, when its stdin
ends: the parent is gone, even killed.

Periodic work, once or per worker:
- the sweep of expired ballots and idle sessions where the site does it
  (PostgreSQL; DataInterface.sweeps_itself): once, in the parent. From N
  workers at a time, each sweep would remove the excess beyond the caps
  once per worker, so N times too many.
- the statistics of /about (Site.refresh): per worker, a read; each
  worker's page is at most refresh_every old, as with one process.
- the outage reporter: per worker, since each counts its own 503s; an
  outage is a few lines per worker.
- Tarantool sweeps itself (app.lua): once, in the database.
"""
import argparse
import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import time
from contextlib import asynccontextmanager

from data_interface import DataUnavailable, cancel
from pages.outage import Outage
from .databases import WATCH_EVERY, open_databases, table
from .databases.local import GUARDED, guard_all
from .processes import LISTEN, exit_reason, tcp_sockets
from .supervise import Backoff

log = logging.getLogger('workers')
SERVER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      'server.py')
STOP_TIMEOUT = 30.0     # seconds for a worker to finish its requests
READY_TIMEOUT = 120.0   # seconds for a worker to connect and listen


class Worker:
    """One worker process and its restart backoff."""

    def __init__(self, index):
        self.index = index
        self.process = None
        self.ready = None       # read end of the pipe it reports ready on
        self.due = 0.0          # when to start it again
        self.backoff = Backoff()

    def start(self, argv, config):
        read, write = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, SERVER] + list(argv)
                + ['--worker', str(self.index)],
                stdin=subprocess.PIPE, pass_fds=(write,),
                # Out of the terminal's process group: Ctrl-C reaches the
                # parent, which stops the workers itself.
                start_new_session=True)
        finally:
            os.close(write)
        os.set_blocking(read, False)
        self.ready = read
        self.backoff.started(time.monotonic())
        self.process.stdin.write(json.dumps(dict(config, ready=write))
                                 .encode() + b'\n')
        self.process.stdin.flush()   # and keep it open: EOF means stop

    def is_ready(self):
        """True once it listens, False while it starts; raises
        RuntimeError if it ended first."""
        try:
            said = os.read(self.ready, 1)
        except BlockingIOError:
            return False
        if said:
            return True
        self.process.wait()
        raise RuntimeError('worker %d (pid %d) %s before serving' % (
            self.index, self.process.pid,
            exit_reason(self.process.returncode)))

    def reaped(self):
        """The exit code if it ended (then forgotten), else None."""
        if self.process is None or self.process.poll() is None:
            return None
        code = self.process.returncode
        self.forget()
        return code

    def forget(self):
        if self.ready is not None:
            os.close(self.ready)
            self.ready = None
        if self.process is not None:
            self.process.stdin.close()
            self.process = None


class Workers:
    """N workers, started again (with backoff) when one ends."""

    def __init__(self, count, argv, config):
        self.argv, self.config = argv, config
        self.workers = [Worker(i) for i in range(1, count + 1)]
        self._watcher = None

    async def start(self):
        """Start them all and wait until each listens; RuntimeError (all
        stopped) if one ends first."""
        try:
            for w in self.workers:
                w.start(self.argv, self.config)
            deadline = time.monotonic() + READY_TIMEOUT
            waiting = list(self.workers)
            while waiting:
                waiting = [w for w in waiting if not w.is_ready()]
                if time.monotonic() > deadline:
                    raise RuntimeError('workers did not listen within %g s'
                                       % READY_TIMEOUT)
                await asyncio.sleep(0.05)
        except BaseException:
            await self.stop()
            raise
        self._watcher = asyncio.ensure_future(self._watch())

    def pids(self):
        return [w.process.pid for w in self.workers if w.process]

    async def _watch(self):
        while True:
            await asyncio.sleep(WATCH_EVERY)
            now = time.monotonic()
            for w in self.workers:
                pid = w.process.pid if w.process else None
                code = w.reaped()
                if code is not None:
                    delay = w.backoff.next(now)
                    w.due = now + delay
                    log.warning('worker %d (pid %d) %s; starting another in '
                                '%.1f s', w.index, pid, exit_reason(code),
                                delay)
                elif w.process is None and now >= w.due:
                    try:
                        w.start(self.argv, self.config)
                    except OSError as e:
                        w.due = now + w.backoff.next(now)
                        log.warning('worker %d did not start (%s)', w.index, e)

    async def stop(self):
        """SIGTERM to each (they finish pending requests), SIGKILL to those
        still running after STOP_TIMEOUT."""
        if self._watcher is not None:
            await cancel(self._watcher)
            self._watcher = None
        running = [w for w in self.workers if w.process is not None]
        for w in running:
            w.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while any(w.process.poll() is None for w in running):
            if time.monotonic() > deadline:
                for w in running:
                    if w.process.poll() is None:
                        log.warning('worker %d (pid %d) is killed',
                                    w.index, w.process.pid)
                        w.process.kill()
                        w.process.wait()
                break
            await asyncio.sleep(0.05)
        for w in running:
            w.forget()


async def sweep_forever(data, every):
    """Where the database does not sweep itself: the one sweep of every
    worker's sessions and ballots."""
    outage = Outage(log)
    while True:
        await asyncio.sleep(every)
        try:
            await data.expire()
        except asyncio.CancelledError:
            raise   # stopping; on Python 3.7 it is an Exception too
        except DataUnavailable as e:
            outage.down(e, refused=0)
        except Exception:
            log.exception('sweep failed')
        else:
            outage.up()


def worker_pool_size(limit, workers, size):
    """The pool size of each worker such that theirs and the parent's (of
    `size`) stay within the `limit` of PostgreSQL connections; at least 1."""
    return max(1, min(size, (limit - size) // workers))


async def size_pools(data, workers, config):
    """Put the workers' PostgreSQL pool size in their config: smaller than
    one process's when N of them would pass the server's max_connections."""
    limit = await data.connection_limit()
    size = worker_pool_size(limit, workers, data.max_size)
    config['pool_size'] = size
    if size < data.max_size:
        log.info('PostgreSQL takes %d connections: each of the %d workers '
                 'keeps at most %d (one process keeps %d)', limit, workers,
                 size, data.max_size)
    if size * workers + data.max_size > limit:
        log.warning('PostgreSQL takes %d connections, fewer than %d workers '
                    'and this process may open: some pages may get 503; '
                    'raise its max_connections or run fewer workers',
                    limit, workers)


async def parent(engine, s, argv, stopped):
    """The databases, opened as for one process, then s.workers workers
    until `stopped` is set."""
    async with open_databases(engine, s, stopped) as data:
        db = table.of(engine)
        config = {'database': db.to_json(data.address),
                  'session_key': s.session_key,
                  'replicas': [db.to_json(r.data.address)
                               for r in getattr(data, 'replicas', [])],
                  'replica_lag': s.replica_lag,
                  'guarded': [list(o) for o in GUARDED.values()]}
        if hasattr(data, 'connection_limit'):   # a pool per process
            await size_pools(data, s.workers, config)
        sweeper = None
        if not data.sweeps_itself:
            sweeper = asyncio.ensure_future(
                sweep_forever(data, s.refresh_every))
        workers = Workers(s.workers, without_addresses(argv), config)
        try:
            if stopped.is_set():    # a signal while the databases opened
                return
            await workers.start()
            log.info('serving %s on http://%s:%d/ from %d workers, pids '
                     '%s (Python %s)', engine.name, s.host, s.port,
                     s.workers, ' '.join(map(str, workers.pids())),
                     sys.version.split()[0])
            await stopped.wait()
        finally:
            await workers.stop()
            if sweeper is not None:
                await cancel(sweeper)


def without_addresses(argv):
    """argv without the database addresses (and their values, however
    abbreviated): a worker gets the addresses on its stdin, and they may
    hold passwords, which `ps` would show."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument('--tarantool', action='append')
    p.add_argument('--postgres', action='append')
    p.add_argument('--redis', action='append')
    p.add_argument('--rediscluster', action='append')
    p.add_argument('--tarantool-replica', action='append')
    p.add_argument('--postgres-replica', action='append')
    return p.parse_known_args(argv)[1]


def read_config():
    """The parent's JSON line on stdin."""
    line = b''
    while not line.endswith(b'\n'):
        part = os.read(0, 4096)
        if not part:
            raise RuntimeError('no settings from the parent on stdin')
        line += part
    return json.loads(line.decode())


@asynccontextmanager
async def given_databases(engine, config):
    """The worker's data interface to the databases the parent runs."""
    guard_all(config.get('guarded', []))
    db = table.of(engine)
    data = table.data_for(engine, db.from_json(config['database']))
    if config.get('pool_size'):
        data.max_size = config['pool_size']
        data.min_size = min(data.min_size, data.max_size)
    data = table.replicated(
        engine, data, [db.from_json(a) for a in config.get('replicas', [])],
        config.get('replica_lag'))
    # The parent sweeps (see above): the site must not, once per worker.
    data.sweeps_itself = True
    await data.start()
    try:
        yield data
    finally:
        await data.close()


def watch_parent(stopped):
    """Set `stopped` when stdin ends: the parent has gone."""
    loop = asyncio.get_event_loop()

    def readable():
        try:
            if os.read(0, 4096):
                return
        except BlockingIOError:
            return
        except OSError:
            pass
        loop.remove_reader(0)
        if not stopped.is_set():
            log.warning('the parent has gone: stopping')
            stopped.set()
    os.set_blocking(0, False)
    loop.add_reader(0, readable)


async def report_ready(fd, port):
    """Write to fd once this process listens on port."""
    while not tcp_sockets(os.getpid(), port, LISTEN):
        await asyncio.sleep(0.05)
    os.write(fd, b'.')
    os.close(fd)

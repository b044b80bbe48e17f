"""A Robyn application's Rust server (actix-web) started in the running
asyncio loop of this process, as robyn.processpool.spawn_process starts it
in a loop of its own, and stopped without losing a request.

- Robyn's Server.start(socket, workers) makes a loop with
  asyncio.new_event_loop(), keeps it for the handlers and runs it forever;
  here it is handed the running loop instead, whose run_forever() returns
  at once.
- Robyn's SocketHeld always binds with SO_REUSEPORT: the socket it holds
  is replaced by one bound as the settings say (runtime/edge.py).
- actix-web holds every connection open until its client closes it (no
  timeouts, docs/robyn.md), and stops accepting while the open-files limit
  is reached: the soft limit is raised to the hard one, as edge does.
- actix-web sets its own handlers of SIGINT (it then drops the requests in
  progress) and SIGTERM (it may too, and waits up to 30 s for idle
  connections). Both go back to the loop; stop() stops listening, lets the
  requests in progress be answered, shuts the reading side of each
  answered connection (actix-web closes it), and only then hands actix-web
  its SIGTERM, with no connection left.
"""
import asyncio
import ctypes
import logging
import os
import signal
import socket
import struct
import time
from collections import namedtuple

from robyn.robyn import Server, SocketHeld

from runtime import edge

log = logging.getLogger('robyn_server')
STOP_TIMEOUT = 30.0     # seconds for the requests in progress
TAKEN_TIMEOUT = 10.0    # seconds for actix-web to set its signal handlers
SIGNALS = (signal.SIGINT, signal.SIGTERM)
_libc = ctypes.CDLL(None, use_errno=True)
busy = [0]      # handlers in progress (the adapter counts them)

# A started server: Robyn's socket, its descriptor, the port, and actix-web's
# action on SIGTERM.
Held = namedtuple('Held', 'socket fd port sigterm')


class _Borrowed:
    """The running loop as Server.start sees it: its run_forever returns at
    once (the loop already runs), the rest is the loop's."""

    def __init__(self, loop):
        self._loop = loop

    def __getattr__(self, name):
        return getattr(self._loop, name)

    def run_forever(self):
        pass


def _sockets():
    """The descriptors of this process that are sockets."""
    found = set()
    for fd in os.listdir('/proc/self/fd'):
        try:
            if os.readlink('/proc/self/fd/' + fd).startswith('socket:'):
                found.add(int(fd))
        except OSError:
            pass    # the directory's own descriptor, closed
    return found


def _held_socket(host, port, reuse_port):
    """(a SocketHeld, its descriptor): it holds a socket bound as edge binds
    (SO_REUSEPORT only when asked)."""
    before = _sockets()
    held = SocketHeld('127.0.0.1', 0)   # replaced below
    new = sorted(_sockets() - before)
    if len(new) != 1:
        raise RuntimeError('cannot find the socket Robyn holds')
    sock = edge.listening_socket(host, port, reuse_port)
    try:
        os.dup2(sock.fileno(), new[0])
    finally:
        sock.close()
    return held, new[0]


def _sigaction(sig, new=None):
    """The process's action on `sig` (a struct sigaction, as bytes, its
    handler first); `new` (such bytes) set in its place."""
    old = ctypes.create_string_buffer(256)      # a struct sigaction and more
    if _libc.sigaction(sig, new, old):
        raise OSError(ctypes.get_errno(), 'sigaction')
    return old.raw


def _server(app):
    """Robyn's Server with the app's routes, as spawn_process makes it."""
    server = Server()
    server.apply_request_headers(app.request_headers)
    server.apply_response_headers(app.response_headers)
    server.set_response_headers_exclude_paths(
        app.excluded_response_headers_paths)
    for route in app.router.get_routes():
        server.add_route(route.route_type, route.route, route.function,
                         route.is_const)
    for kind, function in app.middleware_router.get_global_middlewares():
        server.add_global_middleware(kind, function)
    for kind, endpoint, function, method in \
            app.middleware_router.get_route_middlewares():
        server.add_middleware_route(kind, endpoint, function, method)
    return server


async def start(app, host, port, reuse_port=False):
    """Serve the robyn.Robyn `app` on host:port from the running loop, on
    one actix worker thread; returns a Held for stop() once actix-web has
    set its signal handlers (and the loop has taken them back)."""
    server = _server(app)
    edge.raise_fd_limit()
    held, fd = _held_socket(host, port, reuse_port)
    loop = asyncio.get_running_loop()
    policy = asyncio.get_event_loop_policy()

    class Policy(type(policy)):
        def new_event_loop(self):
            return _Borrowed(loop)

        def set_event_loop(self, _loop):
            pass

    ours = [_sigaction(sig)[:8] for sig in SIGNALS]
    asyncio.set_event_loop_policy(Policy())
    try:
        server.start(held, 1)
    finally:
        asyncio.set_event_loop_policy(policy)
    deadline = time.monotonic() + TAKEN_TIMEOUT
    while any(_sigaction(sig)[:8] == o for sig, o in zip(SIGNALS, ours)):
        if time.monotonic() > deadline:
            raise RuntimeError('actix-web did not start')
        await asyncio.sleep(0.01)
    actix = _sigaction(signal.SIGTERM)
    for sig in SIGNALS:     # Python's own handler again
        signal.signal(sig, signal.getsignal(sig))
    return Held(held, fd, port, actix)


def _connections(port):
    """The connected TCP sockets of this process on local port `port`
    (duplicates, to be closed)."""
    found = []
    for fd in _sockets():
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if (sock.type == socket.SOCK_STREAM
                    and sock.getsockname()[1] == port):
                sock.getpeername()      # connected: not the listener
                found.append(sock)
                continue
        except (OSError, IndexError):
            pass
        sock.close()
    return found


def _answered(sock):
    """Whether nothing came on the connection since it last sent (its last
    request answered), or nothing came at all (Linux TCP_INFO)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 136)
    last_sent, last_received = struct.unpack_from('I4xI', info, 44)
    received, = struct.unpack_from('Q', info, 128)
    return received == 0 or last_sent <= last_received


def _close_answered(port):
    """Shut the reading side of each answered connection (actix-web then
    closes it); True when none is left."""
    left = _connections(port)
    for sock in left:
        try:
            if not busy[0] and _answered(sock):
                sock.shutdown(socket.SHUT_RD)
        except OSError:
            pass
        sock.close()
    return not left


def _actix_threads():
    """The threads of this process that actix-web runs."""
    names = []
    for task in os.listdir('/proc/self/task'):
        try:
            with open('/proc/self/task/%s/comm' % task) as f:
                name = f.read().strip()
        except OSError:
            continue
        if name.startswith('actix'):
            names.append(name)
    return names


async def _until(done, deadline):
    while not done():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def stop(held):
    """Stop listening, answer the requests in progress, close the
    connections, then stop actix-web as SIGTERM does and wait until its
    threads have ended."""
    # Its accept loop then fails once (EINVAL), and says so.
    logging.getLogger('actix_server.accept').setLevel(logging.CRITICAL)
    listener = socket.socket(fileno=os.dup(held.fd))
    try:
        listener.shutdown(socket.SHUT_RD)   # no new connection
    except OSError:
        pass
    listener.close()
    deadline = time.monotonic() + STOP_TIMEOUT
    if not await _until(lambda: _close_answered(held.port), deadline):
        log.warning('%d requests still pending', busy[0])
    _sigaction(signal.SIGTERM, held.sigterm)
    os.kill(os.getpid(), signal.SIGTERM)
    if not await _until(lambda: not _actix_threads(), deadline + 5):
        log.warning('actix-web did not stop')

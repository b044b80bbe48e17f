"""A Robyn application's Rust server (actix-web) started in the running
asyncio loop of this process, as robyn.processpool.spawn_process starts it
in a loop of its own, and stopped as actix-web stops on SIGTERM.

- Robyn's Server.start(socket, workers) makes a loop with
  asyncio.new_event_loop(), keeps it for the handlers and runs it forever;
  here it is handed the running loop instead, whose run_forever() returns
  at once.
- Robyn's SocketHeld always binds with SO_REUSEPORT: the socket it holds
  is replaced by one bound as the settings say (runtime/edge.py).
- actix-web takes SIGTERM (a graceful stop: no new connection, requests in
  progress answered) and SIGINT (a forced one: they are dropped). SIGINT is
  given back to this process's loop, and stop() sends SIGTERM itself.
- actix-web's graceful stop waits up to 30 s for every open connection,
  idle ones too: once no handler runs, stop() shuts the reading side of the
  port's connections, and actix closes each after its last answer.
"""
import asyncio
import ctypes
import logging
import os
import signal
import socket
import time

from robyn.robyn import Server, SocketHeld

from runtime import edge

log = logging.getLogger('robyn_server')
# actix-web's own graceful stop waits 30 s at most.
STOP_TIMEOUT = 35.0
TAKEN_TIMEOUT = 10.0    # seconds for actix-web to set its signal handlers
_libc = ctypes.CDLL(None, use_errno=True)
busy = [0]      # handlers in progress (the adapter counts them)


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
    """A SocketHeld that holds a socket bound as edge binds (SO_REUSEPORT
    only when asked)."""
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
    return held


def _handler_of(sig):
    """The address of the process's handler of `sig` (sigaction)."""
    action = ctypes.create_string_buffer(256)   # a struct sigaction and more
    if _libc.sigaction(sig, None, action):
        raise OSError(ctypes.get_errno(), 'sigaction')
    return ctypes.c_void_p.from_buffer(action).value


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
    one actix worker thread; returns once actix-web has set its signal
    handlers (SIGINT is then this loop's again)."""
    server = _server(app)
    held = _held_socket(host, port, reuse_port)
    loop = asyncio.get_running_loop()
    policy = asyncio.get_event_loop_policy()

    class Policy(type(policy)):
        def new_event_loop(self):
            return _Borrowed(loop)

        def set_event_loop(self, _loop):
            pass

    ours = _handler_of(signal.SIGINT)
    asyncio.set_event_loop_policy(Policy())
    try:
        server.start(held, 1)
    finally:
        asyncio.set_event_loop_policy(policy)
    deadline = time.monotonic() + TAKEN_TIMEOUT
    while _handler_of(signal.SIGINT) == ours:
        if time.monotonic() > deadline:
            raise RuntimeError('actix-web did not start')
        await asyncio.sleep(0.01)
    # Python's own handler again: its loop's handler runs, actix's does not.
    signal.signal(signal.SIGINT, signal.getsignal(signal.SIGINT))
    return held


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


def _stop_reading(port):
    """Shut the reading side of every connection to `port` in this process:
    actix-web closes each once it has answered what it read."""
    for fd in _sockets():
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if (sock.type == socket.SOCK_STREAM
                    and sock.getsockname()[1] == port):
                sock.getpeername()      # connected: not the listener
                sock.shutdown(socket.SHUT_RD)
        except (OSError, IndexError):
            pass
        finally:
            sock.close()


async def _until(done, deadline):
    while not done():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def stop(port):
    """Stop actix-web as SIGTERM does (no new connection, the requests in
    progress answered), close the idle connections, and wait until its
    threads have ended."""
    os.kill(os.getpid(), signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    if not await _until(lambda: not busy[0], deadline):
        log.warning('%d requests still pending', busy[0])

    def stopped():
        # Again each time: a connection actix took before it saw SIGTERM.
        _stop_reading(port)
        return not _actix_threads()
    if not await _until(stopped, deadline):
        log.warning('actix-web did not stop within %g s', STOP_TIMEOUT)

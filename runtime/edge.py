"""The edge of every server: time limits and a cap on open connections.

Edge wraps the framework's own protocol (aiohttp, sanic, japronto alike) and
keeps one timer per connection, re-armed only when it fires, so a request
costs a few attribute writes and a scan of its head in C:

- a connection with no request in progress is closed after `keepalive`
  seconds (also a new one that sends nothing);
- a request head must be complete `head` seconds after its first byte,
  within MAX_HEAD bytes, and begin with an HTTP/1.0 or 1.1 request line:
  else the framework never sees it, and once the answers before it are
  out, edge answers 431, 505 or 400 and closes the connection (which the
  cap may evict meanwhile);
- a body, sized or chunked, must be complete `body` seconds after its
  head (header names in any capitals; a trickle does not extend it);
- a connection whose request is all here is never closed while a page
  handler works for it (the adapter marks that with enter() and leave()),
  unless its answers have not drained for `keepalive` seconds (a client
  that does not read: a handler waiting to write is not working); a
  handler waiting for a body that does not come is not working either;
- beyond `connections` open connections, each new one closes the oldest
  one that no handler works for (slow, idle and non-reading clients go
  first; a new visitor's request is served); if every one is busy, the new
  one is closed.
"""
import asyncio
import re
import resource
import socket
from collections import namedtuple

from pages.http import EVERY
from runtime import settings

# The edge's limits (seconds, connections); reuse_port: bind with
# SO_REUSEPORT, so that several processes serve one port (server.py
# --workers); adapters honour it.
Limits = namedtuple('Limits', 'head body keepalive connections reuse_port',
                    defaults=(False,))


def limits_of(s):
    """The edge's part of a settings.Settings."""
    return Limits(head=s.header_timeout, body=s.body_timeout,
                  keepalive=s.keepalive_timeout, connections=s.max_connections,
                  reuse_port=s.reuse_port)


# The limits of settings.DEFAULTS.
LIMITS = limits_of(settings.DEFAULTS)


def listening_socket(host, port, reuse_port=False, backlog=1024):
    """A non-blocking TCP socket listening on host:port (with SO_REUSEPORT
    if asked), for a framework that takes a socket but no such option."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock
# Descriptors kept free for the databases, logs and files.
SPARE_FDS = 128

# Deadlines are kept on a clock that ticks this often: no clock call per
# request.
TICK = 0.25
HEAD_END = re.compile(br'\r?\n\r?\n')
LENGTH = re.compile(br'\ncontent-length[ \t]*:[ \t]*([0-9]+)', re.I)
CHUNKED = re.compile(br'\ntransfer-encoding[ \t]*:[^\n]*chunked', re.I)
# A head that announces a body, in any capitals.
BODY = re.compile(br'\n(?:content-length|transfer-encoding)[ \t]*:', re.I)
# A version other than 1.0 or 1.1, or the same text in a header's value: the
# fast path's cheap test (_frame checks each request line).
OTHER_VERSION = re.compile(br' HTTP/(?!1\.[01]\r?\n)')
# The start of a head this server takes: an HTTP/1.0 or 1.1 request line
# (after empty lines), or nothing at all.
GOOD_START = re.compile(br'(?:\r?\n)*(?:[^\r\n]* HTTP/1\.[01]\r?\n|\Z)')
# A request line of another version: 505, else 400.
VERSIONED = re.compile(br'(?:\r?\n)*[^\r\n]* HTTP/[0-9](?:\.[0-9])?\r?\n')
# A chunk's size line: hex digits, maybe extensions.
CHUNK_SIZE = re.compile(br'[ \t]*([0-9a-fA-F]{1,15})[ \t]*(?:;[^\n]*)?\r?\Z')
MAX_HEAD = 64 * 1024
# More digits than any body this server takes: the framework refuses it.
MAX_DIGITS = 18
# REFUSED: a head the framework is not given; see Edge.refuse().
IDLE, HEAD, BODY_PART, REFUSED = 0, 1, 2, 3
# Where a chunked body is (Edge.need < 0): a size line, the trailer, or
# something no server takes (the framework answers it, the timer ends it).
SIZE_LINE, TRAILER, BROKEN = -1, -2, -3
REASONS = {400: b'Bad Request', 431: b'Request Header Fields Too Large',
           505: b'HTTP Version Not Supported'}
_EVERY = b''.join(b'%s: %s\r\n' % (name.encode(), value.encode())
                  for name, value in EVERY)


def refusal(status):
    """The answer to a head edge refuses; the connection closes after it."""
    text = REASONS[status] + b'\n'
    return (b'HTTP/1.1 %d %s\r\n%sContent-Type: text/plain; charset=utf-8\r\n'
            b'Content-Length: %d\r\nConnection: close\r\n\r\n%s'
            % (status, REASONS[status], _EVERY, len(text), text))


def raise_fd_limit():
    """Raise the soft limit of open files to the hard one; the new soft
    limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def connection_cap(limits):
    """limits.connections, lowered to what the open-files limit allows."""
    fds = raise_fd_limit()
    if fds == resource.RLIM_INFINITY:
        return limits.connections
    return min(limits.connections, max(16, fds - SPARE_FDS))


class Gate:
    """The connections of one listening server and their limits."""

    def __init__(self, limits, loop=None):
        self.limits = limits._replace(connections=connection_cap(limits))
        self.keepalive = limits.keepalive
        self.loop = loop or asyncio.get_event_loop()
        self.open = {}      # Edge -> None, oldest first
        self.now = self.loop.time()
        self.loop.call_at(self.now + TICK, self._tick)

    def _tick(self):
        self.now = self.loop.time()
        self.loop.call_at(self.now + TICK, self._tick)

    def protocol(self, make_inner):
        """A protocol factory for loop.create_server()."""
        return lambda: Edge(self, make_inner)

    def admit(self, edge):
        if len(self.open) >= self.limits.connections:
            for oldest in self.open:
                if not oldest.busy or oldest.phase != IDLE or oldest.stalled:
                    break
            else:
                return False
            del self.open[oldest]
            oldest.transport.abort()
        self.open[edge] = None
        return True


class Edge(asyncio.Protocol):
    __slots__ = ('gate', 'make_inner', 'inner', 'transport', 'timer',
                 'armed', 'deadline', 'phase', 'partial', 'need', 'chunked',
                 'busy', 'stalled', 'status')

    def __init__(self, gate, make_inner):
        self.gate = gate
        self.make_inner = make_inner
        self.inner = self.transport = self.timer = None
        self.armed = self.deadline = 0.0     # when the timer fires; the limit
        self.phase = IDLE
        self.partial = b''      # the head (or a chunk's size line) so far
        self.need = 0           # body bytes to come; chunked: see SIZE_LINE
        self.chunked = False
        self.busy = 0           # page handlers at work
        self.stalled = 0.0      # since when writing is paused; 0: it is not
        self.status = 0         # the answer to a refused head, once due

    def connection_made(self, transport):
        self.transport = transport
        if not self.gate.admit(self):
            transport.abort()
            return
        self.inner = self.make_inner()
        self.inner.connection_made(self.inner_transport(transport))
        self._arm(self.gate.now + self.gate.keepalive)

    def connection_lost(self, exc):
        if self.inner is None:
            return
        self.gate.open.pop(self, None)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.inner.connection_lost(exc)

    def data_received(self, data):
        if (self.phase == IDLE and data.endswith(b'\r\n\r\n')
                and len(data) <= MAX_HEAD and BODY.search(data) is None
                and OTHER_VERSION.search(data) is None):
            # Whole requests without a body: the usual case.
            gate = self.gate
            self.deadline = gate.now + gate.keepalive
        elif self.phase == REFUSED:
            return
        else:
            cut = self._frame(data)
            if cut >= 0:
                if cut:
                    self.inner.data_received(data[:cut])
                self.refuse()
                return
        self.inner.data_received(data)

    def inner_transport(self, transport):
        """The transport the framework's protocol is given."""
        return transport

    def eof_received(self):
        return self.inner.eof_received()

    def pause_writing(self):
        self.stall()
        self.inner.pause_writing()

    def stall(self):
        """Writing paused: closed if it does not resume within keepalive."""
        self.stalled = self.gate.loop.time()
        self._wake(self.stalled + self.gate.keepalive)

    def resume_writing(self):
        self.stalled = 0.0
        self.inner.resume_writing()

    def enter(self):
        self.busy += 1

    def leave(self):
        self.busy -= 1
        if not self.busy and self.phase == IDLE:
            self.deadline = self.gate.now + self.gate.keepalive

    def refuse(self):
        """Answer the refused head once the framework has answered what
        came before it (_check), then close; the cap may evict it meanwhile."""
        self.deadline = self.gate.now + self.gate.keepalive
        self._wake(self.gate.loop.time() + TICK)

    def _frame(self, data):
        """Follow request heads and bodies through `data` (no parsing
        beyond finding where they end): -1, or where in `data` a head edge
        refuses begins (then phase is REFUSED and `status` its answer)."""
        if self.phase == REFUSED:
            return 0
        limits = self.gate.limits
        pos, size = 0, len(data)
        while pos < size:
            if self.phase == BODY_PART:
                if self.chunked:
                    pos = self._chunks(data, pos)
                    if pos < 0:
                        return -1
                    self._complete()
                    continue
                if size - pos < self.need:
                    self.need -= size - pos
                    return -1
                pos += self.need
                self._complete()
                continue
            if self.phase == IDLE:
                self.phase = HEAD
                self._arm(self.gate.now + limits.head)
            seen = len(self.partial)
            if seen:
                # Resume the search where the last one stopped: a head
                # sent a byte at a time costs its length, not its square.
                head = self.partial
                head += data[pos:]
                found = HEAD_END.search(head, max(0, seen - 3))
                start = 0
            else:
                head, start = data, pos
                found = HEAD_END.search(data, pos)
            cut = 0 if seen else pos
            if found is None:
                if not seen:
                    self.partial = bytearray(data[pos:])
                if len(self.partial) > MAX_HEAD:
                    return self._refused(431, cut)
                return -1
            end = found.end()
            if end - start > MAX_HEAD:
                return self._refused(431, cut)
            if GOOD_START.match(head, start, end) is None:
                versioned = VERSIONED.match(head, start, end)
                return self._refused(505 if versioned else 400, cut)
            pos += end - seen - start
            self.partial = b''
            self.chunked = CHUNKED.search(head, start, end) is not None
            if self.chunked:
                self.need = SIZE_LINE
            else:
                length = LENGTH.search(head, start, end)
                digits = length.group(1) if length else b'0'
                self.need = (int(digits) if len(digits) <= MAX_DIGITS
                             else 10 ** MAX_DIGITS)
            if self.need:
                self.phase = BODY_PART
                self._arm(self.gate.now + limits.body)
            else:
                self._complete()
        return -1

    def _refused(self, status, cut):
        self.phase = REFUSED
        self.status = status
        self.partial = b''
        return cut

    def _chunks(self, data, pos):
        """Follow a chunked body through data[pos:]: where it ends, or -1
        if it goes on."""
        size = len(data)
        while pos < size:
            if self.need > 0:       # a chunk's data and its CRLF
                taken = min(self.need, size - pos)
                self.need -= taken
                pos += taken
                if not self.need:
                    self.need = SIZE_LINE
                continue
            if self.need == BROKEN:
                return -1
            end = data.find(b'\n', pos)
            if end < 0:
                if not self.partial:
                    self.partial = bytearray()
                self.partial += data[pos:]
                if len(self.partial) > MAX_HEAD:
                    self.need = BROKEN
                return -1
            line = data[pos:end]
            if self.partial:
                line = bytes(self.partial + line)
                self.partial = b''
            pos = end + 1
            if self.need == TRAILER:
                if line in (b'', b'\r'):
                    return pos
                continue
            found = CHUNK_SIZE.match(line)
            if found is None:
                self.need = BROKEN
                return -1
            chunk = int(found.group(1), 16)
            self.need = chunk + 2 if chunk else TRAILER
        return -1

    def _complete(self):
        self.phase = IDLE
        self.need = 0
        self.chunked = False
        self._arm(self.gate.now + self.gate.keepalive)

    def _arm(self, deadline):
        """Set the deadline and wake by then."""
        self.deadline = deadline
        self._wake(deadline)

    def _wake(self, when):
        """Move the timer only if it would fire too late (the fast path in
        data_received only ever moves the deadline later)."""
        if self.timer is None or when < self.armed:
            if self.timer is not None:
                self.timer.cancel()
            self.armed = when
            self.timer = self.gate.loop.call_at(when, self._check)

    def _check(self):
        self.timer = None
        now = self.gate.loop.time()
        # Answers that did not drain for a keep-alive period: the client
        # does not read, and a handler waiting to write is not working.
        drained_by = (self.stalled + self.gate.keepalive if self.stalled
                      else float('inf'))
        if now < drained_by:
            if self.phase == REFUSED and self.status:
                if not self.busy:
                    self.gate.open.pop(self, None)
                    self.transport.write(refusal(self.status))
                    self.transport.close()
                    return
                if now < self.deadline:
                    self._wake(min(now + TICK, drained_by))
                    return
            elif now < self.deadline:
                self._wake(min(self.deadline, drained_by))
                return
            if self.busy and self.phase == IDLE:
                self._wake(min(now + self.gate.keepalive, drained_by))
                return
        self.gate.open.pop(self, None)
        transport = self.transport
        if self.phase != IDLE or transport.get_write_buffer_size():
            transport.abort()   # a slow request, or a client that does not read
        else:
            transport.close()


def protocol_of(transport):
    """The Edge of a connection, or a stand-in when it is gone."""
    edge = transport.get_protocol() if transport is not None else None
    return edge if isinstance(edge, Edge) else GONE


class _Gone:
    busy = 0

    def enter(self):
        pass

    def leave(self):
        pass


GONE = _Gone()

"""Flow control in front of japronto's C protocol, one per connection.

japronto parses every request it is handed and queues those whose handler
is a coroutine in a fixed pipeline of 10 per connection (one more aborts the
process). Worse, every queued task releases the connection once more when
it finds the pipeline already emptied by an earlier one: a few pipelined
requests to coroutine handlers free the connection while in use. And the
response a handler returns lives inside its request, which japronto frees
while the task still holds the response: under uvloop, writes allocate in
between, and the task's end then corrupts memory even without pipelining.

So this protocol frames the requests itself and hands japronto a batch of
whole requests only when japronto's pipeline is empty: the requests that it
answers at once (`at_once`: request-line prefixes of synchronous handlers),
then at most one that may wait. Two loop turns after that one's handler
ends (japronto has written its answer and dropped its task by then), the
next batch follows, and only then is the request let go (feed_later).
Reading pauses meanwhile, so a deep pipeline waits in the socket buffer.
Bodies need a Content-Length of at most `max_body`. A lone request without
a body, the usual case, goes straight through.

The framing must agree with japronto's parser (picohttpparser: a line ends
in CRLF or a bare LF, a head in an empty line, one empty line before a
request is skipped), or one handed "request" may
be several to japronto: so a head must match HEAD exactly, else 400, and a
packet goes straight through only if its one and only head end is its last
byte.

It is also the connection's edge (edge.Edge: time limits, the connection
cap), in one layer: a lone request pays one Python call in front of
japronto.
"""
import asyncio
import re

from runtime import edge

_TOKEN = br"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
HEAD = re.compile(br'(?:\r?\n)?' + _TOKEN + br' [^\x00-\x20\x7f]+ HTTP/1\.[01]\r?\n(?:'
                  + _TOKEN + br':[\t\x20-\x7e\x80-\xff]*\r?\n)*\r?\n')
FIELDS = re.compile(br'\n(content-length|transfer-encoding|connection)[ \t]*:'
                    br'[ \t]*([^\r\n]*)', re.IGNORECASE)
HTTP11 = re.compile(br'[^\r\n]* HTTP/1\.1\r?\n')
REASONS = {400: 'Bad Request', 411: 'Length Required',
           413: 'Payload Too Large', 431: 'Request Header Fields Too Large'}


class Refused(Exception):
    """A request this server does not take; the connection ends after it."""

    def response(self):
        status = self.args[0]
        text = REASONS[status].encode()
        return (b'HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n'
                b'Content-Length: %d\r\nConnection: close\r\n\r\n%s'
                % (status, text, len(text), text))


class Connection(edge.Edge):
    """`make_inner` makes japronto's protocol; `at_once` as above."""
    __slots__ = ('at_once', 'max_body', 'connections', 'buffer', 'last_batch',
                 'refused', 'reading', 'writing', 'searched', 'pending')

    def __init__(self, gate, make_inner, at_once, max_body, connections):
        super().__init__(gate, make_inner)
        self.at_once = at_once
        self.max_body = max_body
        self.connections = connections
        self.buffer = bytearray()
        self.last_batch = False     # end once what was read is answered
        # Where the search for the first incomplete head resumes, and the
        # (start, end, alone) of a request whose head is whole but whose
        # body is not: a head or body sent a byte at a time is scanned
        # once, not once per byte.
        self.searched = 0
        self.pending = None
        self.refused = False
        self.reading = True
        self.writing = True

    def connection_made(self, transport):
        super().connection_made(transport)
        if self.inner is not None:  # admitted
            self.connections.add(self)

    def connection_lost(self, exc):
        self.connections.discard(self)
        self.take(len(self.buffer))
        super().connection_lost(exc)

    def data_received(self, data):
        if (self.phase == edge.IDLE and not self.buffer and self.writing
                and self.inner.pipeline_empty and len(data) <= edge.MAX_HEAD
                and data.endswith(b'\r\n\r\n')
                and data.find(b'\n\r\n') == len(data) - 3
                and b'\n\n' not in data and not edge.BODY.search(data)
                and not edge.OTHER_VERSION.search(data)):
            # One request, no body: as it is.
            gate = self.gate
            self.deadline = gate.now + gate.keepalive
            self.inner.data_received(data)
            return
        if self._frame(data) >= 0:  # the edge's time limits
            self.status = 0     # feed() answers it, as japronto would
        if self.refused or self.last_batch:
            return
        self.buffer += data
        self.feed()

    def eof_received(self):
        self.last_batch = True
        self.feed()
        return True     # keep writing until what was read is answered

    def pause_writing(self):
        self.writing = False
        self.stall()

    def resume_writing(self):
        self.writing = True
        self.stalled = 0.0
        self.feed()

    def stop(self):
        """Finish the request in progress, drop the rest, then close."""
        self.take(len(self.buffer))
        self.last_batch = True
        self.feed()

    def take(self, end):
        """The buffer up to `end`, removed from it."""
        batch = bytes(self.buffer[:end])
        del self.buffer[:end]
        self.searched = max(0, self.searched - end)
        self.pending = None
        return batch

    def feed(self):
        """Hand japronto the next batches while its pipeline is empty."""
        transport = self.transport
        while self.inner.pipeline_empty and self.writing:
            if transport.is_closing():
                return
            try:
                end = self._batch_end()
            except Refused as e:
                self.refused = True
                self.take(len(self.buffer))
                transport.write(e.response())
                transport.write_eof()   # and read on until the client closes
                return
            if not end:
                break
            self.inner.data_received(self.take(end))
        if transport.is_closing():
            return
        idle = self.inner.pipeline_empty and self.writing
        if self.last_batch and idle:
            transport.close()
        elif self.reading != (idle or not self.buffer):
            self.reading = not self.reading
            (transport.resume_reading if self.reading else transport.pause_reading)()

    def _batch_end(self):
        """Where the next batch ends in the buffer (0: no whole request)."""
        end = 0
        while True:
            try:
                found = self._request_end(end)
            except Refused:
                if end:
                    return end      # answer what came before it first
                raise
            if found is None:
                return end
            at_once = self.buffer.startswith(self.at_once, end)
            end, alone = found
            if alone or not at_once:
                return end

    def _request_end(self, start):
        """(end, alone) of the request starting at `start`, or None if it is
        incomplete; alone: it ends a batch, since japronto may close after
        it (and then drops the answers it holds back in a batch)."""
        buffer = self.buffer
        pending = self.pending
        if pending is not None and pending[0] == start:
            return pending[1:] if pending[1] <= len(buffer) else None
        head = edge.HEAD_END.search(buffer, max(start, self.searched - 3))
        if head is None:
            self.searched = len(buffer)
            if len(buffer) - start > edge.MAX_HEAD:
                raise Refused(431)
            return None
        if head.end() - start > edge.MAX_HEAD:
            raise Refused(431)
        strict = HEAD.match(buffer, start)
        if strict is None or strict.end() != head.end():
            raise Refused(400)
        fields = {}
        for name, value in FIELDS.findall(buffer, start, head.end()):
            name = name.lower()
            if name in fields:
                raise Refused(400)      # sent twice
            fields[name] = value.strip()
        if b'transfer-encoding' in fields:
            raise Refused(411)
        length = fields.get(b'content-length', b'0')
        if not length.isdigit():
            raise Refused(400)
        if len(length) > edge.MAX_DIGITS or int(length) > self.max_body:
            raise Refused(413)
        end = head.end() + int(length)
        alone = b'connection' in fields or not HTTP11.match(buffer, start)
        self.searched = 0   # for the request after it, from its start
        if end > len(buffer):
            self.pending = start, end, alone
            return None
        return end, alone


def feed_later(request):
    """Call as a coroutine handler ends. Two loop turns later japronto has
    written the answer and dropped the handler's task: then the connection
    takes its next batch, and lets go of the request, which japronto would
    otherwise free while the task still holds the response inside it."""
    loop = asyncio.get_event_loop()
    loop.call_soon(loop.call_soon, _feed, request.transport.get_protocol(),
                   request)


def _feed(connection, request):
    connection.feed()


async def drain(connections, timeout=10.0):
    """Let every connection finish its request in progress and close; abort
    those still busy after `timeout` seconds."""
    for connection in list(connections):
        connection.stop()
    loop = asyncio.get_event_loop()
    deadline = loop.time() + timeout
    while connections and loop.time() < deadline:
        await asyncio.sleep(0.05)
    for connection in list(connections):
        connection.transport.abort()

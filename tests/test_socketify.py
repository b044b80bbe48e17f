"""The socketify adapter alone, on a small site of its own: the port bound
exclusively unless reuse_port asks to share it, and answers that must wait
for a slow reader (libuv run from asyncio, socketify_server/drive.py)."""
import asyncio
import socket

import pytest

from runtime import edge
from pages.http import Response, Route, text_response
from runtime.processes import free_port

socketify_server = pytest.importorskip('socketify_server')
BIG = b'0123456789abcdef' * 65536     # 1 MiB: more than a 4 KiB window


class Site:
    static, favicon = (), ''     # no static files

    def routes(self):
        return [Route('GET', '/big', self.big, 'html', True),
                Route('GET', '/now', self.now, 'html', False)]

    async def big(self, request):
        await asyncio.sleep(0)      # answered from a task
        return Response(200, 'text/plain', BIG, ())

    async def now(self, request):
        return Response(200, 'text/plain', BIG, ())

    async def not_found(self, request, **params):
        return text_response(404, 'none')


def settings(reuse):
    return edge.LIMITS._replace(reuse_port=reuse)


@pytest.mark.server
@pytest.mark.parametrize('reuse', [False, True])
async def test_port_is_shared_only_when_asked(reuse):
    port = free_port()
    stopped = asyncio.Event()
    first = asyncio.ensure_future(socketify_server.serve(
        Site(), '127.0.0.1', port, stopped, settings(reuse)))
    await asyncio.sleep(0.2)
    second = asyncio.ensure_future(socketify_server.serve(
        Site(), '127.0.0.1', port, stopped, settings(reuse)))
    await asyncio.sleep(0.2)
    try:
        assert second.done() != reuse
        if not reuse:
            with pytest.raises(OSError):
                second.result()
    finally:
        stopped.set()
        await asyncio.wait_for(asyncio.gather(first, second,
                                              return_exceptions=True), 10)


def slow_read(port, path):
    """The body of one GET read through a tiny receive buffer."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(('127.0.0.1', port))
    try:
        s.sendall(b'GET %s HTTP/1.1\r\nHost: t\r\n\r\n' % path)
        data = b''
        while b'\r\n\r\n' not in data:
            data += s.recv(4096)
        head, body = data.split(b'\r\n\r\n', 1)
        while len(body) < len(BIG):
            chunk = s.recv(4096)
            if not chunk:
                break
            body += chunk
        return head, body
    finally:
        s.close()


@pytest.mark.server
@pytest.mark.parametrize('path', [b'/big', b'/now'])
async def test_big_answer_reaches_a_slow_reader(path):
    port = free_port()
    stopped = asyncio.Event()
    serving = asyncio.ensure_future(socketify_server.serve(
        Site(), '127.0.0.1', port, stopped, settings(False)))
    await asyncio.sleep(0.2)
    try:
        head, body = await asyncio.get_running_loop().run_in_executor(
            None, slow_read, port, path)
        assert head.startswith(b'HTTP/1.1 200 OK')
        assert body == BIG
    finally:
        stopped.set()
        await asyncio.wait_for(serving, 10)

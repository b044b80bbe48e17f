"""The Robyn engines' own ways (robyn_server/held.py): the port bound
exclusively unless --workers asks to share it, and a stop, on SIGTERM or
SIGINT, that answers the requests in progress and closes idle connections
at once."""
import asyncio
import signal
import socket

import pytest

from conftest import ServerProcess, engine_args, until
from runtime.processes import ESTABLISHED, tcp_sockets

pytestmark = [pytest.mark.db, pytest.mark.server]
ENGINE = 'robyn-tarantool-one'


def test_the_port_is_not_shared_unless_asked(request, tmp_path):
    """Robyn's SocketHeld binds with SO_REUSEPORT: another server could
    share the port unnoticed. The socket it holds is bound exclusively."""
    server = ServerProcess(ENGINE, engine_args(request, ENGINE),
                           str(tmp_path / 'server.log'))
    try:
        other = socket.socket()
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        with pytest.raises(OSError):
            other.bind(('127.0.0.1', server.port))
        other.close()
    finally:
        assert server.stop() == 0, server.output()


@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGINT],
                         ids=['SIGTERM', 'SIGINT'])
async def test_a_stop_answers_pending_requests_and_closes_idle_ones(
        request, tmp_path, sig):
    """actix-web's graceful stop waits up to 30 s for every connection,
    idle ones too: the adapter closes those once no page works. On SIGINT
    actix-web would drop the requests in progress: the adapter stops it as
    on SIGTERM."""
    server = ServerProcess(ENGINE, engine_args(request, ENGINE)
                           + ['--delay', '2000'], str(tmp_path / 'server.log'))
    reader, writer = await asyncio.open_connection('127.0.0.1', server.port)
    writer.write(b'GET /ugly HTTP/1.1\r\nHost: t\r\n\r\n')
    assert (await reader.readuntil(b'\r\n\r\n')).startswith(b'HTTP/1.1 200')
    pending = [await asyncio.open_connection('127.0.0.1', server.port)
               for _ in range(5)]
    for _, w in pending:
        w.write(b'GET /good HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n')
    # Once all are in and read, their pages wait out the delay (a stop
    # may close a connection actix-web has not handed to its worker yet).
    await until(lambda: tcp_sockets(server.process.pid, server.port,
                                    ESTABLISHED) == 6, 10, 0.02)
    await asyncio.sleep(0.5)
    server.process.send_signal(sig)
    for r, w in pending:
        assert (await asyncio.wait_for(r.read(), 10)).startswith(
            b'HTTP/1.1 200 OK'), server.output()
        w.close()
    # The idle connection is closed (after its answer's body), and the
    # server ends well before actix-web's 30 s.
    assert (await asyncio.wait_for(reader.read(), 10)).endswith(b'UGLY')
    writer.close()
    await asyncio.get_event_loop().run_in_executor(
        None, server.process.wait, 15)
    assert server.stop() == 0, server.output()
    assert 'stopped' in server.output()
    assert 'Traceback' not in server.output()

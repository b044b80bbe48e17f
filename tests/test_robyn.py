"""The Robyn engines' own ways (robyn_server/held.py): the port bound
exclusively unless --workers asks to share it, and a stop, on SIGTERM or
SIGINT, that answers the requests in progress and closes idle connections
at once."""
import asyncio
import contextlib
import resource
import signal
import socket

import pytest

from conftest import ServerProcess, engine_args, fetch, until
from runtime.processes import ESTABLISHED, tcp_sockets

pytestmark = [pytest.mark.db, pytest.mark.server]
ENGINE = 'robyn-tarantool-one'
LOW_FILES = 256     # a soft limit of open files still met (macOS default)


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


@contextlib.contextmanager
def soft_file_limit(soft):
    """This process's soft limit of open files lowered for a while, so that
    a server started meanwhile inherits it."""
    old = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, old)


async def test_idle_sockets_at_a_low_file_limit_leave_visitors_served(
        request, tmp_path):
    """actix-web closes no idle connection, and while the open-files limit
    is reached it accepts none: the adapter raises the soft limit to the
    hard one, as edge does, so more half-sent heads than a soft limit of
    256 leave a new visitor served."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 2 * LOW_FILES:
        pytest.skip('the hard limit of open files is %d' % hard)
    args = engine_args(request, ENGINE)
    with soft_file_limit(LOW_FILES):
        server = ServerProcess(ENGINE, args, str(tmp_path / 'server.log'))
    idle = []
    try:
        for _ in range(LOW_FILES + 44):
            _, w = await asyncio.open_connection('127.0.0.1', server.port)
            w.write(b'GET /good HTTP/1.1\r\nHost: t\r\n')
            idle.append(w)
        # All held by the server, or refused for want of descriptors.
        await until(lambda: 'Too many open files' in server.output()
                    or tcp_sockets(server.process.pid, server.port,
                                   ESTABLISHED) >= len(idle), 30, 0.05)
        reader, writer = await asyncio.open_connection('127.0.0.1',
                                                       server.port)
        writer.write(b'GET /ugly HTTP/1.1\r\nHost: t\r\n\r\n')
        head = await asyncio.wait_for(reader.readuntil(b'\r\n\r\n'), 10)
        assert head.startswith(b'HTTP/1.1 200'), server.output()
        writer.close()
    finally:
        for w in idle:      # before the stop, which waits for their requests
            w.transport.abort()
        await asyncio.gather(*(w.wait_closed() for w in idle))
        assert server.stop() == 0, server.output()
    assert 'Too many open files' not in server.output()


async def test_a_public_host_is_served_behind_a_named_front(request, tmp_path):
    """server.py refuses a Robyn engine beyond the loopback unless --proxy
    names its front server (tests/test_options.py); with one, it serves."""
    server = ServerProcess(ENGINE, engine_args(request, ENGINE) + [
        '--host', '0.0.0.0', '--proxy', '127.0.0.1'],
        str(tmp_path / 'server.log'))
    try:
        status, _, text = await fetch(server.url + '/ugly')
        assert (status, text) == (200, 'UGLY')
    finally:
        assert server.stop() == 0, server.output()

"""granian's RSGI interface: a bare RSGI callable on granian's embedded
server, on the given loop (as the engines are served)."""
from granian.constants import HTTPModes, Interfaces
from granian.server.embed import Server

HEADERS = [('content-type', 'text/plain; charset=utf-8')]


async def app(scope, protocol):
    protocol.response_bytes(200, HEADERS, b'UGLY')


def serve(loop, host, port):
    server = Server(app, address=host, port=port, interface=Interfaces.RSGI,
                    http=HTTPModes.http1, websockets=False, backlog=1024,
                    log_enabled=False)
    loop.run_until_complete(server.serve())

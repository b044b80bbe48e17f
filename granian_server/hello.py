"""granian: a bare ASGI callable on granian's embedded server, on the given
loop (as the engines are served)."""
from granian.constants import HTTPModes, Interfaces
from granian.server.embed import Server

from runtime.frameworks import load_file

app = load_file('asgi_server', 'ugly').app


def serve(loop, host, port):
    server = Server(app, address=host, port=port, interface=Interfaces.ASGINL,
                    http=HTTPModes.http1, websockets=False, backlog=1024,
                    log_enabled=False)
    loop.run_until_complete(server.serve())

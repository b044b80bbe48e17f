"""granian: a bare ASGI callable on granian's embedded server, on the given
loop (as the engines are served)."""
from granian.constants import HTTPModes, Interfaces
from granian.server.embed import Server

HEAD = {'type': 'http.response.start', 'status': 200,
        'headers': [(b'content-type', b'text/plain; charset=utf-8'),
                    (b'content-length', b'4')]}
BODY = {'type': 'http.response.body', 'body': b'UGLY'}


async def app(scope, receive, send):
    await send(HEAD)
    await send(BODY)


def serve(loop, host, port):
    server = Server(app, address=host, port=port, interface=Interfaces.ASGINL,
                    http=HTTPModes.http1, websockets=False, backlog=1024,
                    log_enabled=False)
    loop.run_until_complete(server.serve())

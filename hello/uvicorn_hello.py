"""uvicorn: a bare ASGI callable on uvicorn.Server with httptools, on the
given loop."""
import uvicorn

HEAD = {'type': 'http.response.start', 'status': 200,
        'headers': [(b'content-type', b'text/plain; charset=utf-8'),
                    (b'content-length', b'4')]}
BODY = {'type': 'http.response.body', 'body': b'UGLY'}


async def app(scope, receive, send):
    await send(HEAD)
    await send(BODY)


def serve(loop, host, port):
    config = uvicorn.Config(app, host=host, port=port, http='httptools',
                            interface='asgi3', lifespan='off', ws='none',
                            access_log=False, proxy_headers=False,
                            backlog=1024, log_level='warning')
    loop.run_until_complete(uvicorn.Server(config).serve())

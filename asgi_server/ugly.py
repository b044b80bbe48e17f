"""The bare ASGI callable that the uvicorn and granian references serve:
/ugly (any path) as UGLY, text/plain; charset=utf-8."""
HEAD = {'type': 'http.response.start', 'status': 200,
        'headers': [(b'content-type', b'text/plain; charset=utf-8'),
                    (b'content-length', b'4')]}
BODY = {'type': 'http.response.body', 'body': b'UGLY'}


async def app(scope, receive, send):
    await send(HEAD)
    await send(BODY)

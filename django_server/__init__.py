"""Django adapter: the pages as async Django views (views.py) routed by a
URLconf (urls.py), with settings in one module (django_settings.py, which
the Django ORM backend configures too), on Django's ASGI handler, served
by uvicorn as uvicorn_server serves any ASGI application (behind edge.py).

Django's handler reads a request's whole body before any view runs, with
no bound on its size or time: the body reaches it through bounded(), which
reads it as the bare ASGI application does (pages.MAX_BODY, the body
timeout) and answers a refused one itself."""
from django.core.asgi import get_asgi_application

import django_settings
from runtime import edge
from asgi_server import bounded_body
from uvicorn_server import serve_app

from . import urls

CLOSE = (b'connection', b'close')


async def refuse(r, send):
    """Answer with the pages.http.Response `r`, then close the connection
    (the body may be unread)."""
    await send({'type': 'http.response.start', 'status': r.status,
                'headers': [(b'content-type', r.content_type.encode()),
                            (b'content-length', b'%d' % len(r.body)),
                            CLOSE]})
    await send({'type': 'http.response.body', 'body': r.body})


def bounded(app, timeout):
    """The ASGI application `app` (Django's handler), given a request's
    body once it has all come within MAX_BODY and `timeout` seconds."""
    async def bounded_app(scope, receive, send):
        length = chunked = None
        for name, value in scope['headers']:
            if name == b'content-length':
                length = value
            elif name == b'transfer-encoding':
                chunked = value
        if chunked is None and length in (None, b'0'):
            return await app(scope, receive, send)
        body = await bounded_body(receive, length, timeout)
        if body is None:        # the client left
            return
        if not isinstance(body, bytes):
            return await refuse(body, send)
        whole = [{'type': 'http.request', 'body': body, 'more_body': False}]

        async def replay():
            # The body, then what comes after it (Django's handler waits
            # for the client's leaving while its view runs).
            return whole.pop() if whole else await receive()
        await app(scope, replay, send)
    return bounded_app


def make_app(site, limits=edge.LIMITS):
    django_settings.configure()
    urls.route(site)
    return bounded(get_asgi_application(), limits.body)


async def serve(site, host, port, stopped, limits=edge.LIMITS):
    """Serve until the `stopped` event is set, then finish pending requests."""
    await serve_app(make_app(site, limits), host, port, stopped, limits)

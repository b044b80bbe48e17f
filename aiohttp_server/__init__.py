"""aiohttp adapter: translates requests and responses for pages.Site."""
import os

import aiohttp
from aiohttp import web

from pages import FAVICON, MAX_BODY, ROUTES, SESSION_COOKIE, STATIC, Request


def _handler(page):
    async def handle(request):
        body = await request.read() if request.body_exists else b''
        r = await page(Request(
            request.method, request.path, request.cookies.get(SESSION_COOKIE),
            request.remote, request.headers.get('User-Agent', ''), body),
            **request.match_info)
        headers = [('Content-Type', r.content_type)]
        headers.extend(r.headers)
        return web.Response(status=r.status, body=r.body, headers=headers)
    return handle


def make_app(site):
    app = web.Application(client_max_size=MAX_BODY)
    for method, path, name in ROUTES:
        app.router.add_route(method, path, _handler(getattr(site, name)))
    for prefix, directory in STATIC:
        os.makedirs(directory, exist_ok=True)
        app.router.add_static(prefix, directory)
    app.router.add_get('/favicon.ico', lambda request: web.FileResponse(FAVICON))
    app.router.add_get('/{tail:.*}', _handler(site.not_found))
    return app


# aiohttp 3.9+ takes the shutdown timeout on the runner; 3.8 (the last
# release for Python 3.7) on the site.
_ON_RUNNER = tuple(int(x) for x in aiohttp.__version__.split('.')[:2]) >= (3, 9)
_TIMEOUT = {'shutdown_timeout': 10.0}


async def serve(site, host, port, stopped):
    """Serve until the `stopped` event is set, then finish pending requests."""
    runner = web.AppRunner(make_app(site), access_log=None, handle_signals=False,
                           **(_TIMEOUT if _ON_RUNNER else {}))
    await runner.setup()
    await web.TCPSite(runner, host, port, backlog=1024,
                      **({} if _ON_RUNNER else _TIMEOUT)).start()
    try:
        await stopped.wait()
    finally:
        await runner.cleanup()

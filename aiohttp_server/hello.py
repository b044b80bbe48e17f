"""aiohttp: one route, web.run_app on the given loop."""
from aiohttp import web


async def ugly(request):
    return web.Response(text='UGLY')    # text/plain; charset=utf-8


def serve(loop, host, port):
    app = web.Application()
    app.router.add_get('/ugly', ugly)
    web.run_app(app, host=host, port=port, loop=loop, access_log=None,
                print=None, backlog=1024)

"""sanic: one route, its own server on the given loop (app.run() would pick
the loop itself and fork a worker)."""
from sanic import Sanic
from sanic.response import text


def serve(loop, host, port):
    app = Sanic('hello', configure_logging=False)
    app.config.ACCESS_LOG = False
    app.config.MOTD = False

    @app.get('/ugly')
    async def ugly(request):
        return text('UGLY')     # text/plain; charset=utf-8

    async def start():
        server = await app.create_server(host=host, port=port, access_log=False,
                                         return_asyncio_server=True,
                                         backlog=1024)
        await server.startup()
        await server.start_serving()
        return server
    loop.run_until_complete(start())
    loop.run_forever()

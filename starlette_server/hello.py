"""Starlette: one Route on uvicorn (httptools) in the given loop."""
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route


async def ugly(request):
    return PlainTextResponse('UGLY')    # text/plain; charset=utf-8


def serve(loop, host, port):
    app = Starlette(routes=[Route('/ugly', ugly)])
    server = uvicorn.Server(uvicorn.Config(
        app, host=host, port=port, http='httptools', access_log=False,
        lifespan='off', log_config=None, proxy_headers=False, backlog=1024))
    loop.run_until_complete(server.serve())

"""Litestar: one route handler on uvicorn (httptools) in the given loop."""
import uvicorn
from litestar import Litestar, MediaType, get


@get('/ugly', media_type=MediaType.TEXT)     # text/plain; charset=utf-8
async def ugly() -> str:
    return 'UGLY'


def serve(loop, host, port):
    app = Litestar([ugly], openapi_config=None, logging_config=None)
    server = uvicorn.Server(uvicorn.Config(
        app, host=host, port=port, http='httptools', access_log=False,
        lifespan='off', log_config=None, proxy_headers=False, backlog=1024))
    loop.run_until_complete(server.serve())

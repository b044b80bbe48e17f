"""FastAPI: one route on uvicorn (httptools) in the given loop."""
import uvicorn
from fastapi import FastAPI
from fastapi.responses import PlainTextResponse


def serve(loop, host, port):
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

    @app.get('/ugly')
    async def ugly():
        return PlainTextResponse('UGLY')    # text/plain; charset=utf-8

    server = uvicorn.Server(uvicorn.Config(
        app, host=host, port=port, http='httptools', access_log=False,
        lifespan='off', log_config=None, proxy_headers=False, backlog=1024))
    loop.run_until_complete(server.serve())

"""Quart: one route on uvicorn (httptools) in the given loop."""
import uvicorn
from quart import Quart

app = Quart(__name__)


@app.get('/ugly')
async def ugly():
    return 'UGLY', {'Content-Type': 'text/plain; charset=utf-8'}


def serve(loop, host, port):
    server = uvicorn.Server(uvicorn.Config(
        app, host=host, port=port, http='httptools', access_log=False,
        lifespan='off', log_config=None, proxy_headers=False, backlog=1024))
    loop.run_until_complete(server.serve())

"""BlackSheep: one route on uvicorn (httptools) in the given loop."""
import uvicorn
from blacksheep import Application, Router, text


def serve(loop, host, port):
    router = Router()

    @router.get('/ugly')
    async def ugly():
        return text('UGLY')     # text/plain; charset=utf-8

    app = Application(router=router)
    server = uvicorn.Server(uvicorn.Config(
        app, host=host, port=port, http='httptools', access_log=False,
        lifespan='on', log_config=None, proxy_headers=False, backlog=1024))
    loop.run_until_complete(server.serve())

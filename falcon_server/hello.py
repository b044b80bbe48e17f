"""Falcon: one ASGI resource on uvicorn (httptools) in the given loop."""
import falcon
import falcon.asgi
import uvicorn


class Ugly:
    async def on_get(self, req, resp):
        resp.content_type = falcon.MEDIA_TEXT   # text/plain; charset=utf-8
        resp.text = 'UGLY'


def serve(loop, host, port):
    app = falcon.asgi.App()
    app.add_route('/ugly', Ugly())
    server = uvicorn.Server(uvicorn.Config(
        app, host=host, port=port, http='httptools', access_log=False,
        lifespan='off', log_config=None, proxy_headers=False, backlog=1024))
    loop.run_until_complete(server.serve())

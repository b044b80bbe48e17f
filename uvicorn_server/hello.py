"""uvicorn: a bare ASGI callable on uvicorn.Server with httptools, on the
given loop."""
import uvicorn

from runtime.frameworks import load_file

app = load_file('asgi_server', 'ugly').app


def serve(loop, host, port):
    config = uvicorn.Config(app, host=host, port=port, http='httptools',
                            interface='asgi3', lifespan='off', ws='none',
                            access_log=False, proxy_headers=False,
                            backlog=1024, log_level='warning')
    loop.run_until_complete(uvicorn.Server(config).serve())

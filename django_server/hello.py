"""Django: one async view on Django's ASGI handler (no middleware, as
django_server serves the site), on uvicorn (httptools) in the given loop."""
import uvicorn
from django.conf import settings
from django.core.asgi import get_asgi_application
from django.http import HttpResponse
from django.urls import path


async def ugly(request):
    return HttpResponse('UGLY', content_type='text/plain; charset=utf-8')


urlpatterns = [path('ugly', ugly)]


def serve(loop, host, port):
    # This module is its own URLconf (frameworks.load_file puts it in
    # sys.modules under its name).
    settings.configure(ROOT_URLCONF=__name__, MIDDLEWARE=[],
                       ALLOWED_HOSTS=['*'])
    app = get_asgi_application()    # django.setup()
    server = uvicorn.Server(uvicorn.Config(
        app, host=host, port=port, http='httptools', access_log=False,
        lifespan='off', log_config=None, proxy_headers=False, backlog=1024))
    loop.run_until_complete(server.serve())

"""The site's pages as async Django views: a view translates Django's
HttpRequest into a pages.http.Request and the page's Response into an
HttpResponse, and nothing else."""
from django.http import HttpResponse, HttpResponseNotAllowed

from asgi_server import header_text
from pages import Request as PageRequest


def answer(r):
    """The HttpResponse of a pages.http.Response. The pages' cookies go
    into Django's cookie jar (its headers hold one value per name, and a
    vote may set two cookies); Content-Length is set here, as
    CommonMiddleware would (without it uvicorn would chunk every answer)."""
    response = HttpResponse(r.body, content_type=r.content_type,
                            status=r.status,
                            headers={'Content-Length': len(r.body)})
    for name, value in r.headers:
        if name == 'Set-Cookie':
            response.cookies.load(value)
        else:
            response[name] = value
    return response


def page_view(pages):
    """The view of one path: `pages` maps a method to its page (a GET page
    answers HEAD too; uvicorn leaves the body out); another method is
    Django's 405."""
    allowed = sorted(pages)

    async def view(request, **params):
        page = pages.get(request.method)
        if page is None:
            return HttpResponseNotAllowed(allowed)
        meta = request.META
        return answer(await page(PageRequest(
            request.method, request.path, request.COOKIES,
            meta.get('REMOTE_ADDR', ''),
            header_text(meta.get('HTTP_USER_AGENT', '')), request.body,
            meta.get('HTTP_X_FORWARDED_FOR', '')), **params))
    return view

"""Static files as pages Responses, the same on every framework (and so
with the same headers and HEAD)."""
import mimetypes
import os

from .http import Response, text_response

NOT_FOUND = text_response(404, 'Not Found')
# The longest name and the most segments a static file has; anything
# longer is refused before the file system is asked.
MAX_NAME = 255
MAX_SEGMENTS = 4
ODD_SEGMENTS = frozenset(('', '.', '..'))


def plain_name(name):
    """Whether `name` could be a file's path below a directory: short,
    few segments, none empty, '.' or '..', no NUL."""
    if len(name) > MAX_NAME or '\x00' in name:
        return False
    segments = name.split('/', MAX_SEGMENTS)
    return (len(segments) <= MAX_SEGMENTS
            and ODD_SEGMENTS.isdisjoint(segments))


def file_response(directory, name):
    """200 with the file `name` (a decoded URL path) inside `directory`, or
    404: nothing outside the directory is ever read."""
    if not plain_name(name):
        return NOT_FOUND
    root = os.path.realpath(directory)
    path = os.path.realpath(os.path.join(root, name))
    if not path.startswith(root + os.sep) or not os.path.isfile(path):
        return NOT_FOUND
    try:
        with open(path, 'rb') as f:
            body = f.read()
    except OSError:
        return NOT_FOUND
    content_type = mimetypes.guess_type(path)[0] or 'application/octet-stream'
    return Response(200, content_type, body, ())


def static_page(site, path):
    """The response to a GET of `path` if it names a static file (under a
    prefix of site.static, or the favicon), else None."""
    if path == '/favicon.ico':
        return file_response(*os.path.split(site.favicon))
    for prefix, directory in site.static:
        if path.startswith(prefix + '/'):
            return file_response(directory, path[len(prefix) + 1:])
    return None


def unrouted(site):
    """The page for every GET that no route takes: a static file, else
    the site's 404."""
    async def page(request, **params):
        if request.method in ('GET', 'HEAD'):
            r = static_page(site, request.path)
            if r is not None:
                return r
        return await site.not_found(request)
    return page

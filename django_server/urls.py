"""The URLconf (settings.ROOT_URLCONF): each path of the site's routes as a
Django path() to its view, and every other path to the unrouted page
(static files, the 404 page). route() fills it with the pages of the site
served: Django's URLconf is one per process, as its settings are."""
import re

from django.urls import clear_url_caches, path, re_path

from pages.static import unrouted

from .views import page_view

urlpatterns = []

PARAM = re.compile(r'\{(\w+)\}')


def django_path(route_path):
    """A route's path as path() takes it: '/packs/{pack}' ->
    'packs/<pack>' (a str parameter: one segment)."""
    return PARAM.sub(r'<\1>', route_path[1:])


def route(site):
    """Make urlpatterns the site's."""
    paths = {}
    for r in site.routes():
        pages = paths.setdefault(r.path, {})
        pages[r.method] = r.handler
        if r.method == 'GET':
            pages['HEAD'] = r.handler
    missing = unrouted(site)
    urlpatterns[:] = [path(django_path(p), page_view(pages))
                      for p, pages in paths.items()]
    urlpatterns.append(re_path('', page_view({'GET': missing,
                                              'HEAD': missing})))
    clear_url_caches()

"""Django's settings for the site, every one of them in this module, given
to settings.configure() by configure() before django.setup(): no
DJANGO_SETTINGS_MODULE, no project directory. Django has one set of
settings a process, which the first of its two users configures: the
Django adapter (django_server) and the Django ORM backend
(data_interface/django_orm, with its database).

Middleware: none. The site keeps its own sessions (signed cookies,
pages.sessions), so Django's session and authentication middleware have
nothing to do; a vote needs a one-shot ballot pair issued to the visitor's
own session, which another site cannot read, so CSRF middleware would only
add a second token; the pages send X-Frame-Options, nosniff and the
Server header themselves (pages.http), and the adapter sets Content-Length,
which CommonMiddleware would (its slash redirects and Host checks the site
has no use for). Nothing of Django signs anything, so there is no
SECRET_KEY.
"""
import logging

import django
from django.conf import settings

DEBUG = False
# No page builds a URL or a redirect from the Host header, and nothing
# reads it (a front server, deploy/, picks the host).
ALLOWED_HOSTS = ['*']
ROOT_URLCONF = 'django_server.urls'
MIDDLEWARE = []
INSTALLED_APPS = []
# server.py configures logging, and configure() the one logger of Django's
# that needs it: Django's own configuration would add handlers to it.
LOGGING_CONFIG = None
USE_I18N = False
USE_TZ = True


# The Django ORM backend's app (data_interface/django_orm), installed with
# its database.
ORM_APP = 'data_interface.django_orm'


def configure(databases=None):
    """Configure Django with this module's settings and set it up, once
    per process; databases: the DATABASES of the Django ORM backend (a
    second call must name the same: Django has one set of settings)."""
    if settings.configured:
        # Django fills in the defaults of each database it was given; the
        # first to configure sizes the pool (OPTIONS).
        if databases is not None and any(
                settings.DATABASES.get(alias, {}).get(name) != value
                for alias, given in databases.items()
                for name, value in given.items() if name != 'OPTIONS'):
            raise RuntimeError('Django is configured for other databases')
        return
    names = {name: value for name, value in globals().items()
             if name.isupper() and name != 'ORM_APP'}
    if databases is not None:
        names.update(DATABASES=databases,
                     INSTALLED_APPS=INSTALLED_APPS + [ORM_APP],
                     DEFAULT_AUTO_FIELD='django.db.models.BigAutoField')
    settings.configure(**names)
    logging.getLogger('django.request').addFilter(raised)
    django.setup(set_prefix=False)


def raised(record):
    """Whether a record of django.request is logged: only a view's
    exception (a 500, with its traceback). Django logs every answer of 400
    or more there, but the pages' 4xx and 503 answers are no error (an
    outage is logged by pages.outage, in a few lines), and a malformed
    request is one line per request that anyone may send."""
    return record.levelno >= logging.ERROR and record.exc_info is not None

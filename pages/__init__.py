"""Framework-neutral page logic: see site.py and http.py."""
from .http import Request, Response, SESSION_COOKIE  # noqa: F401
from .site import AT_ONCE, FAVICON, MAX_BODY, ROUTES, STATIC, Site  # noqa: F401

"""Framework-neutral page logic: see site.py and http.py."""
from .http import Request, Response, Route  # noqa: F401
from .site import FAVICON, MAX_BODY, STATIC, Site  # noqa: F401

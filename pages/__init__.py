"""Framework-neutral page logic: see site.py and http.py."""
from .http import Request, Response, Route  # noqa: F401
from .site import MAX_BODY, Site  # noqa: F401

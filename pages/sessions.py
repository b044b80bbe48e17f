"""Session cookies the server issued: `UUID.SIGNATURE`, the signature an
HMAC-SHA256 of the uuid under the server's key. A cookie is checked without
asking the database, and one the server did not issue is no session: its
visitor starts a new one (which --limit-sessions counts)."""
import base64
import hashlib
import hmac
import os
import re

from .http import COOKIE_MAX_AGE, SESSION_COOKIE, new_session

MIN_KEY = 16          # bytes
SIGNATURE = 16        # bytes of the HMAC kept: 128 bits, 22 characters
COOKIE = re.compile(r'\A([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                    r'[0-9a-f]{12})\.([A-Za-z0-9_-]{22})\Z')
LENGTH = 36 + 1 + 22
SET_COOKIE = '%s=%%s; Path=/; Max-Age=%d; HttpOnly; SameSite=Lax' % (
    SESSION_COOKIE, COOKIE_MAX_AGE)


def usable_key(key):
    """The key as bytes; ValueError if it is too short to sign with."""
    if isinstance(key, str):
        key = key.encode('utf-8')
    if not isinstance(key, bytes) or len(key) < MIN_KEY:
        raise ValueError('a session key needs at least %d bytes' % MIN_KEY)
    return key


class Sessions:
    """Issues and checks session cookies under one key (text or bytes, at
    least MIN_KEY bytes); without one, a random key of its own."""

    def __init__(self, key=None):
        key = os.urandom(32) if key is None else usable_key(key)
        # Keyed once: a copy per cookie costs less than hmac.digest().
        self._hmac = hmac.new(key, digestmod=hashlib.sha256)

    def sign(self, session):
        mac = self._hmac.copy()
        mac.update(session.encode('ascii'))
        return base64.urlsafe_b64encode(
            mac.digest()[:SIGNATURE])[:22].decode('ascii')

    def cookie(self, session):
        """The cookie value of a session uuid."""
        return session + '.' + self.sign(session)

    def check(self, value):
        """The session uuid of a cookie value this key signed, else None."""
        # Length first: a huge value costs nothing more.
        if not isinstance(value, str) or len(value) != LENGTH:
            return None
        found = COOKIE.match(value)
        if found is None:
            return None
        session, signature = found.groups()
        if hmac.compare_digest(self.sign(session), signature):
            return session
        return None

    def of(self, request):
        """(session uuid, Set-Cookie header or None): a request without a
        cookie this server issued starts a new session."""
        session = self.check(request.cookies.get(SESSION_COOKIE))
        if session is not None:
            return session, None
        session = new_session()
        return session, ('Set-Cookie', SET_COOKIE % self.cookie(session))

"""Session cookies the server issued: `UUID.SIGNATURE`, the signature an
HMAC-SHA256 of the uuid under the server's key. A cookie is checked without
asking the database, and one the server did not issue is no session: its
visitor starts a new one (which --limit-sessions counts).

The `fresh` cookie of read replicas (pages.site) is signed the same way:
`UNTIL.SIGNATURE` of its session and the time it ends, so a visitor cannot
make one, keep one past its time, or lend one to another session."""
import base64
import hashlib
import hmac
import math
import os
import re
import time

from .http import COOKIE_MAX_AGE, SESSION_COOKIE, new_session

MIN_KEY = 16          # bytes
SIGNATURE = 16        # bytes of the HMAC kept: 128 bits, 22 characters
COOKIE = re.compile(r'\A([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                    r'[0-9a-f]{12})\.([A-Za-z0-9_-]{22})\Z')
LENGTH = 36 + 1 + 22
FRESH = re.compile(r'\A(\d{1,12})\.([A-Za-z0-9_-]{22})\Z')
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

    def fresh(self, session, seconds):
        """A `fresh` cookie value for session, good for `seconds`."""
        until = int(math.ceil(time.time() + seconds))
        return '%d.%s' % (until, self.sign('fresh %s %d' % (session, until)))

    def is_fresh(self, value, session, seconds):
        """Whether value is a `fresh` cookie this key signed for session
        (a uuid or None) for at most `seconds`, not past its time."""
        if session is None or not isinstance(value, str) or len(value) > 40:
            return False
        found = FRESH.match(value)
        if found is None:
            return False
        until = int(found.group(1))
        if not 0 <= until - time.time() <= seconds + 1:
            return False
        return hmac.compare_digest(
            self.sign('fresh %s %d' % (session, until)), found.group(2))

    def of(self, request):
        """(session uuid, Set-Cookie header or None): a request without a
        cookie this server issued starts a new session."""
        session = self.check(request.cookies.get(SESSION_COOKIE))
        if session is not None:
            return session, None
        session = new_session()
        return session, ('Set-Cookie', SET_COOKIE % self.cookie(session))

"""Framework-neutral request and response, and the small parsers pages use."""
import functools
import json
import os
import re
from collections import namedtuple
from urllib.parse import parse_qsl

from data_interface import new_tokens

# What an adapter tells a page: cookies the request's cookies as the
# framework parsed them (a mapping; pages read it only with .get(name),
# the value as text or None: sanic's [name] is a list), body the raw
# request body (b'' when none).
# forwarded: the X-Forwarded-For header as it came ('' when none); only a
# front server named in --proxy is believed (Site.client).
Request = namedtuple('Request', 'method path cookies ip user_agent body forwarded',
                     defaults=('',))
# Request(*fields) from a tuple of all seven, without the Python-level
# __new__ of a namedtuple.
new_request = functools.partial(tuple.__new__, Request)
Response = namedtuple('Response', 'status content_type body headers')
# A page as adapters serve it: method, path (parameters in {braces}), the
# handler (Request and path parameters -> Response), kind ('html' or 'json':
# how its errors are answered), waits (whether it may wait on the database:
# its connection is then kept open while it does, and japronto takes such
# requests one per connection at a time).
Route = namedtuple('Route', 'method path handler kind waits')

# Its value: see pages.sessions.
SESSION_COOKIE = 'sid'
COOKIE_MAX_AGE = 365 * 24 * 3600
HTML = 'text/html; charset=utf-8'
JSON = 'application/json'
TEXT = 'text/plain; charset=utf-8'

# Adapters send EVERY on every response; html() adds FRAMING (the vote
# buttons must not be framed by another site).
SERVER = 'stickers'
NOSNIFF = ('X-Content-Type-Options', 'nosniff')
EVERY = (('Server', SERVER), NOSNIFF)
FRAMING = (('X-Frame-Options', 'DENY'),
           ('Content-Security-Policy', "frame-ancestors 'none'"))

_TOKEN = re.compile(r'\A[A-Za-z0-9_-]{22}\Z')
SLUG = re.compile(r'\A[a-z0-9_]{1,64}\Z')
STICKER_ID = re.compile(r'\A[0-9]{1,9}\Z')


def parse_cookies(header):
    """name -> value from a Cookie header's text; the first of a name
    wins, malformed parts are left out."""
    cookies = {}
    for part in header.split(';'):
        name, eq, value = part.partition('=')
        name = name.strip()
        if eq and name and name not in cookies:
            cookies[name] = value.strip()
    return cookies


def cookies_of(header):
    """parse_cookies(header), of a header given as text or bytes
    (latin-1). Parsed on every request: nothing is kept between them."""
    return parse_cookies(header if isinstance(header, str)
                         else header.decode('latin-1'))


def new_session():
    """A random (version 4) uuid as text: what str(uuid.uuid4()) gives,
    without building a uuid.UUID."""
    b = bytearray(os.urandom(16))
    b[6] = b[6] & 0x0f | 0x40
    b[8] = b[8] & 0x3f | 0x80
    h = b.hex()
    return '%s-%s-%s-%s-%s' % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


# Two new ballot tokens (where the backend does not choose them).
ballot_tokens = new_tokens


def clean_text(value, limit):
    """Valid UTF-8 text without NUL, at most `limit` bytes once encoded (the
    database stores bytes), cut at a character boundary."""
    if not value:
        return ''
    # No character is shorter than a byte, so `limit` characters suffice.
    data = value[:limit].replace('\x00', '\ufffd').encode('utf-8', 'replace')
    return data[:limit].decode('utf-8', 'ignore')


def ballot_form(body):
    """(win, lose) tokens from an urlencoded body, or None if malformed."""
    try:
        fields = dict(parse_qsl(body.decode('ascii'), max_num_fields=8))
    except (UnicodeDecodeError, ValueError):
        return None
    win, lose = fields.get('win', ''), fields.get('lose', '')
    if not (_TOKEN.match(win) and _TOKEN.match(lose)) or win == lose:
        return None
    return win, lose


def json_response(status, payload, headers=()):
    body = json.dumps(payload, ensure_ascii=False).encode('utf-8')
    return Response(status, JSON, body, tuple(headers))


def text_response(status, text):
    return Response(status, TEXT, text.encode('utf-8'), ())

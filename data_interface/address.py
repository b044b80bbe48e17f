"""Database addresses as given on the command line."""
from collections import namedtuple
from urllib.parse import urlsplit

TarantoolAddress = namedtuple('TarantoolAddress', 'host port user password')
TarantoolAddress.__str__ = lambda a: '%s:%s' % (a.host, a.port)

DEFAULT_TARANTOOL = TarantoolAddress(
    '127.0.0.1', 3301, 'sticker_app', 'sticker_app')
ADMIN_USER = ('sticker_admin', 'sticker_admin')


def parse_tarantool(text, default=DEFAULT_TARANTOOL):
    """'[user:password@]host:port' -> TarantoolAddress; ValueError if bad."""
    user, password = default.user, default.password
    if '@' in text:
        credentials, text = text.rsplit('@', 1)
        user, _, password = credentials.partition(':')
        if not user:
            raise ValueError('empty user name in Tarantool address')
    host, sep, port = text.rpartition(':')
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError('Tarantool address must be HOST:PORT, not %r' % text)
    return TarantoolAddress(host, int(port), user, password)


def as_admin(address, admin=ADMIN_USER):
    return address._replace(user=admin[0], password=admin[1])


DEFAULT_POSTGRES = 'postgresql://sticker_app:sticker_app@127.0.0.1:5433/stickers'


def parse_postgres(text):
    """A postgresql:// URL as asyncpg takes it; ValueError if not one."""
    try:
        url = urlsplit(text)
        url.port   # raises ValueError for a bad port
    except ValueError as e:
        raise ValueError('bad PostgreSQL URL %r: %s' % (text, e))
    if url.scheme not in ('postgresql', 'postgres') or not url.hostname:
        raise ValueError('PostgreSQL address must be a URL like %s, not %r'
                         % (DEFAULT_POSTGRES, text))
    return text

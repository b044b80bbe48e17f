"""Database addresses as given on the command line."""
from collections import namedtuple
from urllib.parse import unquote, urlsplit

# (host, port) -> a check that raises ConnectionError (an OSError) unless
# the process listening there may have the passwords kept for it: set for
# the local databases the runtime manages, called before each connection.
_guards = {}


def guard(host, port, check):
    _guards[(host, int(port))] = check


def check_listener(host, port):
    check = _guards.get((host, int(port)))
    if check is not None:
        check()


TarantoolAddress = namedtuple('TarantoolAddress', 'host port user password')
TarantoolAddress.__str__ = lambda a: '%s:%s' % (a.host, a.port)

# The accounts app.lua, schema.sql and Redis's ACL make: the site's, the
# data loader's (Tarantool, Redis), PostgreSQL's owner of the schema.
APP_USER, ADMIN_USER, OWNER_USER = ('sticker_app', 'sticker_admin',
                                    'sticker_owner')
LOOPBACK = ('127.', '::1', 'localhost')


def on_loopback(host):
    return host.startswith(LOOPBACK)


def refuse_default(kind, host, user, password):
    """ValueError for the default password of the site's accounts (the
    account's name, as app.lua and accounts.py's examples have it) on a
    host off the loopback, where anyone who can reach it could log in."""
    if user in (APP_USER, ADMIN_USER) and password == user \
            and not on_loopback(host):
        raise ValueError(
            '%s at %s: the default password of %s is refused off the '
            'loopback: give USER:PASSWORD@ in the address'
            % (kind, host, user))


def parse_tarantool(text):
    """'[user:password@]host:port' -> TarantoolAddress; ValueError if bad.
    Without credentials, the app.lua defaults: sticker_app / sticker_app."""
    user, password = APP_USER, APP_USER
    if '@' in text:
        credentials, text = text.rsplit('@', 1)
        user, _, password = credentials.partition(':')
        if not user:
            raise ValueError('empty user name in Tarantool address')
        if not password:
            raise ValueError('empty password in Tarantool address: '
                             'USER:PASSWORD@HOST:PORT')
    host, sep, port = text.rpartition(':')
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError('Tarantool address must be HOST:PORT, not %r' % text)
    refuse_default('Tarantool', host, user, password)
    return TarantoolAddress(host, int(port), user, password)


def as_admin(address, password=ADMIN_USER):
    """The data loader's account at the same address: the address itself
    if it is that account's; the password None (it cannot log in) where
    the default one is refused (refuse_default)."""
    if address.user == ADMIN_USER:
        return address
    try:
        refuse_default('', address.host, ADMIN_USER, password)
    except ValueError:
        password = None
    return address._replace(user=ADMIN_USER, password=password)


def no_password(kind, address):
    """Why an address of as_admin's without a password cannot log in."""
    return ("%s at %s: the loader's default password is refused off the "
            "loopback: start once with the loader's address, %s:PASSWORD@"
            % (kind, address, address.user))


def parse_postgres(text):
    """A postgresql:// URL as asyncpg takes it; ValueError if not one."""
    try:
        url = urlsplit(text)
        url.port   # raises ValueError for a bad port
    except ValueError as e:
        raise ValueError('bad PostgreSQL URL %r: %s' % (text, e))
    if url.scheme not in ('postgresql', 'postgres') or not url.hostname:
        raise ValueError('PostgreSQL address must be a URL like %s, not %r'
                         % ('postgresql://USER:PASSWORD@HOST:PORT/DB', text))
    return text


RedisAddress = namedtuple('RedisAddress', 'host port user password db')
RedisAddress.__str__ = lambda a: 'redis://%s:%s/%s' % (a.host, a.port, a.db)


def parse_redis(text):
    """'redis://[USER:PASSWORD@]HOST:PORT[/DB]' -> RedisAddress; ValueError
    if bad. Without credentials, the account sticker_app / sticker_app."""
    try:
        url = urlsplit(text)
        port = url.port
    except ValueError as e:
        raise ValueError('bad Redis URL %r: %s' % (text, e))
    if url.scheme != 'redis' or not url.hostname or port is None:
        raise ValueError('Redis address must be a URL like %s, not %r'
                         % ('redis://USER:PASSWORD@HOST:PORT/DB', text))
    db = url.path.strip('/') or '0'
    if not db.isdigit():
        raise ValueError('Redis database must be a number, not %r' % db)
    if url.username is None:
        user, password = APP_USER, APP_USER
    else:
        user, password = unquote(url.username), unquote(url.password or '')
        if not user or not password:
            raise ValueError('Redis URL needs USER:PASSWORD@, both not empty')
    refuse_default('Redis', url.hostname, user, password)
    return RedisAddress(url.hostname, port, user, password, int(db))

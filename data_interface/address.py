"""Database addresses: as given on the command line, or the default ones of
the local databases under var/, whose passwords are kept in files there."""
import os
import secrets
from collections import namedtuple
from urllib.parse import urlsplit

from runtime.settings import DEFAULTS
from . import private

TarantoolAddress = namedtuple('TarantoolAddress', 'host port user password')
TarantoolAddress.__str__ = lambda a: '%s:%s' % (a.host, a.port)

# The accounts app.lua and schema.sql make.
APP_USER, ADMIN_USER = DEFAULTS.app_user, DEFAULTS.admin_user


def secret(path, default=None, create=False):
    """The password kept in the file at path (never through a symbolic
    link); with create, a random one is written there (mode 0600) the
    first time. Else default if no file."""
    try:
        return private.read(path).strip()
    except FileNotFoundError:
        if not create:
            return default
    os.makedirs(os.path.dirname(path), exist_ok=True)
    password = secrets.token_urlsafe(24)
    try:
        private.write(path, password + '\n', exclusive=True)
    except FileExistsError:   # another process made it first
        return secret(path)
    return password


def default_tarantool(settings, user=None):
    """The local Tarantool's address, with the password of the account kept
    under var/; RuntimeError if there is none."""
    user = user or settings.app_user
    path = settings.password_file('tarantool', user)
    password = secret(path)
    if not password:
        raise RuntimeError(
            'a Tarantool answers at %s:%d but %s holds no password for %s: '
            'give its address, --tarantool USER:PASSWORD@HOST:PORT'
            % (settings.db_host, settings.tarantool_port, path, user))
    return TarantoolAddress(settings.db_host, settings.tarantool_port, user,
                            password)


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
    return TarantoolAddress(host, int(port), user, password)


def as_admin(address, password=ADMIN_USER):
    """The data loader's account at the same address."""
    return address._replace(user=ADMIN_USER, password=password)


def default_postgres(settings):
    user = settings.app_user
    password = secret(settings.password_file('postgres', user), default=user)
    return 'postgresql://%s:%s@%s:%d/%s' % (
        user, password, settings.db_host, settings.postgres_port,
        settings.database)


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

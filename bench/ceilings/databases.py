"""The databases of a ceilings run: their addresses as server.py uses them,
whether they run here, and what they show before and after a run."""
from urllib.parse import urlsplit

from .. import profile
from runtime.settings import from_environment


def addresses(database, s):
    """(the site's address, the owner's) as the holder's server.py uses
    them: given to bench.py, else the local database's."""
    from runtime.databases import managed
    settings = from_environment()
    if database == 'tarantool':
        from data_interface.address import parse_tarantool
        given = s.server_env.get('STICKERS_TARANTOOL')
        a = (parse_tarantool(given) if given else managed(
            'tarantool', settings.tarantool_dir, settings=settings
        ).found_address(settings.app_user))
        text = '%s:%s@%s:%d' % (a.user, a.password, a.host, a.port)
        return text, text
    given = s.server_env.get('STICKERS_POSTGRES')
    if given:
        return given, given
    server = managed('postgres', settings.postgres_dir, settings=settings)
    return server.dsn, server.owner_dsn


def local_database(database, address):
    """The pid of the database process at this address when it runs on
    this machine, else None (its CPU is not ours to read)."""
    if database == 'tarantool':
        host, port = address.rsplit('@', 1)[-1].rsplit(':', 1)
    else:
        url = urlsplit(address)
        host, port = url.hostname, url.port or 5432
    if not host.startswith(('127.', 'localhost', '::1', '[::1]')):
        return None
    return profile.listener(int(port))


async def snapshot(database, address, owner, session=None):
    """{'stats': site_stats}; on PostgreSQL, read as the owner, also the
    ballots of `session` and the scans pgbench's calls leave in
    pg_stat_user_tables ('reads')."""
    if database == 'tarantool':
        from .calls import data_of
        data = data_of('asynctnt', address)
        await data.start()
        try:
            return {'stats': list(await data.stats())}
        finally:
            await data.close()
    import asyncpg
    conn = await asyncpg.connect(owner, timeout=5)
    try:
        reads = dict(await conn.fetch(
            "SELECT relname, CASE relname WHEN 'stickers' THEN idx_scan "
            "ELSE seq_scan END FROM pg_stat_user_tables "
            "WHERE relname IN ('stickers', 'server')"))
        return {'stats': list(await conn.fetchval('SELECT site_stats()')),
                'session_ballots': await conn.fetchval(
                    'SELECT count(*) FROM ballots WHERE data->>1 = $1',
                    session), 'reads': reads}
    finally:
        await conn.close()

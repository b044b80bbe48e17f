"""A ceilings run on PostgreSQL: inside it, pgbench with a script per call
as the site's role; asyncpg alone (the site's pool); HTTP async over
asyncpg."""
import os
import shutil
import subprocess
import tempfile
import time
from urllib.parse import unquote, urlsplit

from .. import profile
from runtime.databases.postgres import program
from runtime.settings import from_environment
from . import BALLOT_TTL, CALLS, RANKED_COUNT, SKIP_CALL, VISIT_BATCH
from .databases import DatabaseCeilings

PGBENCH_CLIENTS = 16    # pgbench connections: the site's pool
# The site's calls as pgbench runs them, as the site's role. The vote
# script votes the pair its client issued the transaction before (the
# first vote of each client finds none), then issues the next.
TOKEN = 'substr(md5(random()::text), 1, 22)'
PGBENCH_SCRIPTS = {
    'pair': 'SELECT count(*) FROM sticker_pair(:session, %s, %s, %d);\n'
            % (TOKEN, TOKEN, BALLOT_TTL),
    'vote': 'SELECT cast_vote(:session, :win, :lose) AS outcome \\gset\n'
            'SELECT t.a AS win, t.b AS lose FROM (SELECT %s AS a, %s AS b) t,'
            ' LATERAL (SELECT count(*) FROM sticker_pair(:session, t.a, t.b,'
            ' %d)) p \\gset\n' % (TOKEN, TOKEN, BALLOT_TTL),
    'visits': "SELECT record_visits(ARRAY(SELECT gen_random_uuid()::text "
              "FROM generate_series(1, {n})), array_fill('127.0.0.1'::text, "
              "ARRAY[{n}]), array_fill('pgbench'::text, ARRAY[{n}]));\n"
              .format(n=VISIT_BATCH),
    'stats': 'SELECT site_stats();\n',
}
NO_CALL = 'SELECT 1;\n'
# A token of the right form that was never issued: the first vote's.
UNISSUED = 'A' * 22
# The calls whose reads pg_stat_user_tables shows, and the table read.
READS = {'ranked': 'stickers', 'stats': 'server'}


class PostgresCeilings(DatabaseCeilings):
    timed = ('asyncpg',)
    http_driver = 'asyncpg'
    fields = {'pgbench_clients': PGBENCH_CLIENTS}

    def sync_driver(self, framework):
        return None, 'no synchronous PostgreSQL driver is installed'

    def addresses(self, s):
        given = s.server_env.get(self.database.environment)
        if given:
            return given, given
        settings = from_environment()
        server = self.database.managed(self.database.directory(settings),
                                       settings=settings)
        return server.dsn, server.owner_dsn

    def host_port(self, address):
        url = urlsplit(address)
        return url.hostname, url.port or 5432

    async def snapshot(self, address, owner, session=None):
        """Read as the owner: also the ballots of `session` and the scans
        pgbench's calls leave in pg_stat_user_tables ('reads'), of the
        site's tables only (an ORM's schema beside them has its own)."""
        import asyncpg
        conn = await asyncpg.connect(owner, timeout=5)
        try:
            reads = dict(await conn.fetch(
                "SELECT relname, CASE relname WHEN 'stickers' THEN idx_scan "
                "ELSE seq_scan END FROM pg_stat_user_tables "
                "WHERE schemaname = 'public' "
                "AND relname IN ('stickers', 'server')"))
            return {'stats': list(await conn.fetchval('SELECT site_stats()')),
                    'session_ballots': await conn.fetchval(
                        'SELECT count(*) FROM ballots WHERE data->>1 = $1',
                        session), 'reads': reads}
        finally:
            await conn.close()

    def inside(self, ceilings):
        if program('pgbench') is None:
            return ceilings.skip(self.name, 'database', 'pgbench is not '
                                 'installed (Debian: postgresql-client)')
        from pages.http import new_session
        for call in CALLS:
            ceilings.m.progress.show('ceilings · %s · pgbench · %s'
                                     % (self.name, call))
            self.pgbench_call(ceilings, call, new_session())

    def pgbench_call(self, ceilings, call, session):
        s = ceilings.s
        before, cpu = ceilings.snapshot(session), ceilings.db_cpu()
        argv, done = pgbench(call, ceilings.address, s.duration,
                             PGBENCH_CLIENTS, s.pin['wrk'], session)
        cpu = profile.cpu_delta(cpu, ceilings.db_cpu())
        ceilings.m.progress.advance(s.duration + 1)
        counts = pgbench_counts(done.stdout)
        if done.returncode != 0 or 'done' not in counts:
            return ceilings.skip(self.name, 'database', 'pgbench %s exited '
                                 'with %d: %s' % (
                                     call, done.returncode,
                                     (done.stderr or done.stdout)[-300:]),
                                 failed=True)
        # What pgbench finished is what came back: none within a short
        # run on a busy host is too slow a call, flagged (checks.flag),
        # as the HTTP layers' are, not one that did no work.
        record = {'database': self.name, 'layer': 'database',
                  'call': call, 'done': counts['done'],
                  'answered': counts['done'],
                  'failed': counts.get('failed', 0),
                  'rate': counts.get('rate'), 'seconds': s.duration,
                  'slack': PGBENCH_CLIENTS, 'before': before['stats'],
                  'how': ' '.join(argv)}
        table = READS.get(call, 'server')
        # Backends report their reads as they end: on a busy host, seconds
        # after pgbench has.
        for _ in range(34):
            after = ceilings.snapshot(session)
            record.update(after=after['stats'], evidence={
                'session_ballots': after['session_ballots'],
                'reads': after['reads'][table] - before['reads'][table]})
            if call not in READS or \
                    record['evidence']['reads'] >= counts['done']:
                break
            time.sleep(0.3)
        if call != 'pair':
            del record['evidence']['session_ballots']
        if call not in READS:
            del record['evidence']['reads']
        ceilings.add(record, cpu)


def pgbench_script(call):
    if os.environ.get(SKIP_CALL):
        return NO_CALL
    if call == 'ranked':
        from data_interface.postgres.asyncpg_data import RANKED
        return RANKED[True] % RANKED_COUNT + ';\n'
    return PGBENCH_SCRIPTS[call]


def pgbench(call, dsn, seconds, clients, pin, session):
    """(argv, finished pgbench process): `clients` connections as the
    site's role, one thread, prepared statements."""
    url = urlsplit(dsn)
    script = os.path.join(tempfile.mkdtemp(prefix='stickers-pgbench-'),
                          call + '.sql')
    with open(script, 'w') as f:
        f.write(pgbench_script(call))
    argv = list(pin) + [
        program('pgbench'), '-n', '-M', 'prepared', '-f', script,
        '-c', str(clients), '-j', '1', '-T', str(seconds),
        '-D', 'session=' + session, '-D', 'win=' + UNISSUED,
        '-D', 'lose=' + UNISSUED[:-1] + 'B',
        '-h', url.hostname, '-p', str(url.port or 5432),
        '-U', unquote(url.username or ''), url.path.lstrip('/')]
    env = dict(os.environ, PGPASSWORD=unquote(url.password or ''),
               PGCONNECT_TIMEOUT='5')
    try:
        return argv, subprocess.run(argv, env=env, capture_output=True,
                                    text=True, timeout=seconds + 60)
    finally:
        shutil.rmtree(os.path.dirname(script), ignore_errors=True)


def pgbench_counts(output):
    """(transactions processed, failed, tps) from pgbench's report."""
    found = {}
    for line in output.splitlines():
        key, _, value = line.partition(':')
        if key.startswith('number of transactions actually processed'):
            found['done'] = int(value.split('/')[0])
        elif key.startswith('number of failed transactions'):
            found['failed'] = int(value.split()[0])
        elif line.startswith('tps = '):
            found['rate'] = float(line.split()[2])
    return found

"""bench.py --limits: for each database, its local instance started (or the
address given) as server.py would, pinned like the engines' databases;
then each call timed inside the database, through each driver alone and
through HTTP, and checked; then each page rendered in-process. Everything
lands in results.json under 'limits'."""
import asyncio
import json
import os
import subprocess
import sys
import time
from urllib.parse import urlsplit
from urllib.request import urlopen

from .. import profile, wrk
from ..engine import EngineServer, tail
from ..machine import postgres_binary
from runtime import engines
from runtime.processes import free_port
from runtime.settings import ROOT, from_environment
from . import CALLS, SKIP_CALL, VISIT_BATCH, checks, inside

DATABASES = ('tarantool', 'postgres')
DRIVERS = {'tarantool': ('asynctnt', 'aiotarantool'), 'postgres': ('asyncpg',)}
# The driver layer an engine's driver is held to (its page's ceiling).
ENGINE_DRIVERS = {'tarantool': 'asynctnt', 'aiotarantool': 'aiotarantool',
                  'postgres': 'asyncpg'}
LAYERS = ('database', 'asynctnt', 'aiotarantool', 'asyncpg', 'http-async',
          'http-sync')
# The engine that starts each local database, as a run's engines do.
HOLDERS = {'tarantool': 'aiohttp-tarantool-one-uvloop',
           'postgres': 'aiohttp-postgres-pool-uvloop'}
IN_FLIGHT = 100         # calls in flight through a driver alone
FIBERS = 100            # Tarantool fibers calling in a loop
PGBENCH_CLIENTS = 16    # pgbench connections: the site's pool
# The HTTP server when the run timed no hello: the fastest bare hello on
# the 2-core VM (docs/benchmark.md), else the fastest of the main stack.
FALLBACK_SERVERS = ('japronto', 'socketify')
START_GUESS = 6.0


def guess(s):
    """Rough seconds of a --limits run, for the progress bar."""
    per = s.duration + 1.0
    http = s.warmup + per
    tarantool = START_GUESS * 3 + len(CALLS) * (per + 2 * per + 2 * http)
    postgres = START_GUESS * 2 + len(CALLS) * (per + per + http)
    return tarantool + postgres + 4 * s.duration + 2


def python(driver):
    """The interpreter of a driver layer, or None (the reason)."""
    if driver != 'aiotarantool':
        return sys.executable
    legacy = os.path.join(engines.LEGACY, 'bin', 'python')
    return legacy if os.access(legacy, os.X_OK) else None


def framework_python(framework):
    """The interpreter that runs a framework here (this one, else the
    legacy one), or None."""
    engine = engines.BY_NAME['%s-tarantool-one-uvloop' % framework]
    if engines.unavailable(engine) is None:
        return sys.executable
    return engines.legacy_python(engine)


def http_server(results):
    """(framework, loop, why) of the HTTP layer: the framework of the
    fastest bare hello in the run, else a fixed choice."""
    best = {}
    for r in results['runs']:
        name = r['target']
        if (name.startswith('hello-') and not r.get('warmup')
                and r['mode'] == 'plain' and r.get('wrk')):
            best.setdefault(name, []).append(r['wrk']['requests_per_sec'])
    if best:
        median = {n: sorted(v)[len(v) // 2] for n, v in best.items()}
        name = max(median, key=median.get)
        parts = name.partition('@')[0].split('-')
        return (parts[1], 'uvloop' if parts[-1] == 'uvloop' else 'asyncio',
                'the fastest bare hello of this run, %s at {:,.0f} req/s'
                .format(median[name]) % name)
    for framework in FALLBACK_SERVERS:
        if framework_python(framework):
            return (framework, 'uvloop', 'no hello ran: the fastest bare '
                    'hello on this VM that runs here, docs/benchmark.md')
    return None


class CallServer(EngineServer):
    """python -m bench.ceilings.serve, started like an engine."""

    def __init__(self, framework, loop, driver, sync, port, log, pin, address):
        super().__init__('limits-' + framework, port, [], log, pin,
                         {'STICKERS_LIMITS_ADDRESS': address})
        self.argv = list(pin) + [
            framework_python(framework), '-m', 'bench.ceilings.serve',
            framework, '--loop', loop, '--driver', driver, '-p', str(port)
        ] + (['--sync'] if sync else [])


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


async def _snapshot(database, address, owner, session):
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


def fetch(url):
    with urlopen(url, timeout=30) as f:
        return json.load(f)


def settled(url, call, timeout=30.0):
    """The server's counts of a call once no call is left in flight (a
    load's last requests end after wrk stops)."""
    deadline = time.monotonic() + timeout
    counts = fetch('%s/counts/%s' % (url, call))
    while time.monotonic() < deadline:
        time.sleep(0.2)
        again = fetch('%s/counts/%s' % (url, call))
        if again == counts:
            break
        counts = again
    return counts


class Limits:
    def __init__(self, matrix):
        self.m, self.s = matrix, matrix.s
        self.record = {
            'seconds': self.s.duration, 'in_flight': IN_FLIGHT,
            'fibers': FIBERS, 'pgbench_clients': PGBENCH_CLIENTS,
            'visit_batch': VISIT_BATCH,
            'http': None, 'runs': [], 'renders': {}, 'skipped': []}
        self.target = matrix.target('limits', 'limits')
        self.logs = os.path.join(self.s.out, 'logs')

    def run(self):
        self.m.results['limits'] = self.record
        server = http_server(self.m.results)
        if server:
            self.record['http'] = dict(zip(('framework', 'loop', 'why'),
                                           server))
        else:
            self.skip('all', 'http', 'no HTTP server runs here')
        for database in DATABASES:
            self.database(database)
            self.m.save()
        self.renders()
        failed = ['%s %s %s: %s' % (r['database'], r['layer'], r['call'],
                                     r['failure'])
                  for r in self.record['runs'] if r['failure']]
        failed += ['%s %s: %s' % (x['database'], x['layer'], x['why'])
                   for x in self.record['skipped'] if x.get('failed')]
        if failed:
            self.target.update(status='failed', reason='; '.join(failed))
            self.m.progress.note('limits: FAILED: %s' % failed[0])
        else:
            self.target['note'] = '%d runs, each checked; %d pages rendered' % (
                len(self.record['runs']), len(self.record['renders']))
        if os.environ.get(SKIP_CALL):
            self.target['note'] = '%s set: no call was made' % SKIP_CALL

    def skip(self, database, layer, why, failed=False):
        self.record['skipped'].append({'database': database, 'layer': layer,
                                       'why': why, 'failed': failed})
        self.m.progress.note('limits: %s %s skipped: %s' % (
            database, layer, why.splitlines()[0]))

    def database(self, database):
        log = os.path.join(self.logs, 'limits-%s.log' % database)
        args = [a for a in self.s.server_args]
        if '--workers' in args:
            del args[args.index('--workers'):args.index('--workers') + 2]
        holder = EngineServer(HOLDERS[database], free_port(), args, log,
                              self.s.pin['server'], self.s.server_env)
        self.m.progress.show('limits · %s · starting' % database)
        try:
            try:
                holder.start()
                address, owner = addresses(database, self.s)
            except (RuntimeError, OSError) as e:
                return self.skip(database, 'all', 'the database did not '
                                 'start: %s' % e, failed=True)
            self.m.progress.advance(START_GUESS)
            self.address, self.owner = address, owner
            self.db_pid = local_database(database, address)
            try:
                self.layers(database)
            except Exception as e:   # a database gone: report what ran
                self.skip(database, 'all', 'stopped: %s: %s%s' % (
                    type(e).__name__, e, '' if holder.alive() else
                    '\nserver.py exited:\n' + tail(log)), failed=True)
        finally:
            holder.stop()

    def layers(self, database):
        if database == 'tarantool':
            self.fibers()
        else:
            self.pgbench()
        for driver in DRIVERS[database]:
            self.driver(database, driver)
        self.http(database)

    def snapshot(self, database, session=None):
        return asyncio.run(_snapshot(database, self.address, self.owner,
                                     session))

    def db_cpu(self):
        return profile.database_cpu(self.db_pid) if self.db_pid else {}

    def add(self, record, database_cpu=None):
        """Fill in the rate and CPU per call, check, and keep a record."""
        done = record['done']
        record.setdefault('rate', done / record['seconds']
                          if record['seconds'] else None)
        if database_cpu is not None and done:
            record['database_us'] = database_cpu * 1e6 / done
        record['failure'] = checks.failure(record)
        record['flag'] = checks.flag(record)
        self.record['runs'].append(record)
        said = record['failure'] or record['flag']
        if said:
            self.m.progress.note('limits: %s %s %s: %s' % (
                record['database'], record['layer'], record['call'], said))

    def fibers(self):
        s = self.s
        self.m.progress.show('limits · tarantool · fibers inside it')
        log = os.path.join(self.logs, 'limits-fibers.log')
        try:
            found = inside.tarantool_fibers(
                CALLS, s.duration, FIBERS, self.packs(), s.pin['server'], log)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            return self.skip('tarantool', 'database', str(e), failed=True)
        finally:
            self.m.progress.advance(len(CALLS) * (s.duration + 1))
        for call in CALLS:
            r = found.get(call)
            if r is None:
                self.skip('tarantool', 'database', 'fibers.lua did not run '
                          '%s' % call, failed=True)
                continue
            self.add({'database': 'tarantool', 'layer': 'database',
                      'call': call, 'done': r['done'], 'bad': r['bad'],
                      'seconds': r['seconds'], 'before': r['before'],
                      'after': r['after'],
                      'evidence': {'max_ballots': r['max_ballots']},
                      'database_us': r['cpu_s'] * 1e6 / max(r['done'], 1),
                      'how': '%d fibers in a scratch Tarantool' % FIBERS})

    def packs(self):
        args = self.s.server_args
        return int(args[args.index('--packs') + 1]) if '--packs' in args \
            else from_environment().packs

    def pgbench(self):
        s = self.s
        if postgres_binary('pgbench') is None:
            return self.skip('postgres', 'database', 'pgbench is not '
                             'installed (Debian: postgresql-client)')
        from pages.http import new_session
        for call in CALLS:
            self.m.progress.show('limits · postgres · pgbench · %s' % call)
            session = new_session()
            before, cpu = self.snapshot('postgres', session), self.db_cpu()
            argv, done = inside.pgbench(call, self.address, s.duration,
                                        PGBENCH_CLIENTS, s.pin['wrk'], session)
            cpu = profile.cpu_delta(cpu, self.db_cpu())
            self.m.progress.advance(s.duration + 1)
            counts = inside.pgbench_counts(done.stdout)
            if done.returncode != 0 or 'done' not in counts:
                self.skip('postgres', 'database', 'pgbench %s exited with '
                          '%d: %s' % (call, done.returncode,
                                      (done.stderr or done.stdout)[-300:]),
                          failed=True)
                continue
            record = {'database': 'postgres', 'layer': 'database',
                      'call': call, 'done': counts['done'],
                      'failed': counts.get('failed', 0),
                      'rate': counts.get('rate'), 'seconds': s.duration,
                      'slack': PGBENCH_CLIENTS, 'before': before['stats'],
                      'how': ' '.join(argv)}
            for _ in range(10):     # backends report their reads as they end
                after = self.snapshot('postgres', session)
                record.update(after=after['stats'], evidence={
                    'session_ballots': after['session_ballots'],
                    'reads': after['reads'][
                        'stickers' if call == 'ranked' else 'server']
                    - before['reads']['stickers' if call == 'ranked'
                                      else 'server']})
                if call not in ('ranked', 'stats') or \
                        record['evidence']['reads'] >= counts['done']:
                    break
                time.sleep(0.3)
            if call != 'pair':
                del record['evidence']['session_ballots']
            if call not in ('ranked', 'stats'):
                del record['evidence']['reads']
            self.add(record, cpu)

    def driver(self, database, driver):
        s = self.s
        interpreter = python(driver)
        if interpreter is None:
            return self.skip(database, driver, 'no %s: %s' % (
                engines.LEGACY, engines.LEGACY_HOWTO))
        for call in CALLS:
            self.m.progress.show('limits · %s · %s · %s' % (
                database, driver, call))
            before, cpu = self.snapshot(database), self.db_cpu()
            spec = {'driver': driver, 'address': self.address, 'call': call,
                    'seconds': s.duration, 'in_flight': IN_FLIGHT}
            done = subprocess.run(
                s.pin['wrk'] + [interpreter, '-m', 'bench.ceilings.driver'],
                input=json.dumps(spec), capture_output=True, text=True,
                cwd=ROOT, timeout=s.duration + 60)
            cpu = profile.cpu_delta(cpu, self.db_cpu())
            self.m.progress.advance(s.duration + 1)
            try:
                r = json.loads(done.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                self.skip(database, driver, '%s exited with %d: %s' % (
                    call, done.returncode, done.stderr[-300:]), failed=True)
                continue
            self.add({'database': database, 'layer': driver, 'call': call,
                      'done': r['done'], 'bad': r['bad'],
                      'failed': r['failed'], 'seconds': r['seconds'],
                      'client_us': r['cpu_s'] * 1e6 / max(r['done'], 1),
                      'before': before['stats'],
                      'after': self.snapshot(database)['stats'],
                      'evidence': r['evidence'],
                      'how': 'python -m bench.ceilings.driver: Python %s, '
                      '%d in flight' % (r['python'], IN_FLIGHT)}, cpu)

    def http(self, database):
        if not self.record['http']:
            return
        framework, loop = self.record['http']['framework'], \
            self.record['http']['loop']
        if framework_python(framework) is None:
            return self.skip(database, 'http', '%s does not run here'
                             % framework, failed=True)
        variants = [('http-async', 'asyncpg' if database == 'postgres'
                     else 'asynctnt', False)]
        if database == 'tarantool' and framework == 'japronto':
            variants.append(('http-sync', 'blocking', True))
        else:
            self.skip(database, 'http-sync', 'no synchronous driver for %s'
                      % framework if database == 'tarantool' else
                      'no synchronous PostgreSQL driver is installed')
        for layer, driver, sync in variants:
            log = os.path.join(self.logs, 'limits-%s-%s.log' % (database,
                                                                layer))
            server = CallServer(framework, loop, driver, sync, free_port(),
                                log, self.s.pin['server'], self.address)
            self.m.progress.show('limits · %s · %s · starting' % (
                database, layer))
            try:
                server.start(timeout=60)
            except RuntimeError as e:
                self.skip(database, layer, 'did not start: %s' % e,
                          failed=True)
                continue
            try:
                for call in CALLS:
                    self.http_call(database, layer, server, call)
            finally:
                server.stop()

    def http_call(self, database, layer, server, call):
        s = self.s
        label = 'limits · %s · %s · %s' % (database, layer, call)

        def load(seconds):
            # wrk's plain GET script, at this call's path
            argv, env = wrk.command(server.url, 'ugly', 'plain',
                                    s.connections, seconds, s.threads,
                                    s.timeout, s.pipeline, s.pin['wrk'])
            env['WRK_PATH'] = '/' + call
            return argv, wrk.run(argv, env, seconds)
        try:
            if s.warmup:
                self.m.progress.show(label + ' · warmup')
                load(s.warmup)
            first = settled(server.url, call)
            before = self.snapshot(database)
            self.m.progress.show(label)
            stat, cpu = profile.stat(server.process.pid), self.db_cpu()
            argv, run = load(s.duration)
            stat_after = profile.stat(server.process.pid)
            cpu = profile.cpu_delta(cpu, self.db_cpu())
            last = settled(server.url, call)
            after = self.snapshot(database)
            evidence = fetch(server.url + '/evidence/' + call)
        except (OSError, ValueError) as e:
            return self.skip(database, layer, '%s: no counts: %s\n%s' % (
                call, e, tail(server.log_path)), failed=True)
        finally:
            self.m.progress.advance(s.warmup + s.duration + 1)
        report = run.get('wrk') or {}
        requests = report.get('requests') or 0
        record = dict({k: last[k] - first[k] for k in last},
                      database=database, layer=layer, call=call,
                      rate=report.get('requests_per_sec'),
                      seconds=report.get('seconds') or s.duration,
                      answered=requests - report.get('non2xx', 0),
                      before=before['stats'], after=after['stats'],
                      evidence=evidence, how=' '.join(argv),
                      server=server.argv)
        if stat and stat_after and requests:
            record['server_us'] = (sum(stat_after[1:3]) - sum(stat[1:3])) \
                * 1e6 / requests
        if requests:
            record['database_us'] = cpu * 1e6 / requests
        if run.get('error'):
            record['bad'] = record['bad'] or requests or 1
        self.add(record)

    def renders(self):
        s = self.s
        self.m.progress.show('limits · pages rendered in-process')
        seconds = max(1, s.duration // 2)
        done = subprocess.run(
            s.pin['server'] + [sys.executable, '-m', 'bench.ceilings.renders',
                               '--seconds', str(seconds),
                               '--packs', str(self.packs())],
            capture_output=True, text=True, cwd=ROOT, timeout=8 * seconds + 60)
        self.m.progress.advance(4 * s.duration + 2)
        try:
            found = json.loads(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return self.skip('none', 'renders', 'exited with %d: %s' % (
                done.returncode, done.stderr[-300:]), failed=True)
        self.record['renders'] = {
            page: dict(r, rate=r['renders'] / r['seconds'])
            for page, r in found.items()}


def run(matrix):
    Limits(matrix).run()

"""bench.py --ceilings: for each database, its local instance started (or the
address given) as server.py would, pinned like the engines' databases;
then each call timed inside the database, through each driver alone and
through HTTP, and checked; then each page rendered in-process. Everything
lands in results.json under 'ceilings'."""
import asyncio
import json
import os
import subprocess
import sys
import time

from .. import profile
from ..engine import EngineServer, tail
from ..machine import postgres_binary
from runtime import engines
from runtime.processes import free_port
from runtime.settings import ROOT, from_environment
from . import CALLS, SKIP_CALL, VISIT_BATCH, checks, http_layer, inside
from .databases import addresses, local_database, snapshot

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
START_GUESS = 6.0


def guess(s):
    """Rough seconds of a --ceilings run, for the progress bar."""
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


class Ceilings:
    def __init__(self, matrix):
        self.m, self.s = matrix, matrix.s
        self.record = {
            'seconds': self.s.duration, 'in_flight': IN_FLIGHT,
            'fibers': FIBERS, 'pgbench_clients': PGBENCH_CLIENTS,
            'visit_batch': VISIT_BATCH,
            'http': None, 'runs': [], 'renders': {}, 'skipped': []}
        self.target = matrix.target('ceilings', 'ceilings')
        self.logs = os.path.join(self.s.out, 'logs')

    def run(self):
        self.m.results['ceilings'] = self.record
        server = http_layer.http_server(self.m.results)
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
            self.m.progress.note('ceilings: FAILED: %s' % failed[0])
        else:
            self.target['note'] = '%d runs, each checked; %d pages ' \
                'rendered' % (len(self.record['runs']),
                              len(self.record['renders']))
        if os.environ.get(SKIP_CALL):
            self.target['note'] = '%s set: no call was made' % SKIP_CALL

    def skip(self, database, layer, why, failed=False):
        self.record['skipped'].append({'database': database, 'layer': layer,
                                       'why': why, 'failed': failed})
        self.m.progress.note('ceilings: %s %s skipped: %s' % (
            database, layer, why.splitlines()[0]))

    def database(self, database):
        log = os.path.join(self.logs, 'ceilings-%s.log' % database)
        args = [a for a in self.s.server_args]
        if '--workers' in args:
            del args[args.index('--workers'):args.index('--workers') + 2]
        holder = EngineServer(HOLDERS[database], free_port(), args, log,
                              self.s.pin['server'], self.s.server_env)
        self.m.progress.show('ceilings · %s · starting' % database)
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
        http_layer.run(self, database)

    def snapshot(self, database, session=None):
        return asyncio.run(snapshot(database, self.address, self.owner,
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
            self.m.progress.note('ceilings: %s %s %s: %s' % (
                record['database'], record['layer'], record['call'], said))

    def fibers(self):
        s = self.s
        self.m.progress.show('ceilings · tarantool · fibers inside it')
        log = os.path.join(self.logs, 'ceilings-fibers.log')
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
            self.m.progress.show('ceilings · postgres · pgbench · %s' % call)
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
            self.m.progress.show('ceilings · %s · %s · %s' % (
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

    def renders(self):
        s = self.s
        self.m.progress.show('ceilings · pages rendered in-process')
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
    Ceilings(matrix).run()

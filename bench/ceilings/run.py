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

from .. import profile
from ..engine import EngineServer, tail
from runtime import engines
from runtime.databases import table
from runtime.processes import free_port
from runtime.settings import ROOT, from_environment
from . import CALLS, SKIP_CALL, VISIT_BATCH, checks, http_layer
from .databases import measured

MEASURED = measured()
DATABASES = tuple(d.name for d in MEASURED)
# The driver layer an engine's driver is held to (its page's ceiling).
ENGINE_DRIVERS = {name: layer for d in MEASURED
                  for name, layer in d.drivers().items()}
LAYERS = ('database',) + tuple(dict.fromkeys(ENGINE_DRIVERS.values())) + (
    'http-async', 'http-sync')
IN_FLIGHT = 100         # calls in flight through a driver alone
START_GUESS = 6.0


def guess(s):
    """Rough seconds of a --ceilings run, for the progress bar."""
    per = s.duration + 1.0
    http = s.warmup + per
    return sum(d.guess(START_GUESS, per, http) for d in MEASURED) \
        + 4 * s.duration + 2


def python(layer):
    """The interpreter of a driver layer, or None (the reason)."""
    driver = next(d for d in table.DRIVERS if d.modules[0] == layer)
    if driver.current:
        return sys.executable
    legacy = os.path.join(engines.LEGACY, 'bin', 'python')
    return legacy if os.access(legacy, os.X_OK) else None


class Ceilings:
    def __init__(self, matrix):
        self.m, self.s = matrix, matrix.s
        self.record = {'seconds': self.s.duration, 'in_flight': IN_FLIGHT}
        for database in MEASURED:
            self.record.update(database.fields)
        self.record.update(visit_batch=VISIT_BATCH, http=None, runs=[],
                           renders={}, skipped=[])
        self.target = matrix.target('ceilings', 'ceilings')
        self.logs = os.path.join(self.s.out, 'logs')
        self.db = None      # the database being measured (databases.py)

    def run(self):
        self.m.results['ceilings'] = self.record
        server = http_layer.http_server(self.m.results)
        if server:
            self.record['http'] = dict(zip(('framework', 'loop', 'why'),
                                           server))
        else:
            self.skip('all', 'http', 'no HTTP server runs here')
        for database in MEASURED:
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
        """Its layers, over the database server.py starts (or finds)."""
        self.db, name = database, database.name
        log = os.path.join(self.logs, 'ceilings-%s.log' % name)
        args = [a for a in self.s.server_args]
        if '--workers' in args:
            del args[args.index('--workers'):args.index('--workers') + 2]
        holder = EngineServer(database.holder, free_port(), args, log,
                              self.s.pin['server'], self.s.server_env)
        self.m.progress.show('ceilings · %s · starting' % name)
        try:
            try:
                holder.start()
                address, owner = database.addresses(self.s)
            except (RuntimeError, OSError) as e:
                return self.skip(name, 'all', 'the database did not '
                                 'start: %s' % e, failed=True)
            self.m.progress.advance(START_GUESS)
            self.address, self.owner = address, owner
            self.db_pid = database.local_pid(address)
            try:
                self.layers(database)
            except Exception as e:   # a database gone: report what ran
                self.skip(name, 'all', 'stopped: %s: %s%s' % (
                    type(e).__name__, e, '' if holder.alive() else
                    '\nserver.py exited:\n' + tail(log)), failed=True)
        finally:
            holder.stop()

    def layers(self, database):
        database.inside(self)
        inside = [r for r in self.record['runs']
                  if (r['database'], r['layer']) == (database.name, 'database')]
        if inside and all(r['failure'] for r in inside):
            # Through a driver or HTTP the same calls would fail again.
            s = self.s
            self.m.progress.advance(database.guess(0, s.duration + 1,
                                                   s.warmup + s.duration + 1)
                                    - len(CALLS) * (s.duration + 1))
            return self.skip(database.name, 'drivers and http', 'every call '
                             'failed inside the database', failed=True)
        for driver in database.timed:
            self.driver(database.name, driver)
        http_layer.run(self, database)

    def snapshot(self, session=None):
        """What the database being measured shows."""
        return asyncio.run(self.db.snapshot(self.address, self.owner,
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

    def packs(self):
        args = self.s.server_args
        return int(args[args.index('--packs') + 1]) if '--packs' in args \
            else from_environment().packs

    def driver(self, database, driver):
        s = self.s
        interpreter = python(driver)
        if interpreter is None:
            return self.skip(database, driver, 'no %s: %s' % (
                engines.LEGACY, engines.LEGACY_HOWTO))
        for call in CALLS:
            self.m.progress.show('ceilings · %s · %s · %s' % (
                database, driver, call))
            before, cpu = self.snapshot(), self.db_cpu()
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
                      'after': self.snapshot()['stats'],
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

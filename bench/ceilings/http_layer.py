"""The HTTP layer of a ceilings run: a page per call (serve.py) on the
framework of the run's fastest bare hello, loaded by wrk as the engines
are."""
import json
import os
import sys
import time
from urllib.request import urlopen

from .. import profile, wrk
from ..engine import EngineServer, tail
from runtime import engines
from runtime.databases import table
from runtime.processes import free_port
from . import CALLS

# The HTTP server when the run timed no hello: the fastest bare hello on
# the 2-core VM (docs/benchmark.md), else the fastest of the main stack.
FALLBACK_SERVERS = ('japronto', 'socketify')


def framework_python(framework):
    """The interpreter that runs a framework here (this one, else the
    legacy one), or None."""
    # The reference database's first driver runs on either interpreter.
    driver = table.REFERENCE.drivers[0]
    engine = engines.BY_NAME['%s-%s-%s-uvloop' % (
        framework, driver.name, driver.modes[0])]
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
        super().__init__('ceilings-' + framework, port, [], log, pin,
                         {'STICKERS_CEILINGS_ADDRESS': address})
        self.argv = list(pin) + [
            framework_python(framework), '-m', 'bench.ceilings.serve',
            framework, '--loop', loop, '--driver', driver, '-p', str(port)
        ] + (['--sync'] if sync else [])


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


def run(ceilings, database):
    """The HTTP layers of a database (databases.py): async, and sync where
    it can be."""
    if not ceilings.record['http']:
        return
    framework, loop = (ceilings.record['http']['framework'],
                       ceilings.record['http']['loop'])
    name = database.name
    if framework_python(framework) is None:
        return ceilings.skip(name, 'http', '%s does not run here'
                             % framework, failed=True)
    variants = [('http-async', database.http_driver, False)]
    sync, why = database.sync_driver(framework)
    if sync:
        variants.append(('http-sync', sync, True))
    else:
        ceilings.skip(name, 'http-sync', why)
    for layer, driver, sync in variants:
        log = os.path.join(ceilings.logs,
                           'ceilings-%s-%s.log' % (name, layer))
        server = CallServer(framework, loop, driver, sync, free_port(),
                            log, ceilings.s.pin['server'], ceilings.address)
        ceilings.m.progress.show('ceilings · %s · %s · starting' % (
            name, layer))
        try:
            server.start(timeout=60)
        except RuntimeError as e:
            ceilings.skip(name, layer, 'did not start: %s' % e, failed=True)
            continue
        try:
            for call in CALLS:
                timed(ceilings, name, layer, server, call)
        finally:
            server.stop()


def timed(ceilings, database, layer, server, call):
    """One call's page loaded by wrk like an engine's, its counts taken
    from the server once nothing is left in flight."""
    s = ceilings.s
    label = 'ceilings · %s · %s · %s' % (database, layer, call)

    def load(seconds):
        # wrk's plain GET script, at this call's path
        argv, env = wrk.command(server.url, 'ugly', 'plain',
                                s.connections, seconds, s.threads,
                                s.timeout, s.pipeline, s.pin['wrk'])
        env['WRK_PATH'] = '/' + call
        return argv, wrk.run(argv, env, seconds)
    try:
        if s.warmup:
            ceilings.m.progress.show(label + ' · warmup')
            load(s.warmup)
        first = settled(server.url, call)
        before = ceilings.snapshot()
        ceilings.m.progress.show(label)
        stat, cpu = profile.stat(server.process.pid), ceilings.db_cpu()
        argv, run = load(s.duration)
        stat_after = profile.stat(server.process.pid)
        cpu = profile.cpu_delta(cpu, ceilings.db_cpu())
        last = settled(server.url, call)
        after = ceilings.snapshot()
        evidence = fetch(server.url + '/evidence/' + call)
    except (OSError, ValueError) as e:
        return ceilings.skip(database, layer, '%s: no counts: %s\n%s' % (
            call, e, tail(server.log_path)), failed=True)
    finally:
        ceilings.m.progress.advance(s.warmup + s.duration + 1)
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
    ceilings.add(record)

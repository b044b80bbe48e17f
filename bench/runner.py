"""The benchmark matrix: each engine started, verified, then timed page by
page, its /ugly runs taking turns with the runs of its framework's bare
hello world; nginx last as a reference. Everything lands in results.json."""
import json
import os
import subprocess
import time
from dataclasses import dataclass, field

from . import (disk, machine, memory, profile, pythons, references, remote,
               results_file, stats, verify, wrk)
from runtime import stalls
from runtime.databases import table
from runtime.processes import free_port
from runtime.settings import DEFAULTS as SITE
from .engine import AT_START, FORGET, EngineServer, tail, wait_until
from .guesses import (RUN_GUESS, START_GUESS, VERIFY_GUESS, VOTE_GUESS, combos,
                      offers_rates, series_guess, target_guess)
from .nginx import Nginx
from .progress import Progress
from .storage import DEFAULT as DEFAULT_STORAGES, label as variant_name, tagged
from .ceilings import run as ceilings
from .latency import budget, demand, fixed_rate, floor, mixed, oha
from .latency.noise import NOISE


def pinning_record(pin):
    """results.json's 'pinning': each taskset as a command line, or None,
    and what the server's covers."""
    databases = ' '.join(pin.get('databases') or ()) or None
    return {'server': ' '.join(pin['server']) or None,
            'wrk': ' '.join(pin['wrk']) or None,
            'databases': databases,
            'server_covers': ('server.py; the databases it starts run on '
                              "the load generator's core" if databases else
                              'server.py and the databases it starts')}


def pin_tree(pids, taskset):
    """Every thread of the processes pids and of their descendants
    (PostgreSQL's backends) on taskset's cores; new children inherit it.
    Returns the cores each process may run on then, as /proc says
    ({pid: '0'})."""
    cores = taskset[taskset.index('-c') + 1]
    found = {}
    for pid in pids:
        for p in memory.tree(pid):
            subprocess.run(['taskset', '-a', '-p', '-c', cores, str(p)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            found[p] = allowed(p)
    return found


def allowed(pid):
    """The cores a process may run on ('0', '0-1'), or None if gone."""
    try:
        with open('/proc/%d/status' % pid) as f:
            for line in f:
                if line.startswith('Cpus_allowed_list:'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        return None


@dataclass
class RunPlan:
    """What a run measures and how, from bench.py's options."""
    engines: list                       # engines.Engine that can run here
    skipped: list                       # (engine name, why it cannot run)
    pages: list
    modes: list
    out: str
    connections: int = 100
    duration: int = 10
    warmup: int = 2
    runs: int = 3
    threads: int = 1
    pipeline: int = 16
    timeout: int = 2
    port: int = SITE.port
    server_args: list = field(default_factory=list)
    server_env: dict = field(default_factory=dict)     # database addresses
    # --forget-visitors-in-given: engines on a database given by address
    # start with --forget-visitors too (its sessions and ballots removed)
    forget_given: bool = False
    # Tarantool's storage engines, each Tarantool engine served on each
    storages: list = field(default_factory=lambda: list(DEFAULT_STORAGES))
    replicas: int = 0       # each Tarantool/PostgreSQL engine also with N
    pin: dict = field(default_factory=lambda: {'server': [], 'wrk': [],
                                               'databases': []})
    profile: bool = False
    workers: int = 1                    # server.py --workers; nginx's too
    where: dict = field(default_factory=dict)   # name -> [pythons.Interpreter]
    pythons: list = field(default_factory=list)  # as given; [] = this one
    several: bool = False               # names carry '@3.12'
    ceilings: bool = False              # bench.ceilings, after the engines
    # --latency: fixed rates after each page's closed-loop runs
    latency: bool = False
    rates: list = None                  # requests/s; None: fractions of saturation
    fractions: tuple = (0.25, 0.5, 0.75, 0.9)
    fixed_pages: list = None            # pages offered fixed rates; None: all
    searches: dict = field(default_factory=dict)    # page -> searches; else runs
    point_duration: int = 10            # seconds per fixed-rate point
    confirm: int = 10                   # seconds confirming a capacity; 0: none
    core_hour_price: float = None       # for the cost per million requests
    dry_run: bool = False               # the plan printed, nothing run
    slo: dict = None                    # {'percentile': 'p99', 'ms': 10.0}
    oha: str = None                     # its path
    oha_version: str = None
    loadgen: str = None                 # its path, for the mix page
    remotes: list = field(default_factory=list)    # (label, url) of --target


def profile_mode(settings, page):
    """The mode of a page's profiled run: its first timed one."""
    return next(m for p, m in combos(settings, 'engine') if p == page)


def used_pythons(settings):
    """Versions of the interpreters the engines run on: those given, in
    their order, then the legacy one if some engine needs it."""
    given = [i.version for i in settings.pythons or [pythons.MAIN]]
    used = {i.version for where in settings.where.values() for i in where}
    return [v for v in given if v in used] + sorted(used - set(given))


def variants(settings, engine):
    """(storage engine, replicas) an engine is served with: each Tarantool
    storage engine (None for the others), each with no replica and, with
    --replicas N, with N (not Redis)."""
    db = table.of(engine)
    storages = db.storages(settings.storages)
    counts = [0, settings.replicas] if settings.replicas and db.replicas \
        else [0]
    return [(storage, n) for storage in storages for n in counts]


def given_databases(settings):
    """Names of the databases given to the bench by address."""
    return [db.name for db in table.TABLE
            if db.environment in settings.server_env]


def start_options(settings, engine):
    """server.py's options for an engine: without the visitors of the
    engines before (their sessions' sweep would run in its timed points),
    unless its database was given by address and --forget-visitors-in-given
    was not: that database's sessions and ballots are not the bench's to
    remove. Nor the databases' snapshots in the timed points."""
    given = table.of(engine).name in given_databases(settings)
    forget = [FORGET] if settings.forget_given or not given else []
    return forget + [AT_START] + list(settings.server_args)


def planned(settings):
    """The run's expected seconds, from bench/guesses.py."""
    total = sum(target_guess(settings, 'engine') * len(
        settings.where.get(e.name) or [None]) * len(variants(settings, e))
        for e in settings.engines)
    total += len(settings.remotes) * target_guess(settings, 'remote')
    if any(True for _ in combos(settings, 'nginx')):
        total += target_guess(settings, 'nginx')
    if settings.ceilings:
        total += ceilings.guess(settings)
    if settings.latency and settings.oha:
        total += 2 * floor.GUESS      # the machine's floor, before and after
    return total


class Matrix:
    def __init__(self, settings, stream=None):
        self.s = settings
        self.results = {
            'started': time.strftime('%Y-%m-%dT%H:%M:%S%z'),
            'settings': {
                'engines': [e.name for e in settings.engines],
                # Sites already running, not started by the bench (--target).
                'sites': [{'label': label, 'url': url}
                            for label, url in settings.remotes],
                'pages': settings.pages, 'modes': settings.modes,
                'connections': settings.connections,
                'duration': settings.duration, 'warmup': settings.warmup,
                'runs': settings.runs, 'wrk_threads': settings.threads,
                'pipeline': settings.pipeline, 'wrk_timeout': settings.timeout,
                'server_args': settings.server_args,
                # Given by address, and whether engines on them start
                # with --forget-visitors (--forget-visitors-in-given).
                'given_databases': given_databases(settings),
                'forget_visitors_in_given': settings.forget_given,
                'storages': settings.storages,
                'replicas': settings.replicas,
                'profile': settings.profile,
                # Processes per engine and for nginx; hello references: 1.
                'workers': settings.workers,
                # Each engine's interpreters: the run's (several: names
                # carry '@3.12'), or the legacy one where only it can.
                'pythons': used_pythons(settings),
                'several_pythons': settings.several,
                'latency': settings.latency and {
                    'generator': 'oha %s' % settings.oha_version,
                    'rates': settings.rates,
                    'fractions': None if settings.rates else list(settings.fractions),
                    # None: every page; else only these (the rest closed loop)
                    'pages': settings.fixed_pages,
                    # searches per page, where not 'runs'
                    'searches': settings.searches,
                    'slo': settings.slo, 'probes': budget.PROBES, 'again': True,
                    'duration': settings.point_duration,
                    'confirm': settings.confirm,
                    'latency_correction': True,
                    # Each point's command, but for its URL and rate.
                    'command': settings.oha and oha.placeholder(oha.command(
                        settings.oha, '{url}', 0, settings.point_duration,
                        settings.connections, settings.timeout,
                        settings.pin['wrk']), '-q', '{rate}'),
                    'headroom': oha.HEADROOM, 'noise': NOISE,
                    'mix': mixed.PAGE in settings.pages and {
                        'generator': 'loadgen %s' % mixed.VERSION,
                        'vote': mixed.VOTE, 'requests_per_visit': mixed.VISIT,
                        'command': oha.placeholder(mixed.command(
                            settings.loadgen, '{url}', 0,
                            settings.point_duration, settings.connections,
                            settings.timeout, settings.pin['wrk']),
                            '--rate', '{visitors}')}},
            },
            'pinning': pinning_record(settings.pin),
            'targets': [], 'runs': [], 'profiles': [],
            'latency': [], 'capacity': [],
        }
        self.databases = {}     # target name -> (pid, name) or None
        self.watches = {}       # target name -> memory.Watch
        self.results.update(machine.describe())
        # where the local databases write: advise holds a site's writes to it
        self.results['machine']['disk'] = disk.write_rate(SITE.var)
        self.hellos = {}    # hello reference name -> its target record
        self.last_votes = None  # (name, vote total) after a mix's last point
        self.python_of = {}     # target name -> its interpreter's version
        self.stalls_of = {}     # target name -> its stall record's file
        self.logs_of = {}       # target name -> its local databases' logs
        self.storage_of = {}    # target name -> its Tarantool storage engine
        self.replicas_of = {}   # target name -> its read replicas, if any
        self.progress = Progress(planned(settings), stream)
        self.about = None
        os.makedirs(os.path.join(settings.out, 'logs'), exist_ok=True)

    def save(self):
        results_file.save(self.s.out, record_lines(self.results))

    def run(self):
        for name, why in self.s.skipped:
            self.results['targets'].append({'name': name, 'kind': 'engine',
                                            'status': 'skipped', 'reason': why})
            self.progress.note('%s: skipped (%s)' % (name, why))
        self.floor('before')
        for engine in self.s.engines:
            self.engine(engine)
            self.save()
        for label, url in self.s.remotes:
            remote.run(self, label, url)
            self.save()
        if any(True for _ in combos(self.s, 'nginx')):
            self.nginx()
        if self.s.ceilings:
            ceilings.run(self)
        self.floor('after')
        self.results['finished'] = time.strftime('%Y-%m-%dT%H:%M:%S%z')
        if self.s.latency:      # per engine and page, what advise sizes from
            self.results['demand'] = demand.summary(self.results)
        self.save()
        self.progress.close()
        return self.results

    def floor(self, when):
        """The machine's latency floor (latency/floor.py), said as taken."""
        if not (self.s.latency and self.s.oha):
            return
        taken = floor.measure(self, when)
        self.results.setdefault('floor', []).append(taken)
        for line in floor.lines([taken], self.s.slo):
            self.progress.note(line)
        self.save()

    def target(self, name, kind):
        t = {'name': name, 'kind': kind, 'status': 'ok', 'reason': None}
        self.results['targets'].append(t)
        return t

    def fail(self, t, reason, guess_left):
        t.update(status='failed', reason=reason)
        self.progress.note('%s: FAILED: %s' % (t['name'], reason.splitlines()[0]))
        self.progress.drop(guess_left)

    def variants(self, engine):
        return variants(self.s, engine)

    def engine(self, engine):
        """Start the engine once per interpreter (and per Tarantool storage
        engine), verify each, then time its pages with the runs on
        different interpreters taking turns; the first one started manages
        the databases the others use."""
        crew = []       # (target, server, interpreter), started and verified
        refs = {}       # engine target name -> its hello, for the ugly runs
        plan = list(combos(self.s, 'engine'))
        ugly = [m for p, m in plan if p == 'ugly']
        try:
            first = True
            for python in self.s.where.get(engine.name) or [pythons.MAIN]:
                for storage, replicas in self.variants(engine):
                    member = self.start_engine(engine, python, first, storage,
                                               replicas)
                    first = False
                    if member:
                        crew.append(member)
            for step, (page, mode) in enumerate(plan):
                if not crew:
                    return
                if page == 'ugly' and mode == ugly[0]:
                    hellos = {}     # one per interpreter
                    for t, _, python in crew:
                        if python not in hellos:
                            hellos[python] = self.hello(
                                engine.framework, engine.loop, python)
                        refs[t['name']] = hellos[python]
                turn = []
                for t, server, _ in crew:
                    turn.append((t['name'], server, None))
                    ref = refs.get(t['name']) if page == 'ugly' else None
                    if ref:
                        turn.append((ref.name, ref, t['name']))
                dead = self.turns(turn, page, mode)
                self.after_runs(turn, dead)
                if page == 'ugly' and mode == ugly[-1]:
                    for ref in set(refs.values()):
                        if ref:
                            ref.stop()      # idle, but some poll
                    refs = {}
                if (self.s.profile and page != mixed.PAGE
                        and mode == profile_mode(self.s, page)):
                    for t, server, _ in crew:
                        if server.alive():
                            self.profiled(t['name'], server, page, mode,
                                          self.database_of(t['name'], server) or ())
                for member in list(crew):
                    t, server, _ = member
                    if t['name'] in dead or not server.alive():
                        crew.remove(member)
                        server.stop()
                        self.fail(t, 'server.py died during %s %s:\n%s' % (
                            page, mode, tail(server.log_path)),
                            sum(series_guess(self.s, p) for p, _ in plan[step + 1:]))
            self.memory_lines([t['name'] for t, _, _ in crew] + list(self.hellos))
        finally:
            for ref in set(refs.values()):
                if ref:
                    ref.stop()
            for _, server, _ in reversed(crew):
                server.stop()

    def start_engine(self, engine, python, first, storage=None, replicas=0):
        """(target, server, interpreter) of one interpreter's server.py
        (with its Tarantool on the storage engine `storage`, with `replicas`
        read replicas), started and verified, or None (its target says
        why)."""
        name = pythons.label(variant_name(engine.name, storage,
                                          self.s.storages, replicas),
                             python, self.s.several)
        t = self.target(name, 'engine')
        t['python'] = self.python_of[name] = python.version
        args = start_options(self.s, engine)
        if storage:
            t['storage'] = self.storage_of[name] = storage
            if tagged(self.s.storages):
                args += ['--tarantool-engine', storage]
        if replicas:
            t['replicas'] = self.replicas_of[name] = replicas
            args += ['--replicas', str(replicas)]
        log = self.log(t)
        port = self.s.port if first else free_port()
        env = dict(self.s.server_env)
        if self.s.latency:      # its loop's stalls, for the timed points
            env[stalls.ENVIRONMENT] = self.stalls_of[name] = os.path.join(
                self.s.out, 'stalls', name + '.jsonl')
            os.makedirs(os.path.dirname(env[stalls.ENVIRONMENT]), exist_ok=True)
        server = EngineServer(engine.name, port, args, log,
                              self.s.pin['server'], env,
                              python=python.python, label=name)
        t['command'] = server.argv
        left = target_guess(self.s, 'engine')
        if not self.started(t, server, left, frozen=True):
            return None
        self.progress.advance(START_GUESS)
        try:    # not yet in the crew that engine() stops
            self.progress.show('%s · verifying' % name)
            t['verification'] = verify.engine(server.url)
            self.progress.advance(VERIFY_GUESS)
            why = verify.failure(t['verification'])
            if why:
                server.stop()
                self.fail(t, 'verification failed: ' + why,
                          left - START_GUESS - VERIFY_GUESS)
                return None
            if self.about is None and 'about' in self.s.pages:
                self.about = verify.page(server.url, '/about')
                t['about_copied'] = True
            self.progress.show('%s · second start, memory' % name)
            self.measure(t, server, memory.second_start(
                engine, server, log[:-len('.log')] + '-second-start.log'),
                memory.database_pids(engine, server, storage, replicas))
            self.logs_of[name] = [m.log_file for m in memory.managed_databases(
                engine, server, storage, replicas) or ()]
            if self.s.pin.get('databases'):
                # where they run from now on, as /proc says
                t['databases_on'] = sorted(set(pin_tree(
                    memory.database_pids(engine, server, storage, replicas)
                    or (), self.s.pin['databases']).values()) - {None})
        except BaseException:
            server.stop()
            raise
        return t, server, python

    def log(self, t):
        """The log file of a target's server, noted in its record."""
        log = os.path.join(self.s.out, 'logs', t['name'] + '.log')
        t['log'] = os.path.relpath(log, self.s.out)
        return log

    def started(self, t, server, left, **options):
        """Start a target's server; False, with the target failed, if it
        does not start."""
        self.progress.show('%s · starting' % t['name'])
        try:
            server.start(**options)
        except RuntimeError as e:
            self.fail(t, 'did not start: %s' % e, left)
            return False
        return True

    def hello(self, framework, loop, python):
        """Start the bare hello world of a framework and loop on an
        interpreter for an engine's ugly runs: the running server, or None
        (its target says why). Its target is recorded once, with the
        verification of its first start."""
        name = pythons.label(references.name(framework, loop), python,
                             self.s.several)
        t = self.hellos.get(name)
        if t is None:
            t = self.hellos[name] = self.target(name, 'hello')
            t['python'] = self.python_of[name] = python.version
        elif t['status'] != 'ok':
            self.progress.drop(target_guess(self.s, 'hello'))
            return None
        log = os.path.join(self.s.out, 'logs', name + '.log')
        t['log'] = os.path.relpath(log, self.s.out)
        server = references.HelloServer(framework, loop, free_port(), log,
                                        self.s.pin['server'], python.python, name)
        t['command'] = server.argv
        left = target_guess(self.s, 'hello')
        began = time.monotonic()
        if not self.started(t, server, left, timeout=60, ready=lambda: (
                memory.answered(server.url + '/ugly'))):
            return None
        start_s = round(time.monotonic() - began, 3)
        verification = verify.hello(server.url)
        t.setdefault('verification', verification)
        self.progress.advance(START_GUESS + VERIFY_GUESS)
        why = verify.failure(verification)
        if why:
            server.stop()
            self.fail(t, 'verification failed: ' + why,
                      left - START_GUESS - VERIFY_GUESS)
            return None
        if name in self.watches:    # measured at its first start
            self.watches[name].pid = server.process.pid
        else:
            self.measure(t, server, start_s)
        return server

    def idle_count(self):
        """Idle connections to open: memory.IDLE, within half the
        servers' --max-connections."""
        args = self.s.server_args
        cap = (int(args[args.index('--max-connections') + 1])
               if '--max-connections' in args else SITE.max_connections)
        return min(memory.IDLE, max(cap // 2, 1))

    def measure(self, t, server, start_s, databases=None):
        """t's start_s and memory at rest, its Watch kept for the peaks."""
        t['start_s'] = start_s
        watch = self.watches[t['name']] = memory.Watch(
            t, server.process.pid, databases)
        watch.at_rest(server.port, self.idle_count())

    def after_runs(self, members, dead=()):
        """The peaks, once a page's timed runs are over."""
        for name, server, _ in members:
            if name in self.watches and name not in dead and server.alive():
                self.watches[name].after_runs()

    def memory_lines(self, names):
        """One progress line per target's figures, once."""
        for name in names:
            watch = self.watches.get(name)
            if watch and not getattr(watch, 'shown', False):
                watch.shown = True
                t = next(t for t in self.results['targets'] if t['name'] == name)
                self.progress.note(memory.line(name, t['start_s'], watch.m))

    def database_of(self, name, server):
        """(pid, name) of the database an engine's server talks to, found
        once; None for the references."""
        if name not in self.databases:
            kind = next(t['kind'] for t in self.results['targets']
                        if t['name'] == name)
            self.databases[name] = (self.database(server)
                                    if kind == 'engine' else None)
        return self.databases[name]

    def database(self, server):
        """[(pid, name)] of the database processes the engine talks to (the
        primary, then the replicas), or None; with --workers, those a worker
        talks to."""
        def load():
            return subprocess.Popen(
                self.s.pin['wrk'] + ['wrk', '-c16', '-t1', '-d5s',
                                     server.url + '/good'],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pid = server.process.pid
        found = profile.find_database(pid, server.port, load)
        for child in ([] if found else profile.children(pid)):
            found = profile.find_database(child, server.port, load)
            if found:
                break
        return found

    def profiled(self, name, server, page, mode, database):
        """One extra run under py-spy; its req/s are not reported."""
        self.progress.show('%s · %s · %s · profiled run' % (name, page, mode))
        directory = os.path.join(self.s.out, 'profiles')
        os.makedirs(directory, exist_ok=True)
        out = os.path.join(directory, '%s-%s-%s.txt' % (name, page, mode))
        pid = server.process.pid
        spy = profile.sampler(pid, self.s.duration + 1, out, self.s.pin['wrk'])
        time.sleep(0.5)     # py-spy attaches
        before = profile.stat(pid)
        db_before = [profile.database_cpu(d[0]) for d in database or []]
        record = self.wrk(server.url, page, mode, self.s.duration)
        after = profile.stat(pid)
        db_after = [profile.database_cpu(d[0]) for d in database or []]
        try:
            spy.wait(self.s.duration + 30)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait()
        try:
            with open(out) as f:
                samples = profile.fold(f.read())
        except OSError:
            samples = dict.fromkeys(profile.PYTHON_LAYERS, 0)
        requests = (record.get('wrk') or {}).get('requests') or 0
        said = '\n'.join(x for x in tail(out + '.log').splitlines()
                          if x.strip() and 'flamegraph.pl' not in x)
        # /proc counts in clock ticks: round away the float noise.
        utime = round(after[1] - before[1], 3) if before and after else 0.0
        stime = round(after[2] - before[2], 3) if before and after else 0.0
        each = [round(profile.cpu_delta(b, a), 3)
                for b, a in zip(db_before, db_after)]
        db = round(sum(each), 3) if database else None
        p = {'target': name, 'page': page, 'mode': mode, 'requests': requests,
             'wrk': record.get('wrk'), 'samples': samples,
             'py_spy': {'exit_code': spy.returncode, 'rate': profile.RATE,
                        'log': said},
             'server_cpu': {'pid': pid, 'user_s': utime, 'system_s': stime},
             # The primary's and, with replicas, each replica's.
             'database_cpu': {'pid': database[0][0],
                              'process': database[0][1], 'seconds': db,
                              'each': [{'pid': d[0], 'process': d[1],
                                        'seconds': s}
                                       for d, s in zip(database, each)]}
             if database else None,
             'us_per_request': profile.split(samples, utime, stime, db, requests)}
        self.results['profiles'].append(p)
        self.progress.advance(self.s.duration + 1.5)

    def nginx(self):
        t = self.target('nginx', 'nginx')
        about = self.about if 'about' in self.s.pages else None
        if 'about' in self.s.pages and about is None:
            t['note'] = 'no engine verified, so there is no /about to copy'
        server = Nginx(os.path.join(self.s.out, 'nginx'), free_port(), about,
                       self.s.pin['server'], self.s.workers)
        left = target_guess(self.s, 'nginx')
        try:
            self.progress.show('nginx · starting')
            try:
                start_s = memory.timed_start(
                    lambda ready: (server.start(), wait_until(ready, 20)),
                    server.url + '/ugly')
            except (RuntimeError, TimeoutError) as e:
                return self.fail(t, str(e), left)
            t['command'] = server.argv
            t['verification'] = verify.nginx(server.url, about)
            self.progress.advance(START_GUESS + VERIFY_GUESS)
            left -= START_GUESS + VERIFY_GUESS
            why = verify.failure(t['verification'])
            if why:
                return self.fail(t, 'verification failed: ' + why, left)
            self.measure(t, server, start_s)
            for page, mode in combos(self.s, 'nginx'):
                if page == 'about' and about is None:
                    self.progress.drop(series_guess(self.s, page))
                    continue
                left -= series_guess(self.s, page)
                if self.turns([('nginx', server, None)], page, mode):
                    return self.fail(t, 'nginx died during %s %s' % (page, mode), left)
                self.after_runs([('nginx', server, None)])
            self.memory_lines(['nginx'])
        finally:
            server.stop()

    def wrk(self, url, page, mode, duration):
        argv, env = wrk.command(url, page, mode, self.s.connections, duration,
                                self.s.threads, self.s.timeout, self.s.pipeline,
                                self.s.pin['wrk'])
        return wrk.run(argv, env, duration)

    def turns(self, members, page, mode):
        """Warm up, then time every member (name, server, the engine a
        reference is paired with or None) run by run, taking turns, so that
        all see the same minutes of a machine whose speed drifts. The names
        of members that died; a dead one sits out the rest."""
        if page == mixed.PAGE:  # fixed rates only: wrk cannot carry a ballot
            return fixed_rate.turns(self, members, page, mode)
        label = '%s · %s · %s' % (members[0][0], page, mode)
        for name, server, pair in members:
            self.warmup(label, name, server.url, page, mode, pair=pair)
        dead = set()
        for run in range(1, self.s.runs + 1):
            for name, server, pair in members:
                if name in dead or (pair and pair in dead):
                    continue
                if not server.alive():
                    dead.add(name)
                    continue
                self.progress.show('%s · %s · %s · run %d/%d' % (
                    name, page, mode, run, self.s.runs))
                self.timed(name, server.url, page, mode, run, pair=pair,
                           guess=self.s.duration + RUN_GUESS if pair else None)
        dead |= {name for name, server, _ in members if not server.alive()}
        if offers_rates(self.s, page) and mode == 'plain':
            # the engines' capacities; a bare hello is a closed-loop reference
            dead |= fixed_rate.turns(
                self, [m for m in members if m[0] not in dead and not m[2]],
                page, mode)
        return dead

    def tag_record(self, record, name, page, mode, run, pair):
        """What a wrk record is of: run 0 is the warmup."""
        record.update(target=name, page=page, mode=mode, run=run,
                      warmup=run == 0, python=self.python_of.get(name))
        if name in self.storage_of:
            record['storage'] = self.storage_of[name]
        if name in self.replicas_of:
            record['replicas'] = self.replicas_of[name]
        if pair:
            record['pair'] = pair

    def warmup(self, label, name, url, page, mode, pair=None):
        if not self.s.warmup:
            return
        self.progress.show(label + ' · warmup')
        record = self.wrk(url, page, mode, self.s.warmup)
        self.tag_record(record, name, page, mode, 0, pair)
        self.results['runs'].append(record)
        self.progress.advance(self.s.warmup)

    def timed(self, name, url, page, mode, run, pair=None, guess=None):
        # The POSTs the previous run left may still be committing (a pool
        # engine's queue): the totals are read once they stop moving.
        before = self.settled_votes(url) if page == 'vote' else None
        record = self.wrk(url, page, mode, self.s.duration)
        self.tag_record(record, name, page, mode, run, pair)
        if page == 'vote':
            record['vote_check'] = stats.vote_check(
                before, self.settled_votes(url), record.get('wrk'))
        record['problems'] = stats.problems(record)
        self.results['runs'].append(record)
        self.progress.advance(guess if guess is not None else (
            self.s.duration + RUN_GUESS + (VOTE_GUESS if page == 'vote' else 0)))

    def settled_votes(self, url, pause=0.5, patience=10):
        """The vote total once two reads `pause` s apart agree (longer
        than a Redis Cluster server's apply interval, 0.25 s)."""
        last = self.votes(url)
        for _ in range(patience):
            time.sleep(pause)
            now = self.votes(url)
            if now == last:
                return now
            last = now
        return last

    def votes(self, url):
        try:
            return verify.votes(url)
        except Exception:  # reported as an unknown total by vote_check
            return None


def record_lines(results):
    """results.json's text: a line per record of each list, so that the
    file stays small and a diff shows whole records."""
    parts = []
    for key, value in results.items():
        if isinstance(value, list):
            body = ',\n'.join(json.dumps(v, separators=(',', ':'))
                               for v in value)
            text = '[\n%s\n]' % body if value else '[]'
        else:
            text = json.dumps(value, indent=1)
        parts.append('%s: %s' % (json.dumps(key), text))
    return '{\n' + ',\n'.join(parts) + '\n}\n'

"""The benchmark matrix: each engine started, verified, then timed page by
page, its /ugly runs taking turns with the runs of its framework's bare
hello world; nginx last as a reference. Everything lands in results.json."""
import json
import os
import subprocess
import time
from dataclasses import dataclass, field

from . import references, machine, profile, stats, verify, wrk
from runtime.processes import free_port
from runtime.settings import DEFAULTS as SITE
from .engine import EngineServer, tail
from .nginx import NGINX_PAGES, Nginx
from .progress import Progress

# Rough seconds, only for the time left on the progress bar.
START_GUESS, VERIFY_GUESS, RUN_GUESS, VOTE_GUESS = 6.0, 3.0, 0.3, 1.5


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
    pin: dict = field(default_factory=lambda: {'server': [], 'wrk': []})
    profile: bool = False
    workers: int = 1                    # server.py --workers; nginx's too


class TargetDied(RuntimeError):
    pass


def combos(settings, kind):
    for page in settings.pages:
        if kind == 'nginx' and page not in NGINX_PAGES:
            continue
        if kind == 'hello' and page != 'ugly':
            continue
        for mode in settings.modes:
            if not (mode == 'pipelined' and page in wrk.PLAIN_ONLY):
                yield page, mode


def series_guess(settings, page):
    runs = settings.runs * (settings.duration + RUN_GUESS)
    if page == 'vote':
        runs += settings.runs * VOTE_GUESS
    return settings.warmup + runs


def profile_mode(settings, page):
    """The mode of a page's profiled run: its first timed one."""
    return next(m for p, m in combos(settings, 'engine') if p == page)


def target_guess(settings, kind):
    guess = START_GUESS + VERIFY_GUESS + sum(
        series_guess(settings, page) for page, _ in combos(settings, kind))
    if kind == 'engine' and settings.profile:
        guess += len(settings.pages) * (settings.duration + 1.5)
    if kind == 'engine' and 'ugly' in settings.pages:
        # its hello reference, started for the ugly runs
        guess += target_guess(settings, 'hello')
    return guess


class Matrix:
    def __init__(self, settings, stream=None):
        self.s = settings
        self.results = {
            'started': time.strftime('%Y-%m-%dT%H:%M:%S%z'),
            'settings': {
                'engines': [e.name for e in settings.engines],
                'pages': settings.pages, 'modes': settings.modes,
                'connections': settings.connections,
                'duration': settings.duration, 'warmup': settings.warmup,
                'runs': settings.runs, 'wrk_threads': settings.threads,
                'pipeline': settings.pipeline, 'wrk_timeout': settings.timeout,
                'server_args': settings.server_args,
                'profile': settings.profile,
                # Processes per engine and for nginx; hello references: 1.
                'workers': settings.workers,
            },
            'pinning': {'server': ' '.join(settings.pin['server']) or None,
                        'wrk': ' '.join(settings.pin['wrk']) or None,
                        'server_covers': 'server.py and the databases it starts'},
            'targets': [], 'runs': [], 'profiles': [],
        }
        self.results.update(machine.describe())
        self.hellos = {}    # hello reference name -> its target record
        planned = sum(target_guess(settings, 'engine') for _ in settings.engines)
        if any(True for _ in combos(settings, 'nginx')):
            planned += target_guess(settings, 'nginx')
        self.progress = Progress(planned, stream)
        self.about = None
        os.makedirs(os.path.join(settings.out, 'logs'), exist_ok=True)

    def save(self):
        path = os.path.join(self.s.out, 'results.json')
        with open(path + '.tmp', 'w') as f:
            json.dump(self.results, f, indent=1)
        os.replace(path + '.tmp', path)

    def run(self):
        for name, why in self.s.skipped:
            self.results['targets'].append({'name': name, 'kind': 'engine',
                                            'status': 'skipped', 'reason': why})
            self.progress.note('%s: skipped (%s)' % (name, why))
        for engine in self.s.engines:
            self.engine(engine)
            self.save()
        if any(True for _ in combos(self.s, 'nginx')):
            self.nginx()
        self.results['finished'] = time.strftime('%Y-%m-%dT%H:%M:%S%z')
        self.save()
        self.progress.close()
        return self.results

    def target(self, name, kind):
        t = {'name': name, 'kind': kind, 'status': 'ok', 'reason': None}
        self.results['targets'].append(t)
        return t

    def fail(self, t, reason, guess_left):
        t.update(status='failed', reason=reason)
        self.progress.note('%s: FAILED: %s' % (t['name'], reason.splitlines()[0]))
        self.progress.drop(guess_left)

    def engine(self, engine):
        name = engine.name
        t = self.target(name, 'engine')
        log = self.log(t)
        server = EngineServer(name, self.s.port, self.s.server_args, log,
                              self.s.pin['server'], self.s.server_env)
        t['command'] = server.argv
        left = target_guess(self.s, 'engine')
        ref = None      # the hello reference, running for the ugly runs
        try:
            if not self.started(t, server, left):
                return
            self.progress.advance(START_GUESS)
            left -= START_GUESS
            self.progress.show('%s · verifying' % name)
            t['verification'] = verify.engine(server.url)
            self.progress.advance(VERIFY_GUESS)
            left -= VERIFY_GUESS
            why = verify.failure(t['verification'])
            if why:
                return self.fail(t, 'verification failed: ' + why, left)
            if self.about is None and 'about' in self.s.pages:
                self.about = verify.page(server.url, '/about')
                t['about_copied'] = True
            database = None
            ugly = [m for p, m in combos(self.s, 'engine') if p == 'ugly']
            for page, mode in combos(self.s, 'engine'):
                try:
                    if page == 'ugly' and mode == ugly[0]:
                        ref = self.hello(engine.framework, engine.loop)
                        left -= target_guess(self.s, 'hello')
                    if page == 'ugly' and ref is not None:
                        self.paired_series(name, server, ref, page, mode)
                        if mode == ugly[-1]:
                            ref.stop()      # idle, but some poll
                            ref = None
                    else:
                        self.series(name, server.url, page, mode, server.alive)
                    if self.s.profile and mode == profile_mode(self.s, page):
                        if database is None:
                            database = self.database(server) or ()
                        self.profiled(name, server, page, mode, database)
                        if not server.alive():
                            raise TargetDied()
                except TargetDied:
                    return self.fail(t, 'server.py died during %s %s:\n%s' % (
                        page, mode, tail(log)), left)
                left -= series_guess(self.s, page)
        finally:
            server.stop()
            if ref is not None:
                ref.stop()

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

    def hello(self, framework, loop):
        """Start the bare hello world of a framework and loop for an engine's
        ugly runs: the running server, or None (its target says why). Its
        target is recorded once, with the verification of its first start."""
        name = references.name(framework, loop)
        t = self.hellos.get(name)
        if t is None:
            t = self.hellos[name] = self.target(name, 'hello')
        elif t['status'] != 'ok':
            self.progress.drop(target_guess(self.s, 'hello'))
            return None
        log = os.path.join(self.s.out, 'logs', name + '.log')
        t['log'] = os.path.relpath(log, self.s.out)
        server = references.HelloServer(framework, loop, free_port(), log,
                                   self.s.pin['server'])
        t['command'] = server.argv
        left = target_guess(self.s, 'hello')
        if not self.started(t, server, left, timeout=60):
            return None
        verification = verify.hello(server.url)
        t.setdefault('verification', verification)
        self.progress.advance(START_GUESS + VERIFY_GUESS)
        why = verify.failure(verification)
        if why:
            server.stop()
            self.fail(t, 'verification failed: ' + why,
                      left - START_GUESS - VERIFY_GUESS)
            return None
        return server

    def database(self, server):
        """(pid, name) of the database process the engine talks to, or None."""
        def load():
            return subprocess.Popen(
                self.s.pin['wrk'] + ['wrk', '-c4', '-t1', '-d5s',
                                     server.url + '/good'],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return profile.find_database(server.process.pid, self.s.port, load)

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
        db_before = profile.database_cpu(database[0]) if database else {}
        record = self.wrk(server.url, page, mode, self.s.duration)
        after = profile.stat(pid)
        db_after = profile.database_cpu(database[0]) if database else {}
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
        db = round(profile.cpu_delta(db_before, db_after), 3) if database else None
        p = {'target': name, 'page': page, 'mode': mode, 'requests': requests,
             'wrk': record.get('wrk'), 'samples': samples,
             'py_spy': {'exit_code': spy.returncode, 'rate': profile.RATE,
                        'log': said},
             'server_cpu': {'pid': pid, 'user_s': utime, 'system_s': stime},
             'database_cpu': {'pid': database[0], 'process': database[1],
                              'seconds': db} if database else None,
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
                server.start()
            except RuntimeError as e:
                return self.fail(t, str(e), left)
            t['command'] = server.argv
            t['verification'] = verify.nginx(server.url, about)
            self.progress.advance(START_GUESS + VERIFY_GUESS)
            left -= START_GUESS + VERIFY_GUESS
            why = verify.failure(t['verification'])
            if why:
                return self.fail(t, 'verification failed: ' + why, left)
            for page, mode in combos(self.s, 'nginx'):
                if page == 'about' and about is None:
                    self.progress.drop(series_guess(self.s, page))
                    continue
                try:
                    self.series('nginx', server.url, page, mode, server.alive)
                except TargetDied:
                    return self.fail(t, 'nginx died during %s %s' % (page, mode), left)
                left -= series_guess(self.s, page)
        finally:
            server.stop()

    def wrk(self, url, page, mode, duration):
        argv, env = wrk.command(url, page, mode, self.s.connections, duration,
                                self.s.threads, self.s.timeout, self.s.pipeline,
                                self.s.pin['wrk'])
        return wrk.run(argv, env, duration)

    def series(self, name, url, page, mode, alive):
        label = '%s · %s · %s' % (name, page, mode)
        self.warmup(label, name, url, page, mode)
        for run in range(1, self.s.runs + 1):
            if not alive():
                raise TargetDied()
            self.progress.show('%s · run %d/%d' % (label, run, self.s.runs))
            self.timed(name, url, page, mode, run)
        if not alive():
            raise TargetDied()

    def paired_series(self, name, server, ref, page, mode):
        """The engine's runs taking turns with its hello reference's, so that
        both see the same minutes of a machine whose speed drifts; the
        reference's runs name the engine they were paired with."""
        label = '%s · %s · %s' % (name, page, mode)
        self.warmup(label, name, server.url, page, mode)
        self.warmup(label, ref.name, ref.url, page, mode, pair=name)
        for run in range(1, self.s.runs + 1):
            if not server.alive():
                raise TargetDied()
            self.progress.show('%s · run %d/%d, with %s' % (
                label, run, self.s.runs, ref.name))
            self.timed(name, server.url, page, mode, run)
            if ref.alive():
                self.timed(ref.name, ref.url, page, mode, run, pair=name,
                           guess=self.s.duration + RUN_GUESS)
        if not server.alive():
            raise TargetDied()

    def warmup(self, label, name, url, page, mode, pair=None):
        if not self.s.warmup:
            return
        self.progress.show(label + ' · warmup')
        record = self.wrk(url, page, mode, self.s.warmup)
        record.update(target=name, page=page, mode=mode, run=0, warmup=True)
        if pair:
            record['pair'] = pair
        self.results['runs'].append(record)
        self.progress.advance(self.s.warmup)

    def timed(self, name, url, page, mode, run, pair=None, guess=None):
        before = self.votes(url) if page == 'vote' else None
        record = self.wrk(url, page, mode, self.s.duration)
        record.update(target=name, page=page, mode=mode, run=run, warmup=False)
        if pair:
            record['pair'] = pair
        if page == 'vote':
            time.sleep(0.5)  # let the server finish the POSTs wrk left
            record['vote_check'] = stats.vote_check(
                before, self.votes(url), record.get('wrk'))
        record['problems'] = stats.problems(record)
        self.results['runs'].append(record)
        self.progress.advance(guess if guess is not None else (
            self.s.duration + RUN_GUESS + (VOTE_GUESS if page == 'vote' else 0)))

    def votes(self, url):
        try:
            return verify.votes(url)
        except Exception:  # reported as an unknown total by vote_check
            return None

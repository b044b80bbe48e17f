"""The fixed-rate part of a latency run: after a page's closed-loop runs
(its saturation rate), each member is offered fixed rates with oha, the
members taking turns run by run, then the highest rate within the budget is
searched for. Each point records the CPU per request of the server and of
its database at that rate, and the database's split by tier (demand()). The mixed workload (mixed.py) runs the same
way with loadgen; its saturation is loadgen's closed-loop rate and each of
its points is checked against the site's vote total; each point also
records the serving loop's stalls (runtime/stalls.py)."""
import statistics
import time

from runtime import engines, stalls
from .. import memory, profile, storage
from ..guesses import (POINT_GUESS, RUN_GUESS, point_guess, search_guess,
                       searches)
from ..wrk import path
from . import background, budget, mixed, oha, steady

CPU = ('server', 'database')


def saturation(matrix, name, page, mode):
    """Median requests/s of a member's closed-loop runs of this page."""
    rps = [r['wrk']['requests_per_sec'] for r in matrix.results['runs']
           if r['target'] == name and r['page'] == page and r['mode'] == mode
           and not r.get('warmup') and r.get('wrk')]
    return statistics.median(rps) if rps else None


def rates_of(settings, top):
    """[(label, rate)] of the steps: given rates, else fractions of top."""
    if settings.rates:
        return [('%g/s' % r, float(r)) for r in settings.rates]
    return [('%d%%' % round(f * 100), f * top) for f in settings.fractions]


def closed_rate(matrix, name, server):
    """The mix's saturation: requests/s of loadgen's visitors back to back,
    one per connection (recorded under 'saturation' in results.json)."""
    s = matrix.s
    matrix.progress.show('%s · %s · closed loop' % (name, mixed.PAGE))
    argv = mixed.command(s.loadgen, server.url, 0, s.duration, s.connections,
                         s.timeout, s.pin['wrk'], closed=s.connections)
    record = mixed.run(argv, s.duration, None)
    matrix.progress.advance(s.duration + RUN_GUESS)
    record.update(target=name, page=mixed.PAGE)
    matrix.results.setdefault('saturation', []).append(record)
    return (record.get('oha') or {}).get('achieved')


def tree_cpu(pid, skip=()):
    """CPU seconds of a process (every thread) and its live descendants,
    leaving out the subtrees of the pids in skip."""
    s = profile.stat(pid)
    if s is None:
        return 0.0
    return s[1] + s[2] + sum(tree_cpu(c, skip) for c in profile.children(pid)
                             if c not in skip)


class Member:
    """One server of a turn and where its CPU is read."""

    def __init__(self, matrix, name, server, pair, page, mode):
        self.name, self.server, self.pair = name, server, pair
        self.top = (closed_rate(matrix, name, server) if page == mixed.PAGE
                    else saturation(matrix, name, page, mode))
        self.database = matrix.database_of(name, server)
        engine = engines.BY_NAME.get(storage.untag(name).partition('@')[0])
        # a Redis Cluster's nodes by role ({'ROLE PORT': pid})
        self.nodes = (memory.cluster_nodes(engine, server)
                      if engine and self.database else None)
        self.host = {}      # {rate: [ran slow, for each try]} of a search
        self.credit = 0.0   # seconds of its search's plan not yet counted

    def cpu(self):
        if self.server.process is None:     # a --target site: not ours to read
            return None, {}
        dbs = [pid for pid, _ in self.database or ()]
        cpu = {}
        for pid in dbs:     # the primary's and its replicas'
            cpu.update(profile.database_cpu(pid))
        return tree_cpu(self.server.process.pid, skip=tuple(dbs)), cpu

    def tiers(self):
        """The database's demand so far by tier: the primary's serial
        thread and the rest of it (profile.database_demand), and the CPU
        of its read replicas; None for a --target site or no database."""
        if self.server.process is None or not self.database:
            return None
        (primary, _), replicas = self.database[0], self.database[1:]
        found = profile.database_demand(primary)
        found['replicas'] = sum(sum(profile.database_cpu(pid).values())
                                for pid, _ in replicas)
        # each process's serial thread (a cluster's nodes, by role)
        found['nodes'] = {str(primary): found['serial']}
        found['nodes'].update((str(pid), profile.database_demand(pid)['serial'])
                              for pid, _ in replicas)
        if self.nodes:
            found['nodes'] = {k: profile.database_demand(pid)['serial']
                              for k, pid in self.nodes.items()}
        return found


def nodes_us(nodes, per):
    """Each node's serial µs per request: by role for a cluster's nodes
    ('ROLE PORT'), else a list."""
    if any(' ' in k for k in nodes):
        return {k: per(v) for k, v in nodes.items()}
    return [per(v) for v in nodes.values()]


def demand(server, before, after, answered, seconds):
    """Per request, at one point: the server's CPU µs, the database's split
    into its serial thread's and the rest (and its replicas'), the bytes it
    wrote to storage (a proxy for the WAL flush or fsync a vote waits for,
    which shows as no CPU); and each tier's share of a core."""
    if not answered or server is None:
        return None
    delta = profile.demand_delta(before, after) if before and after else {}
    per = lambda v: None if v is None else round(v / answered * 1e6, 1)  # noqa: E731
    share = lambda v: (None if v is None or not seconds  # noqa: E731
                       else round(v / seconds, 3))
    return {'server_us': per(server), 'serial_us': per(delta.get('serial')),
            'spread_us': per(delta.get('spread')),
            'replicas_us': per(delta.get('replicas')),
            'nodes_us': nodes_us(delta.get('nodes') or {}, per),
            'written_bytes': (None if 'written' not in delta
                              else round(delta['written'] / answered, 1)),
            'server_share': share(server), 'serial_share': share(delta.get('serial')),
            'seconds': seconds and round(seconds, 3)}


def turns(matrix, members, page, mode):
    """Fixed-rate runs and the budget search of every live member; the
    names of members that died."""
    s = matrix.s
    crew = [Member(matrix, name, server, pair, page, mode)
            for name, server, pair in members if server.alive()]
    crew = [m for m in crew if m.top]
    dead, count, plan = set(), searches(s, page), search_guess(s, page)
    # members dead already or without a saturation rate search nothing
    matrix.progress.drop(plan * count * (len(members) - len(crew)))
    matrix.last_votes = None
    for run in range(1, count + 1):
        points = {m.name: [] for m in crew}
        for m in crew:
            m.host, m.credit = {}, plan
        for label, _ in rates_of(s, 1.0):
            for m in crew:
                if m.name in dead:
                    continue
                rate = dict(rates_of(s, m.top))[label]
                points[m.name] += tried(matrix, m, page, run, rate, label)
                dead |= {m.name} if not m.server.alive() else set()
        for step in range(budget.PROBES):
            for m in crew:
                if m.name in dead:
                    continue
                rate = budget.next_probe(points[m.name], m.top)
                if rate is None:
                    continue
                points[m.name] += tried(matrix, m, page, run, rate, 'probe')
                dead |= {m.name} if not m.server.alive() else set()
        for m in crew:
            found = budget.capacity(points[m.name])
            if s.confirm and m.name not in dead:
                found.update(confirm(matrix, m, page, run, points[m.name]))
                dead |= {m.name} if not m.server.alive() else set()
            slow = m.host.get(found['missed_at']) or [False]
            found.update(target=m.name, page=page, run=run, host=all(slow),
                         saturation=m.top, slo=s.slo, pair=m.pair)
            matrix.results['capacity'].append(found)
            settle(matrix, m, m.name in dead)
        matrix.save()
    return dead


def confirm(matrix, member, page, run, points):
    """The search's capacity offered again for --confirm seconds: held; held
    on a second try after a miss on the percentile alone ('again'); or
    stepped down (budget.step_down) until a rate holds, at most
    budget.CONFIRMS rates ('stepped down'; 'not held': none did, the rate
    is 0 and missed_at the lowest tried)."""
    s, found = matrix.s, budget.capacity(points)
    rate, tries = found['rate'], []
    while rate and len({r for r, _ in tries}) <= budget.CONFIRMS \
            and member.server.alive():
        record = point(matrix, member, page, run, rate, 'confirm',
                       retry=bool(tries) and tries[-1][0] == rate,
                       seconds=s.confirm)
        spend(matrix, member, s.confirm + POINT_GUESS)
        tries.append((rate, record['kept']))
        if record['kept']:
            break
        if len(tries) < 2 or tries[-2][0] != rate:
            if budget.stall_like(record, s.slo):
                continue        # once more at the same rate
        if len({r for r, _ in tries}) == budget.CONFIRMS:
            break
        rate = budget.step_down(points, rate)
    if not tries:
        return {'searched': found['rate'], 'confirmed': None}
    held = tries[-1][0] if tries[-1][1] else 0.0
    missed = [r for r, k in tries if not k and r > held]
    how = ('held' if len(tries) == 1 else 'again' if held == tries[0][0]
           else 'stepped down' if held else 'not held')
    return {'searched': found['rate'], 'rate': held, 'confirmed': how,
            'confirm_seconds': s.confirm, 'confirm_tries': tries,
            'missed_at': min(missed) if missed else found['missed_at']}


def settle(matrix, member, dead):
    """Count a search as its plan said, however many points it ran: more
    than planned slow the pace (so the time left grows) instead of filling
    the bar early; work a dead member will not do leaves the plan."""
    if dead:
        matrix.progress.drop(member.credit)
    else:
        matrix.progress.advance(member.credit)
    member.credit = 0.0


def spend(matrix, member, seconds):
    """Count a point's planned seconds, up to what its search has left."""
    share = min(seconds, member.credit)
    member.credit -= share
    matrix.progress.advance(share)


def tried(matrix, member, page, run, rate, label):
    """[(rate, kept)] of a point, and of its tries again (recorded as
    probes) while it missed on the percentile alone (budget.stall_like):
    a second always, more while the host ran slow during the last miss,
    up to budget.TRIES, on a host the floor found steady (on one slow all
    the time a third try seldom fares better, and the run grows)."""
    record = point(matrix, member, page, run, rate, label)
    spend(matrix, member, point_guess(matrix.s, page))
    found = [(rate, record['kept'])]
    member.host[rate] = [record['host'].get('slow', False)]
    most = budget.TRIES if steady_floor(matrix) else 2
    while budget.stall_like(record, matrix.s.slo) and member.server.alive() \
            and len(found) < most \
            and (len(found) == 1 or member.host[rate][-1]):
        record = point(matrix, member, page, run, rate, 'probe', retry=True)
        spend(matrix, member, point_guess(matrix.s, page))
        found.append((rate, record['kept']))
        member.host[rate].append(record['host'].get('slow', False))
    return found


def steady_floor(matrix):
    """Did the core probes of the run's floor so far find the host steady?"""
    cores = [f.get('core') or {} for f in matrix.results.get('floor') or ()]
    return not steady.unsteady(cores, matrix.s.slo)


def stalled(matrix, name, began, ended):
    """The serving loop's stalls while a point ran (runtime/stalls.py):
    per cause, stalls per second and their p50 and max ms; None where the
    server does not record them (a --target site)."""
    path = matrix.stalls_of.get(name)
    if path is None:
        return None
    time.sleep(stalls.WATCH * 3)    # its watchdog writes what it found
    work = background.windows(matrix.logs_of.get(name) or (), began, ended)
    found = background.name(stalls.read(path, began, ended), work)
    record = {'causes': stalls.summary(found, ended - began),
              'seconds': round(ended - began, 2),
              'max_ms': max([r['ms'] for r in found] or [0.0])}
    if work:    # [what, s into the point, s long]
        record['background'] = [[what, round(max(0.0, b - began), 2),
                                 round(e - b, 2)] for b, e, what in work]
    return record


def apart(matrix, name):
    """Whether the run moved a target's databases off the server's core
    (--databases-apart; one given by address stays where it is)."""
    return any(t.get('databases_on') for t in matrix.results['targets']
               if t['name'] == name)


def point(matrix, member, page, run, rate, label, retry=False, seconds=None):
    """One fixed-rate run of a member (of `seconds`, else the run's point
    duration); its record, added to results.json."""
    s = matrix.s
    seconds = seconds or s.point_duration
    matrix.progress.show('%s · %s · %s · run %d/%d' % (
        member.name, page, '%.0f/s' % rate if label == 'probe'
        else '%.0f/s for %d s' % (rate, seconds) if label == 'confirm'
        else 'rate ' + label, run, searches(s, page)) + (
            ' · again' if retry else ''))
    url, mix = member.server.url, page == mixed.PAGE
    votes = None
    if mix:     # the total after this member's last point, if nothing ran since
        last, matrix.last_votes = matrix.last_votes, None
        votes = (last[1] if last and last[0] == member.name
                 else matrix.settled_votes(url))
    before, tiers = member.cpu(), member.tiers()
    began = time.time()
    watch = steady.watching(s.pin['wrk'], seconds + 0.5)
    if mix:
        record = mixed.run(mixed.command(s.loadgen, url, rate, seconds,
                                         s.connections, s.timeout, s.pin['wrk']),
                           seconds, rate)
    else:
        record = oha.run(oha.command(s.oha, url + path(url, page), rate,
                                     seconds,
                                     s.connections, s.timeout, s.pin['wrk']),
                         seconds, rate)
    record.pop('command')   # settings.latency's, but for URL and rate
    after, tiers = member.cpu(), (tiers, member.tiers())
    record['stalls'] = stalled(matrix, member.name, began, time.time())
    record['host'] = steady.watched(watch, s.slo)
    report = record.get('oha')
    if report is not None:
        report['offered'] = rate
    answered = (report or {}).get('requests') or 0
    server = after[0] - before[0] if before[0] is not None else None
    database = profile.cpu_delta(before[1], after[1]) if member.database else None
    record.update(
        target=member.name, page=page, run=run, rate=label, pair=member.pair,
        retry=retry,
        python=matrix.python_of.get(member.name),
        cpu_s={'server': server and round(server, 3),
               'database': database and round(database, 3),
               # the database on a core of its own: not the server's
               'database_apart': apart(matrix, member.name)},
        us_per_request={
            'server': (round(server / answered * 1e6, 1)
                       if answered and server is not None else None),
            'database': (round(database / answered * 1e6, 1)
                         if answered and database is not None else None)},
        miss=budget.verdict(report, s.slo),
        demand=demand(server, tiers[0], tiers[1], answered,
                      (report or {}).get('seconds')))
    if mix:
        after = matrix.settled_votes(url)
        check = mixed.vote_check(votes, after, report)
        if after is not None:
            matrix.last_votes = (member.name, after)
        record['vote_check'] = check
        if not check['ok']:
            record['error'] = record['miss'] = check['reason']
    record['kept'] = record['miss'] is None
    generator = record.get('generator') or {}
    record['headroom'] = generator.get('share', 0.0) < oha.HEADROOM
    matrix.results['latency'].append(record)
    return record

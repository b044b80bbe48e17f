"""Votes served again through the site after a Redis Cluster primary's
SIGKILL: server.py on a cluster of its own (given with --rediscluster, so
the server does not restart the node: its replica takes over after the
node timeout, 2 s), the mix offered meanwhile by loadgen, and a voter in a
bucket of the killed primary voting every 50 ms with ballots issued
before the kill. Per kill, the seconds from the SIGKILL to its first vote
answered 200; then the node is restarted and rejoins as a replica.
Afterwards the site's vote total must have moved by the votes answered 200
(plus at most those answered 503, which may have run).

With --restarted, server.py runs on its own cluster (under var/, on
STICKERS_REDISCLUSTER_PORT) and restarts the killed node itself, before the
node timeout: no failover.

    python -m bench.cluster_failover [--kills 5] [--rate 100] [--restarted]
"""
import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile

import aiohttp
from redis.crc import key_slot

from data_interface import DataUnavailable
from data_interface.rediscluster.address import url as cluster_url
from data_interface.rediscluster.cluster_data import (
    BUCKETS, CATALOGUE, ClusterData, bucket, bucket_of)
from runtime.processes import free_port
from .engine import EngineServer
from .latency import mixed
from .pagecheck import ballots, session_cookie

ENGINE = 'aiohttp-rediscluster-pool-uvloop'
KEYS = {'rankings': CATALOGUE + 'ratings', 'bucket': bucket(0) + 'log'}
TRY_EVERY = 0.05
GIVE_UP = 30.0
LOAD_RUN = 5            # seconds of each loadgen run of the background mix
# The accounts' passwords of the cluster main() makes: the loader's is the
# one server.py tries on the loopback.
PASSWORDS = {'sticker_app': 'sticker_app', 'sticker_admin': 'sticker_admin',
             'sticker_cluster': 'sticker_cluster'}


def primary_of(cluster, key):
    """The node of `cluster` that serves key's slot now."""
    slot = key_slot(key.encode())
    for port, flags, slots in cluster.nodes_line():
        if 'master' not in flags:
            continue
        for r in slots:
            low, _, high = r.partition('-')
            if not r.startswith('[') and int(low) <= slot <= int(high or low):
                return [n for n in cluster.nodes if n.port == port][0]
    raise RuntimeError('no primary serves slot %d' % slot)


async def new_voter(http, url):
    """(bucket, cookie, win, lose) of a new visitor's first pair, or None."""
    async with http.get(url + '/') as r:
        html = await r.text()
        cookie = session_cookie(r.headers)
    if r.status != 200 or not cookie:
        return None
    _, win, lose = ballots(html)[0]
    return bucket_of(cookie.split('.')[0]), cookie, win, lose


async def vote(http, url, voter):
    """The status of the voter's vote (599: no answer)."""
    _, cookie, win, lose = voter
    try:
        async with http.post(url + '/', data={'win': win, 'lose': lose},
                             headers={'Cookie': 'sid=' + cookie},
                             allow_redirects=False) as r:
            await r.read()
            return r.status
    except (aiohttp.ClientError, asyncio.TimeoutError):
        return 599


def kill(node):
    if node.process is not None:
        node.kill()
    else:               # the site's: by its pid file
        os.kill(node.ours(), signal.SIGKILL)


async def served_again(http, url, cluster, kind, statuses, restart=True):
    """Seconds from a SIGKILL of the primary of `kind`'s slot to a vote of
    a voter in one of its buckets answered 200 (a try every TRY_EVERY s,
    ballots issued before the kill); the node is restarted after and the
    cluster waited for until whole again."""
    loop = asyncio.get_event_loop()
    victim = await loop.run_in_executor(None, primary_of, cluster,
                                        KEYS[kind])
    port = victim.port
    buckets = set()
    for n in range(BUCKETS):
        node = await loop.run_in_executor(None, primary_of, cluster,
                                          bucket(n) + 'log')
        if node.port == port:
            buckets.add(n)
    voters = []
    while len(voters) < GIVE_UP / TRY_EVERY:
        v = await new_voter(http, url)
        if v and v[0] in buckets:
            voters.append(v)
    kill(victim)
    killed = loop.time()
    for voter in voters:
        statuses.append(await vote(http, url, voter))
        if statuses[-1] == 200:
            break
        await asyncio.sleep(TRY_EVERY)
    took = loop.time() - killed
    if restart:
        await loop.run_in_executor(None, victim.restart)
    while not await loop.run_in_executor(None, cluster.settled):
        await asyncio.sleep(0.2)
    return took


async def background(url, rate, reports, stop):
    """The mix at `rate` requests/s, in loadgen runs of LOAD_RUN s until
    stop is set; each run's report appended to `reports`."""
    while not stop.is_set():
        load = await asyncio.create_subprocess_exec(
            *mixed.command(mixed.BINARY, url, rate, LOAD_RUN, 64, 10),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        out = (await load.communicate())[0].decode('utf-8', 'replace')
        reports.append(json.loads(out[out.index('{'):]))


def load_votes(report):
    """(votes answered 200, votes answered otherwise or not at all) of a
    loadgen report."""
    votes = report['kinds'].get('vote', {})
    failed = sum(v for k, v in votes.get('status', {}).items()
                 if int(k) != 200) + sum(votes.get('errors', {}).values())
    return report['votes_ok'], failed


async def votes_counted(data):
    """The buckets' vote counters summed, asked again while a connection
    lost to a killed node fails the call."""
    for _ in range(60):
        try:
            return (await data.stats()).votes
        except DataUnavailable:
            await asyncio.sleep(0.5)
    return (await data.stats()).votes


async def kills(url, cluster, count, rate, say=print, restart=True):
    """({kind: [seconds, ...]}, (votes answered 200, votes answered
    otherwise, the votes counted meanwhile)): `count` kills of each kind
    in turn, under the mix at `rate` requests/s (none without loadgen)."""
    times = {kind: [] for kind in KEYS}
    statuses, reports = [], []
    data = ClusterData(cluster.address)
    await data.start()
    try:
        before = await votes_counted(data)
        stop = asyncio.Event()
        load = asyncio.ensure_future(background(url, rate, reports, stop)) \
            if rate and mixed.find() else None
        try:
            async with aiohttp.ClientSession(
                    timeout=aiohttp.ClientTimeout(total=10)) as http:
                for kind in list(KEYS) * count:
                    times[kind].append(await served_again(
                        http, url, cluster, kind, statuses, restart))
                    say('%s primary killed: votes served again after %.2f s'
                        % (kind, times[kind][-1]))
        finally:
            stop.set()
            if load is not None:
                await load
        ok = statuses.count(200)
        other = len(statuses) - ok
        for r in reports:
            more_ok, more_other = load_votes(r)
            ok, other = ok + more_ok, other + more_other
        counted = await votes_counted(data) - before
    finally:
        await data.close()
    return times, (ok, other, counted)


async def run(count, rate, directory, say=print):
    from runtime.databases.rediscluster import (ManagedCluster,
                                                free_cluster_port)
    cluster = ManagedCluster(directory, port=free_cluster_port(),
                             passwords=PASSWORDS)
    cluster.start()
    server = None
    try:
        server = EngineServer(
            ENGINE, free_port(), ['--rediscluster', cluster_url(
                cluster.address), '--packs', '20'],
            os.path.join(directory, 'server.log')).start(timeout=300)
        return await kills(server.url, cluster, count, rate, say)
    finally:
        if server is not None:
            server.stop()
        cluster.stop()


async def run_restarted(count, rate, directory, say=print):
    """kills() of the nodes of server.py's own cluster, which it restarts."""
    from runtime.databases.rediscluster import ManagedCluster
    from runtime.settings import DEFAULTS, from_environment
    settings = from_environment(DEFAULTS)
    cluster = ManagedCluster(os.path.join(settings.var, 'rediscluster'),
                             port=settings.rediscluster_port)
    server = EngineServer(ENGINE, free_port(), [],
                          os.path.join(directory, 'server.log'))
    server.start(timeout=300)
    try:
        return await kills(server.url, cluster, count, rate, say, False)
    finally:
        server.stop()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--kills', type=int, default=5)
    parser.add_argument('--rate', type=float, default=100)
    parser.add_argument('--restarted', action='store_true',
                        help="the site's own cluster, its nodes restarted "
                        'by the site')
    args = parser.parse_args(argv)
    directory = tempfile.mkdtemp(prefix='cluster-failover-')
    run_kills = run_restarted if args.restarted else run
    times, (ok, other, counted) = asyncio.run(run_kills(
        args.kills, args.rate, directory,
        say=lambda line: print(line, file=sys.stderr)))
    for kind, seconds in times.items():
        print('%-8s median %.2f s of %d kills (%s)' % (
            kind, statistics.median(seconds), len(seconds),
            ', '.join('%.2f' % t for t in sorted(seconds))))
    print('votes answered 200: %d, otherwise: %d, counted: %d'
          % (ok, other, counted))


if __name__ == '__main__':
    main()

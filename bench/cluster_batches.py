"""The Redis Cluster's rankings shard at real batch sizes, without HTTP: the
CPU per vote of {c}'s primary and replica when apply_many carries 1, 10,
100 or 1,000 votes (with its WAIT, as a server sends it), and the batch
size that votes cast at a paced rate form. From these, the most votes a
second one rankings primary applies on one core, and the mix requests
that means (docs/benchmark.md, the cluster's ceiling).

    python bench.py cluster-batches [--out FILE] [--into RESULTS]
                                    [--votes N] [--rates R,..]

--into writes them into a run's results.json as cluster_batches, where
bench.py advise sizes a Redis Cluster's rankings' shard from them.

It starts a cluster of its own in a temporary directory (its votes are
made up), and stops it after."""
import argparse
import asyncio
import json
import random
import shutil
import sys
import tempfile
import time

from data_interface import DataUnavailable
from data_interface.rediscluster.cluster_data import (
    BUCKETS, ClusterData, member)
from runtime.databases.load import data_set
from runtime.databases.rediscluster import ManagedCluster, free_cluster_port
from runtime.settings import DEFAULTS
from .latency.mixed import VOTE
from . import results_file
from .profile import stat

SIZES = (1, 10, 100, 1000)
RATES = (100, 300, 1000, 2000)
# Mix requests per vote: a visitor's GET / and, for VOTE of them, a vote,
# else one read.
PER_VOTE = 2 / VOTE


def cpu(pid):
    s = stat(pid)
    return s[1] + s[2] if s else 0.0


async def applied_by_size(data, pids, votes, ids):
    """{size: (µs of CPU per vote on each of pids, ms per call)}."""
    # Each bucket's sequences follow on from its applied mark, as a
    # server's do: a gap would hold every later one in the bucket's early
    # set, read again by each call. The votes cast after these take the
    # marks these leave (a bucket's first vote reads them).
    marks = await data._applied_marks()
    seq = {b: marks.get(b, 0) for b in range(BUCKETS)}
    result = {}
    for size in SIZES:
        calls = max(votes // size, 20)
        before, start = [cpu(p) for p in pids], time.monotonic()
        for _ in range(calls):
            args = []
            for b in sorted(random.randrange(BUCKETS) for _ in range(size)):
                seq[b] += 1
                win, lose = random.sample(ids, 2)
                args.extend([b, seq[b], member(win), member(lose)])
            await data._apply_many(args)
        took = time.monotonic() - start
        result[size] = ([round((cpu(p) - b) * 1e6 / (calls * size), 1)
                         for p, b in zip(pids, before)],
                        round(took * 1000 / calls, 3))
    return result


async def batches_at(data, pids, rate, seconds=5.0):
    """(the mean batch size, µs of CPU per vote on each of pids) of votes
    cast at `rate` a second."""
    voters = []
    for _ in range(int(rate * seconds)):
        session = '%08x-0000-4000-8000-%012x' % (
            random.getrandbits(32), random.getrandbits(48))
        tokens = data.ballot_tokens(session)
        await data.sticker_pair(session, tokens, 600)
        voters.append((session, tokens))
    batches, before = data.batches, [cpu(p) for p in pids]
    start, tasks = time.monotonic(), []
    for i, (session, (win, lose)) in enumerate(voters):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(
            data.cast_vote(session, win, lose)))
    failed = [e for e in await asyncio.gather(*tasks, return_exceptions=True)
              if isinstance(e, BaseException)]
    if failed:
        raise failed[0]
    made = data.batches - batches
    return (round(len(voters) / max(made, 1), 1),
            [round((cpu(p) - b) * 1e6 / len(voters), 1)
             for p, b in zip(pids, before)])


async def measure(cluster, votes, rates):
    admin = ClusterData(cluster.admin_address)
    await admin.start()
    try:
        await admin.configure(900, sweep_every=3600)
        chosen = data_set(DEFAULTS)
        await admin.load(chosen)
    finally:
        await admin.close()
    ids = [s.id for s in chosen.stickers]
    roles = cluster.roles()
    pids = [n.pid for role in ('rankings', 'rankings-replica')
            for n in cluster.nodes if roles.get(n.port) == role]
    data = ClusterData(cluster.address)
    await data.start()
    try:
        sizes = await applied_by_size(data, pids, votes, ids)
        paced = {}
        for rate in sorted(rates):
            try:
                paced[rate] = await batches_at(data, pids, rate)
            except DataUnavailable as e:
                # this one process cannot cast so many (nor any more)
                print('  %d votes/s: not cast (%s); the rates above it are '
                      'left out' % (rate, e), file=sys.stderr)
                break
            print('  %d votes/s: batches of %.1f' % (rate, paced[rate][0]),
                  file=sys.stderr)
    finally:
        await data.close()
    return sizes, paced


def ceiling(us_per_vote):
    """(votes, mix requests) a second on one core of the rankings' primary."""
    votes = 1e6 / us_per_vote
    return int(votes), int(votes * PER_VOTE)


def table(sizes, paced):
    lines = ['| votes per apply_many | µs per vote, {c} primary | replica '
             '| ms per call | ceiling: votes/s | mix requests/s |',
             '|---:|---:|---:|---:|---:|---:|']
    for size, ((primary, replica), ms) in sorted(sizes.items()):
        lines.append('| %d | %.1f | %.1f | %.2f | %s | %s |' % (
            size, primary, replica, ms,
            *('{:,}'.format(x) for x in ceiling(primary))))
    lines += ['', '| votes cast a second | mean batch | µs per vote, {c} '
              'primary | replica |', '|---:|---:|---:|---:|']
    for rate, (batch, (primary, replica)) in sorted(paced.items()):
        lines.append('| %d | %.1f | %.1f | %.1f |' % (rate, batch, primary,
                                                     replica))
    return '\n'.join(lines)


def main(argv):
    p = argparse.ArgumentParser(prog='bench.py cluster-batches',
                                description=__doc__.split('\n\n')[0])
    p.add_argument('--votes', type=int, default=20000,
                   help='votes applied at each batch size (default 20000)')
    p.add_argument('--rates', default=','.join(map(str, RATES)),
                   help='votes a second to cast, paced (default %(default)s)')
    p.add_argument('--out', help='also write the figures here as JSON')
    p.add_argument('--into', metavar='RESULTS',
                   help="also write them into this results.json (or a run's "
                        'folder) as cluster_batches')
    args = p.parse_args(argv)
    try:
        rates = [int(r) for r in args.rates.split(',') if r]
        if args.votes < 1 or any(r < 1 for r in rates):
            raise ValueError
    except ValueError:
        p.error('--votes and --rates take positive whole numbers')
    directory = tempfile.mkdtemp(prefix='cluster-batches-')
    cluster = ManagedCluster(directory, port=free_cluster_port())
    try:
        print('starting a cluster of six nodes in %s' % directory,
              file=sys.stderr)
        cluster.start()
        sizes, paced = asyncio.run(measure(cluster, args.votes, rates))
    finally:
        cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)
    print(table(sizes, paced))
    found = {'sizes': sizes, 'paced': paced, 'per_vote_mix_requests': PER_VOTE,
             'measured': time.strftime('%Y-%m-%dT%H:%M:%S%z')}
    if args.out:
        with open(args.out, 'w', encoding='utf-8') as f:
            json.dump(found, f, indent=1)
    if args.into:
        into(args.into, found)
    return 0


def into(path, found):
    """Write found into a results.json as cluster_batches."""
    results = results_file.load(path)
    results['cluster_batches'] = json.loads(json.dumps(found))
    from .runner import record_lines
    results_file.save(path, record_lines(results))

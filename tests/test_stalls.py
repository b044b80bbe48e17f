"""The stall record (runtime/stalls.py): a blocking call, a full collection
and the site's periodic work are each recorded with their cause, in this
process's loop and in a serving process stopped for a moment."""
import asyncio
import gc
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import ServerProcess, engine_args, wait_until
from plugins.servers import one_of_each
from runtime import stalls
from runtime.settings import ROOT


def spin(seconds):
    """Run for `seconds` of this thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def block():
    spin(0.05)


def refresh():
    spin(0.05)


def wait():
    time.sleep(0.05)


class Node:
    def __init__(self):
        self.me = self      # a cycle: only the collector frees it


def recorded(tmp_path, monkeypatch, work):
    """The records of a loop that runs `work` once (awaited, if it is a
    coroutine function), between quiet spells."""
    path = str(tmp_path / 'stalls.jsonl')
    loop = asyncio.new_event_loop()
    # Ahead of the other tests' processes for the CPU (as root), so that a
    # stall of its own is not mostly a wait for a core.
    thread, nice = threading.get_native_id(), None
    try:
        nice = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, -10)
    except OSError:
        pass
    try:
        watched = stalls.Stalls(path, loop)

        async def run():
            watched.start()
            await asyncio.sleep(0.05)
            done = work()
            if asyncio.iscoroutine(done):
                await done
            await asyncio.sleep(0.05)
            watched.stop()
        loop.run_until_complete(run())
    finally:
        loop.close()
        if nice is not None:
            os.setpriority(os.PRIO_PROCESS, thread, nice)
    return stalls.read(path)


def mostly(record, cause, share):
    """Is it recorded as `cause`, or as the host's where the machine held
    the thread longer than `share` (its own running or sleeping)? On a busy
    machine the wait for a core can outlast a test's own stall."""
    return record['cause'] == cause or (
        record['cause'] == 'host' and record['waited_ms'] > record[share])


def test_a_blocking_call_is_recorded_with_its_stack(tmp_path, monkeypatch):
    [record] = [r for r in recorded(tmp_path, monkeypatch, block)
                if r['ms'] >= 40]
    assert mostly(record, 'callback', 'ran_ms'), record
    if record['cause'] == 'callback':     # the kernel's figure, to a tick
        assert record['ran_ms'] > record['ms'] / 2, record
    assert any(':block:' in line for line in record['stack']), record
    assert record['pid'] == os.getpid()


def test_the_watchdog_outlives_a_failure_of_its_own(tmp_path, monkeypatch,
                                                    caplog):
    """A look that fails (a sampled frame it cannot read) is said once in
    the log, and the record goes on: the next stall is still recorded."""
    real, failures = stalls.stack, []

    def fails_twice(frame):
        if len(failures) < 2:
            failures.append(frame)
            raise TypeError('a frame it cannot read')
        return real(frame)
    monkeypatch.setattr(stalls, 'stack', fails_twice)

    async def two_stalls():
        block()
        await asyncio.sleep(0.05)
        block()
    records = [r for r in recorded(tmp_path, monkeypatch, two_stalls)
               if r['ms'] >= 40]
    assert len(failures) == 2 and len(records) == 2, records
    # the second, after both failures, sampled as ever
    assert any(':block:' in line for line in records[-1].get('stack', ())), records
    said = [r for r in caplog.records if 'watchdog failed' in r.getMessage()]
    assert len(said) == 1


def test_a_frame_without_a_line_number_is_sampled():
    class Code:
        co_filename, co_name = '/x/pages/site.py', 'refresh'

    class Frame:
        f_code, f_lineno, f_back = Code, None, None
    assert stalls.stack(Frame) == ['pages/site.py:refresh:0']


def test_a_sleeping_call_is_recorded_as_blocked(tmp_path, monkeypatch):
    [record] = [r for r in recorded(tmp_path, monkeypatch, wait)
                if r['ms'] >= 40]
    assert mostly(record, 'blocked', 'slept_ms'), record
    assert any(':wait:' in line for line in record['stack']), record
    assert record['slept_ms'] >= 40


def test_a_full_collection_is_recorded_as_gc(tmp_path, monkeypatch):
    def collect():
        heap = [Node() for _ in range(300000)]
        del heap
        gc.collect()
    records = [r for r in recorded(tmp_path, monkeypatch, collect)
               if r['cause'] == 'gc']
    assert records, 'no collection recorded'
    assert any(g[0] == 2 for r in records for g in r['gc']), records


def test_the_site_s_periodic_work_is_named(tmp_path, monkeypatch):
    monkeypatch.setitem(stalls.PERIODIC, ('tests/test_stalls.py', 'refresh'),
                        'about refresh')
    [record] = [r for r in recorded(tmp_path, monkeypatch, refresh)
                if r['ms'] >= 40]
    assert mostly(record, 'periodic', 'ran_ms'), record
    assert record['work'] == 'about refresh'


def test_summary_counts_per_cause():
    records = [{'cause': 'gc', 'ms': 5.0}, {'cause': 'gc', 'ms': 15.0},
               {'cause': 'host', 'ms': 30.0}]
    assert stalls.summary(records, 2.0) == {
        'gc': {'per_s': 1.0, 'p50_ms': 15.0, 'max_ms': 15.0},
        'host': {'per_s': 0.5, 'p50_ms': 30.0, 'max_ms': 30.0}}


def test_results_md_gives_the_longest_stall_and_the_longest_at_capacity():
    from bench.latency.report import stall_table

    def point(run, offered, gc_per_s, longest):
        return {'target': 'a', 'page': 'good', 'run': run, 'pair': None,
                'offered': offered, 'stalls': {
                    'seconds': 2.0, 'max_ms': longest, 'causes': {
                        'gc': {'per_s': gc_per_s, 'max_ms': longest},
                        'host': {'per_s': 0.5, 'max_ms': 6.0}}}}
    results = {
        'latency': [point(1, 100.0, 1.0, 4.0), point(1, 200.0, 3.0, 30.0),
                    point(2, 100.0, 1.0, 5.0), point(2, 150.0, 1.0, 8.0)],
        'capacity': [{'target': 'a', 'page': 'good', 'run': 1, 'pair': None,
                      'rate': 100.0},
                     {'target': 'a', 'page': 'good', 'run': 2, 'pair': None,
                      'rate': 150.0}]}
    lines = stall_table(results, ['a'], ['good'])
    row = [c.strip() for c in lines[-1].strip('|').split('|')]
    # gc 12 stalls over 8 s; the longest 30 ms (at 200/s, past run 1's
    # capacity); at the capacities (100/s in run 1, 150/s in run 2) 8 ms,
    # and each the collector's; at 100/s in run 1 the host's was longer
    assert row == ['a', 'good', '4', '1.50', '0.00', '0.00', '0.00', '0.00',
                   '0.00', '0.50', '30.0 gc', '8.00 gc']
    results['latency'] = results['latency'][:1]
    row = [c.strip() for c in stall_table(
        results, ['a'], ['good'])[-1].strip('|').split('|')]
    assert row[-2:] == ['6.00 host', '6.00 host']


def test_the_databases_background_work_is_read_from_their_logs(tmp_path):
    """Tarantool's snapshots, PostgreSQL's checkpoints and Redis's rewrites
    are read from lines in each one's own format; work still running ends
    at the range's end; work outside the range is left out."""
    from bench.latency import background
    t0 = 1_800_000_000.0

    def local(t, layout):
        return time.strftime(layout, time.localtime(t)) + '.%03d' % (
            round(t % 1 * 1000))
    tarantool = tmp_path / 'tarantool.log'
    tarantool.write_text(''.join(
        '%s [7] %s\n' % (local(t0 + at, '%Y-%m-%d %H:%M:%S'), text) for at, text in [
            (-60, "snapshot/101/main I> saving snapshot `x.snap.inprogress'"),
            (-59, 'snapshot/101/main I> done'),
            (1.25, "snapshot/101/main I> saving snapshot `y.snap.inprogress'"),
            (2.0, 'main/103/x I> done'),       # another fiber's
            (3.5, 'snapshot/101/main C> 0.1M rows written'),
            (4.75, 'snapshot/101/main I> done')]))
    postgres = tmp_path / 'postgres.log'
    postgres.write_text(''.join(
        '%s UTC [9] LOG:  %s\n' % (time.strftime(
            '%Y-%m-%d %H:%M:%S', time.gmtime(t0 + at)) + '.500', text)
        for at, text in [(6, 'checkpoint starting: time'),
                         (8, 'checkpoint complete: wrote 10 buffers')]))
    redis = tmp_path / 'redis.log'
    redis.write_text(''.join(
        '5:M %s * %s\n' % (local(t0 + at, '%d %b %Y %H:%M:%S'), text)
        for at, text in [
            (9, 'Background append only file rewriting started by pid 6'),
            (9.5, 'Background AOF rewrite terminated with success'),
            (10, 'Background AOF rewrite finished successfully'),
            (11, 'Background saving started by pid 8')]))
    found = background.windows([str(tarantool), str(postgres), str(redis),
                                str(tmp_path / 'missing.log')], t0, t0 + 12)
    assert [(round(b - t0, 3), round(e - t0, 3), what)
            for b, e, what in found] == [
        (1.25, 4.75, 'tarantool snapshot'),
        (6.5, 8.5, 'postgres checkpoint'),
        (9.0, 10.0, 'redis aof rewrite'),
        (11.0, 12.0, 'redis save')]


def test_the_host_s_stalls_in_a_database_s_work_are_the_database_s():
    from bench.latency import background
    records = [{'cause': 'host', 'at': 10.0, 'ms': 5.0},
               {'cause': 'host', 'at': 19.999, 'ms': 5.0},   # ends inside
               {'cause': 'host', 'at': 30.0, 'ms': 5.0},     # after it
               {'cause': 'gc', 'at': 21.0, 'ms': 5.0}]       # not the host's
    named = background.name(records, [(20.0, 25.0, 'tarantool snapshot')])
    assert [(r['cause'], r.get('work')) for r in named] == [
        ('host', None), ('database', 'tarantool snapshot'), ('host', None),
        ('gc', None)]


@pytest.mark.db
@pytest.mark.server
@pytest.mark.parametrize('engine', one_of_each(['aiohttp-tarantool-one-uvloop']))
def test_a_serving_process_records_a_stop_of_its_loop(request, tmp_path, engine):
    """SIGSTOP for 0.3 s: the serving process records a stall that long,
    in which its loop's thread hardly ran."""
    path = str(tmp_path / 'stalls.jsonl')
    server = ServerProcess(engine, engine_args(request, engine),
                           str(tmp_path / 'server.log'),
                           env={stalls.ENVIRONMENT: path})
    try:
        wait_until(lambda: 'recording the loop' in server.output(), 10, 0.05)
        stopped = time.time()
        os.kill(server.process.pid, signal.SIGSTOP)
        time.sleep(0.3)
        os.kill(server.process.pid, signal.SIGCONT)
        found = wait_until(lambda: [r for r in stalls.read(path, stopped - 0.1)
                                    if r['ms'] >= 250], 10, 0.05,
                           lambda: str(stalls.read(path)))
        assert found[0]['pid'] == server.process.pid
        # Stopped while it waited for events: the host's; while in code,
        # it looks asleep there (blocked). Either way it hardly ran.
        assert found[0]['cause'] in ('host', 'blocked'), found
        assert found[0]['ran_ms'] < found[0]['ms'] / 4, found
    finally:
        server.stop()


HOGGED = '''
import asyncio, os, sys, time
from runtime import stalls
os.sched_setaffinity(0, {0})
async def main():
    watched = stalls.Stalls(sys.argv[1], asyncio.get_event_loop())
    watched.start()
    print('ready', flush=True)
    end = time.monotonic() + 1.0
    while time.monotonic() < end:     # busy: preempted mostly in code
        step = time.perf_counter() + 0.001
        while time.perf_counter() < step:
            pass
        await asyncio.sleep(0)
    watched.stop()
asyncio.run(main())
'''
HOG = '''
import os, time
os.sched_setaffinity(0, {0})
os.nice(-15)
end = time.monotonic() + 1.5
while time.monotonic() < end:
    pass
'''


@pytest.mark.server
def test_a_loop_that_waits_for_its_cpu_is_stalled_by_the_host(tmp_path):
    """A process at a higher priority spinning on the core of a busy loop:
    the stalls it makes are the host's (waited for a CPU), though the loop
    was mostly in its own code when the watchdog looked."""
    path = str(tmp_path / 'stalls.jsonl')
    loop = subprocess.Popen([sys.executable, '-c', HOGGED, path], cwd=ROOT,
                            stdout=subprocess.PIPE)
    try:
        assert loop.stdout.readline() == b'ready\n'
        subprocess.run([sys.executable, '-c', HOG], check=True, timeout=30)
    finally:
        loop.wait(30)
    records = stalls.read(path)
    assert records, 'no stall'
    causes = [r['cause'] for r in records]
    assert causes.count('host') > len(causes) / 2, records
    assert all(r['waited_ms'] > 0 for r in records if r['cause'] == 'host'
               and 'waited_ms' in r)

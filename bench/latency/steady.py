"""How steady a core's speed is: a fixed piece of Python work, done again
and again for a few seconds, counted in 10 ms windows. A window's speed is
the work done in it ÷ the work a median piece's time allows. On a host
whose core is shared with others, some windows run at a tenth of the speed
without any sign in the guest's steal time; nginx's 10 µs requests hardly
notice, a Python server's 100–500 µs ones queue behind it.

Run on the server's core:  taskset -c 1 python -m bench.latency.steady 5

While a point runs, watch() looks on beside the load generator: the host's
slow stretches hit both cores at once (2026-11-27), and a burst timed in
its thread's CPU time leaves out waits for the generator and puts in the
host's.
"""
import json
import os
import select
import subprocess
import sys
import time

WINDOW = 0.010      # seconds
SECONDS = 3.0       # of one probe
SLOW = 0.5          # a window under this speed is slow
SLOW_SHARE = 1.0    # % of slow windows past which the budget is the host's
BURST = 25          # pieces in a watch's burst, about 1 ms of work
REST = 0.004        # seconds between bursts
GAP = 0.020         # seconds between bursts past which the watch was kept off


def piece():
    return sum(range(2000))     # about 40 µs


def probe(seconds=SECONDS):
    """{'windows', 'median_us', 'slow_pct', 'longest_ms', 'p1', 'min'}:
    speeds are shares of the median piece's pace; longest_ms the longest
    run of slow windows."""
    stamps = []
    end = time.perf_counter() + seconds
    while True:
        now = time.perf_counter()
        if now > end:
            break
        piece()
        stamps.append(now)
    gaps = sorted(b - a for a, b in zip(stamps, stamps[1:]))
    median = gaps[len(gaps) // 2]
    counts = [0] * int((stamps[-1] - stamps[0]) / WINDOW)
    for t in stamps:
        index = int((t - stamps[0]) / WINDOW)
        if index < len(counts):
            counts[index] += 1
    speeds = [c * median / WINDOW for c in counts]
    longest = run = 0
    for speed in speeds:
        run = run + 1 if speed < SLOW else 0
        longest = max(longest, run)
    speeds.sort()
    return {'windows': len(speeds), 'median_us': round(median * 1e6, 1),
            'slow_pct': round(100.0 * sum(s < SLOW for s in speeds)
                              / len(speeds), 1),
            'longest_ms': round(longest * WINDOW * 1000),
            'p1': round(speeds[len(speeds) // 100], 2),
            'min': round(speeds[0], 2)}


def watch(seconds):
    """summary() of bursts of the piece every few ms, each timed in CPU
    time, until stdin ends (or `seconds`): a watch that starts late on a
    busy core still answers, with what it saw."""
    def ended():    # rests REST between bursts
        return bool(select.select([sys.stdin], [], [], REST)[0])

    def burst():
        start, cpu = time.perf_counter(), time.thread_time()
        for _ in range(BURST):
            piece()
        return start, time.thread_time() - cpu, time.perf_counter()
    bursts, warm = [], 5     # the first ones fault pages in
    end = time.perf_counter() + seconds
    while time.perf_counter() < end and not ended():
        if warm == 5:
            os.nice(19)     # from now on, after the generator
        timed = burst()
        if warm:
            warm -= 1
        else:
            bursts.append(timed)
    return summary(bursts)


def summary(bursts):
    """{'bursts', 'slow_pct', 'longest_ms'} of [(start, cpu, stop)]. A burst
    whose wall time is over 1.5 times its CPU time was kept off its core in
    the guest (a slice lost costs CPU time too, in cold caches): it is left
    out and ends a run, as does a gap of over GAP s. Of the rest, a slow
    burst took more CPU time than the median ÷ SLOW; longest_ms is the
    longest wall time from the start of a run of slow bursts to its end."""
    def kept_off(start, cpu, stop):
        return stop - start > 1.5 * cpu
    kept = [b for b in bursts if not kept_off(*b)]
    if not kept:
        return {'bursts': 0, 'slow_pct': 0.0, 'longest_ms': 0}
    median = sorted(cpu for _, cpu, _ in kept)[len(kept) // 2]
    longest, first, last = 0.0, None, None
    for start, cpu, stop in bursts:
        off = kept_off(start, cpu, stop)
        if off or (last is not None and start - last > GAP):
            first = None
        last = stop
        if cpu * SLOW > median and not off:
            first = start if first is None else first
            longest = max(longest, stop - first)
        else:
            first = None
    slow = sum(1 for _, cpu, _ in kept if cpu * SLOW > median)
    return {'bursts': len(kept), 'slow_pct': round(100.0 * slow / len(kept), 1),
            'longest_ms': round(longest * 1000)}


def watching(pin, seconds):
    """watch() in a process on the pinned core, for at most `seconds`: hand
    it to watched() when the load has run. It lowers its own priority once
    it starts to work (started at the lowest, on a busy machine it took
    seconds to start and as long to end)."""
    try:
        return subprocess.Popen(
            list(pin) + [
                sys.executable, '-m', 'bench.latency.steady', '--watch',
                str(seconds)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
    except OSError as e:
        return {'error': 'the host watch failed: %s' % e}


def watched(started, slo):
    """The watch's figures, with 'slow' when the host ran slow (unsteady),
    or {'error': why}."""
    if isinstance(started, dict):
        return started
    try:
        out, err = started.communicate('', timeout=30)   # its stdin ends
    except subprocess.TimeoutExpired:
        started.kill()
        started.communicate()
        return {'error': 'the host watch did not end'}
    try:
        found = json.loads(out) if started.returncode == 0 else None
    except ValueError:
        found = None
    if found is None:
        why = (err.strip().splitlines() or ['no output'])[-1]
        return {'error': 'the host watch failed (exit %d): %s'
                % (started.returncode, why)}
    found['slow'] = bool(unsteady([found], slo))
    return found


def measure(pin, seconds=SECONDS):
    """probe() in a process on the pinned core, or {'error': why}."""
    try:
        done = subprocess.run(
            list(pin) + [sys.executable, '-m', 'bench.latency.steady',
                         str(seconds)],
            capture_output=True, text=True, timeout=seconds + 30)
        if done.returncode:
            why = (done.stderr.strip().splitlines() or ['no output'])[-1]
            return {'error': 'the core probe failed (exit %d): %s' % (
                done.returncode, why)}
        return json.loads(done.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return {'error': 'the core probe failed: %s' % (
            str(e) or type(e).__name__)}


def unsteady(taken, slo):
    """The probes of `taken` with more slow windows than SLOW_SHARE %, in
    runs at least half the budget long (a request queued behind one waits
    about as long)."""
    return [p for p in taken if p.get('slow_pct', 0) > SLOW_SHARE
            and p.get('longest_ms', 0) >= slo['ms'] / 2]


def main(argv):
    watching = argv[:1] == ['--watch']
    argv = argv[1:] if watching else argv
    try:
        seconds = float(argv[0]) if len(argv) == 1 else (
            SECONDS if not argv else 0)
    except ValueError:
        seconds = 0
    if not 0.1 <= seconds <= 600:
        sys.exit('usage: python -m bench.latency.steady [--watch] [SECONDS], '
                 'SECONDS from 0.1 to 600')
    if not watching:    # for whoever wants to stop it while it works
        print('measuring', file=sys.stderr, flush=True)
    print(json.dumps((watch if watching else probe)(seconds)), flush=True)
    if watching:
        os._exit(0)     # no teardown at the lowest priority


if __name__ == '__main__':
    main(sys.argv[1:])

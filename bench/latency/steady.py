"""How steady a core's speed is: a fixed piece of Python work, done again
and again for a few seconds, counted in 10 ms windows. A window's speed is
the work done in it ÷ the work a median piece's time allows. On a host
whose core is shared with others, some windows run at a tenth of the speed
without any sign in the guest's steal time; nginx's 10 µs requests hardly
notice, a Python server's 100–500 µs ones queue behind it.

Run on the server's core:  taskset -c 1 python -m bench.latency.steady 5
"""
import json
import subprocess
import sys
import time

WINDOW = 0.010      # seconds
SECONDS = 3.0       # of one probe
SLOW = 0.5          # a window under this speed is slow
SLOW_SHARE = 1.0    # % of slow windows past which the budget is the host's


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
    try:
        seconds = float(argv[0]) if argv else SECONDS
    except ValueError:
        seconds = 0
    if not 0.1 <= seconds <= 600:
        sys.exit('usage: python -m bench.latency.steady [SECONDS], '
                 'SECONDS from 0.1 to 600')
    print(json.dumps(probe(seconds)))


if __name__ == '__main__':
    main(sys.argv[1:])

"""The serving loop's stalls: every stretch longer than THRESHOLD in which
the event loop did not turn, with its cause, appended as JSON lines to the
file $STICKERS_STALLS names (bench.py's timed runs set it; off otherwise).

A beat callback notes the time every BEAT seconds: when it runs late, the
loop did not turn meanwhile. A watchdog thread looks every THRESHOLD for a
late beat and then samples the loop thread's stack, and the garbage
collector's passes are timed by gc.callbacks. A stall's cause:
- gc: collections took half of it or more (generation, ms, collected);
- host: the loop's thread waited for a CPU more than it ran or slept (the
  kernel's schedstat), or it waited for events (the loop's own frames on
  top) with its beat due: stopped, or not scheduled;
- blocked: it slept more than it ran in a call of its own (a blocking
  call, or the GIL held by another thread), with the stack where;
- periodic: the stack was in the site's own periodic work (PERIODIC);
- callback: the stack was in other Python code (its innermost frames);
- unsampled: the watchdog did not get the GIL while it lasted (C code that
  holds it, or a stall too short to catch).
Only the loop's thread is watched: a stall in granian's or Robyn's own Rust
threads does not show here (uWebSockets runs in the loop's thread). Time a
hypervisor takes from a VM counts as the thread's own running there, and
schedstat's figures are as fresh as the kernel's last tick (up to 10 ms)."""
import collections
import gc
import json
import logging
import os
import sys
import threading
import time

ENVIRONMENT = 'STICKERS_STALLS'
BEAT = 0.002
THRESHOLD = 0.003
WATCH = 0.002           # the watchdog's period
GC_SHOWN = 0.001        # collections shorter than this are only counted
FRAMES = 6              # innermost frames kept of a sampled stack
# (file's tail, function): the site's own periodic work.
PERIODIC = {('pages/site.py', 'refresh'): 'about refresh',
            ('pages/site.py', '_refresh_forever'): 'about refresh',
            ('pages/visits.py', '_write'): 'visit batch',
            ('data_interface/replicated.py', 'check'): 'replica check',
            ('data_interface/replicated.py', '_judge'): 'replica check',
            ('pages/limits.py', '_sweep'): 'limits sweep'}
# On top of the stack, the loop waits for events (also: its own frames).
SELECTORS = 'selectors.py'


class Stalls:
    """start() on the running loop; stop() writes what is left."""

    def __init__(self, path, loop):
        self.path = path
        self.loop = loop
        self.thread_id = threading.get_ident()
        self.last = time.perf_counter()
        self.schedstat = '/proc/%s/schedstat' % os.readlink('/proc/thread-self')
        self.readings = collections.deque(maxlen=16)   # (when, times())
        self.base = None        # the code of the loop's own frames
        self.samples = {}       # beat time -> (when, stack) of a late beat
        self.collections = collections.deque(maxlen=4096)
        self.counts = [0, 0, 0]
        self.found = collections.deque()
        self.gc_start = 0.0
        self.running = False
        self.handle = None
        self.watchdog = threading.Thread(target=self._watch, daemon=True,
                                         name='stalls')

    def start(self):
        self.running = True
        self.readings.append((time.perf_counter(), self.times()))
        gc.callbacks.append(self._collected)
        self.handle = self.loop.call_later(BEAT, self._beat)
        self.watchdog.start()

    def stop(self):
        self.running = False
        if self.handle is not None:
            self.handle.cancel()
        if self._collected in gc.callbacks:
            gc.callbacks.remove(self._collected)
        self.watchdog.join(1.0)
        self._write()

    def _beat(self):
        now = time.perf_counter()
        late = now - self.last - BEAT
        if late > THRESHOLD:
            self.found.append((self.last, now, time.time() - late))
        if self.base is None:
            self.base = frames_below(sys._getframe(1))
        self.last = now
        self.handle = self.loop.call_later(BEAT, self._beat)

    def _collected(self, phase, info):
        if phase == 'start':
            self.gc_start = time.perf_counter()
            return
        took = time.perf_counter() - self.gc_start
        self.counts[info['generation']] += 1
        if took >= GC_SHOWN:
            self.collections.append((self.gc_start, took, info['generation'],
                                     info['collected']))

    def _watch(self):
        failed = False
        while self.running:
            time.sleep(WATCH)
            try:
                self._look()
            except Exception:   # the record goes on: said once, not per look
                if not failed:
                    logging.getLogger('server').exception(
                        "the stall record's watchdog failed once (it goes on)")
                failed = True

    def _look(self):
        last = self.last
        now = time.perf_counter()
        if now - last <= BEAT + WATCH / 2:
            self.readings.append((now, self.times()))
        elif last not in self.samples:
            frame = sys._current_frames().get(self.thread_id)
            self.samples[last] = (self.idle(frame), stack(frame))
        if self.found:
            self._write()

    def times(self):
        """(ran, waited for a CPU) of the loop's thread so far, seconds."""
        try:
            with open(self.schedstat) as f:
                ran, waited = f.read().split()[:2]
        except (OSError, ValueError):
            return None
        return int(ran) / 1e9, int(waited) / 1e9

    def _write(self):
        lines = []
        now, times = time.perf_counter(), self.times()
        while self.found:
            lines.append(json.dumps(self.judge(*self.found.popleft(),
                                               now=now, times=times)))
        if lines:
            with open(self.path, 'a') as f:
                f.write(''.join(line + '\n' for line in lines))

    def idle(self, frame):
        """Is the loop waiting for events in this stack?"""
        return frame is None or (frame.f_code in (self.base or ())) or \
            frame.f_code.co_filename.endswith(SELECTORS)

    def judge(self, last, end, wall, now=None, times=None):
        """The record of a stall after the beat at `last`, to `end`
        (perf_counter); `times` at `now`, after it."""
        start = last + BEAT
        took = end - start
        spent = self.spent(start, now, times)
        passes = [c for c in list(self.collections)
                  if c[0] < end and c[0] + c[1] > start]
        record = {'at': round(wall, 4), 'ms': round(took * 1000, 2),
                  'pid': os.getpid()}
        if spent:
            record['ran_ms'], record['waited_ms'], record['slept_ms'] = [
                round(t * 1000, 2) for t in spent]
        if passes:
            record['gc'] = [[g, round(t * 1000, 2), n] for _, t, g, n in passes]
        sample = self.samples.pop(last, None)
        for beat in [b for b in self.samples if b < last]:
            del self.samples[beat]
        work = None
        if sample:      # where the loop was, whatever the cause
            record['stack'] = sample[1]
            work = periodic(sample[1])
            if work:
                record['work'] = work
        if sum(c[1] for c in passes) >= took / 2:
            record['cause'] = 'gc'
        elif spent and spent[1] > max(spent[0], spent[2]):
            record['cause'] = 'host'
        elif spent and spent[2] > spent[0]:
            # Asleep in a call of its own, or stopped while it waited for
            # events (SIGSTOP, a frozen cgroup): the host's.
            record['cause'] = ('blocked' if sample and not sample[0]
                               else 'host')
        elif sample is None:
            record['cause'] = 'unsampled'
        elif sample[0]:
            record['cause'] = 'host'
        else:
            record['cause'] = 'periodic' if work else 'callback'
        return record


    def spent(self, start, now, times):
        """(ran, waited for a CPU, slept) of the loop's thread from the
        last reading before `start` to `now`, a span that holds the stall;
        None where the kernel does not say."""
        before = None
        for reading in list(self.readings):
            if reading[0] <= start:
                before = reading
        if times is None or before is None or before[1] is None:
            return None
        ran, waited = times[0] - before[1][0], times[1] - before[1][1]
        return ran, waited, max(0.0, now - before[0] - ran - waited)


def stack(frame):
    """'file:function:line' of the innermost frames, innermost first."""
    found = []
    while frame is not None and len(found) < FRAMES:
        code = frame.f_code
        # f_lineno is None in some frames (3.11: one between instructions)
        found.append('%s:%s:%d' % (tail(code.co_filename), code.co_name,
                                   frame.f_lineno or 0))
        frame = frame.f_back
    return found


def tail(path):
    """The last two parts of a path."""
    return '/'.join(path.replace(os.sep, '/').split('/')[-2:])


def periodic(frames):
    for line in frames:
        place, function = line.split(':')[:2]
        if (place, function) in PERIODIC:
            return PERIODIC[place, function]
    return None


def frames_below(frame):
    """The code objects of `frame` and every frame it was called from."""
    found = set()
    while frame is not None:
        found.add(frame.f_code)
        frame = frame.f_back
    return found


RUNNING = []    # the record this process keeps, if any


def start_after(listening):
    """Start the record once `listening` (a future: the server listens,
    its start-up objects are frozen) is done, if $STICKERS_STALLS names a
    file."""
    path = os.environ.get(ENVIRONMENT)
    if not path or listening.cancelled() or listening.exception():
        return
    import asyncio
    RUNNING.append(Stalls(path, asyncio.get_event_loop()))
    RUNNING[-1].start()
    logging.getLogger('server').info("recording the loop's stalls in %s",
                                     path)


def stop():
    """Stop the record, writing what is left."""
    while RUNNING:
        RUNNING.pop().stop()


def read(path, start=None, end=None):
    """The stall records of a file, those from start to end (wall clock)
    if given."""
    try:
        with open(path) as f:
            records = [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []
    return [r for r in records if (start is None or r['at'] >= start)
            and (end is None or r['at'] <= end)]


def summary(records, seconds):
    """Per cause: stalls per second, p50 and max ms."""
    by = collections.defaultdict(list)
    for r in records:
        by[r['cause']].append(r['ms'])
    return {c: {'per_s': round(len(ms) / seconds, 2),
                'p50_ms': sorted(ms)[len(ms) // 2], 'max_ms': max(ms)}
            for c, ms in sorted(by.items())}

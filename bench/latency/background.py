"""The local databases' own background work, read from their logs:
Tarantool's snapshots, PostgreSQL's checkpoints, Redis's AOF rewrites and
saves. A stall of the serving loop that the record puts on the host (its
thread waited for a CPU) while such work ran is the database's: on one
shared core, that work is what took the CPU."""
import calendar
import re
import time

from runtime.databases import files

TAIL = 1 << 20      # bytes read from the end of a log: a point's lines

# The time at the start of a line: (pattern, strptime format).
STAMPS = [
    # Tarantool: 2026-11-29 11:19:15.826 [16408] snapshot/101/main I> ...
    # PostgreSQL: 2026-11-29 10:04:46.752 UTC [10467] LOG:  ...
    (re.compile(r'(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(\.\d+)(?: ([A-Z]+))? \['),
     '%Y-%m-%d %H:%M:%S'),
    # Redis: 16408:M 29 Nov 2026 11:18:59.131 * ...
    (re.compile(r'\d+:[A-Z] (\d\d? \w{3} \d{4} \d\d:\d\d:\d\d)(\.\d+)() '),
     '%d %b %Y %H:%M:%S'),
]
# what: (the line that starts it, the line that ends it)
WORK = {
    'tarantool snapshot': (re.compile(r'I> saving snapshot'),
                           re.compile(r' snapshot/\S+ I> done$')),
    'postgres checkpoint': (re.compile(r'LOG:  checkpoint starting'),
                            re.compile(r'LOG:  checkpoint complete')),
    'redis aof rewrite': (
        re.compile(r'Background append only file rewriting started'),
        re.compile(r'Background AOF rewrite (finished|terminated with error'
                   r'|terminated by signal)')),
    'redis save': (re.compile(r'Background saving started'),
                   re.compile(r'Background saving terminated')),
}


def stamp(line):
    """The wall-clock time a log line starts with, or None."""
    for pattern, layout in STAMPS:
        m = pattern.match(line)
        if m:
            try:
                t = time.strptime(m.group(1), layout)
            except ValueError:
                return None
            whole = (calendar.timegm(t) if m.group(3) in ('UTC', 'GMT')
                     else time.mktime(t))
            return whole + float(m.group(2))
    return None


def windows(paths, start, end):
    """[(began, ended, what)] of the work in the logs at `paths` that
    overlaps start..end (wall clock); work still running ends at `end`."""
    found = []
    for path in paths:
        running = {}
        for line in tail(path):
            for what, (begins, ends) in WORK.items():
                if begins.search(line):
                    running[what] = stamp(line)
                elif ends.search(line) and running.get(what) is not None:
                    found.append((running.pop(what), stamp(line), what))
        found += [(began, end, what) for what, began in running.items()
                  if began is not None]
    return sorted(w for w in found if w[1] is not None
                  and w[0] <= end and w[1] >= start)


def tail(path):
    """The last TAIL bytes of a file, as lines ([] if it cannot be read)."""
    try:
        return files.read(path, tail=TAIL).splitlines()
    except OSError:
        return []


def name(records, found):
    """The host's stalls in records that overlap a window of `found`
    become the database's, with the work's name."""
    for r in records:
        if r['cause'] != 'host':
            continue
        at, to = r['at'], r['at'] + r['ms'] / 1000
        work = next((w for w in found if w[0] <= to and w[1] >= at), None)
        if work:
            r['cause'], r['work'] = 'database', work[2]
    return records

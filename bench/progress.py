"""A progress bar on stderr over the planned matrix: one redrawn line on a
terminal, one line per step otherwise (logs, CI)."""
import shutil
import sys
import time


def clock(seconds):
    seconds = int(round(seconds))
    if seconds >= 3600:
        return '%dh%02dm' % (seconds // 3600, seconds % 3600 // 60)
    if seconds >= 60:
        return '%dm%02ds' % (seconds // 60, seconds % 60)
    return '%ds' % seconds


class Progress:
    """Planned work is in estimated seconds; the time left is the planned
    rest, scaled by how the estimates held so far."""

    def __init__(self, planned, stream=None):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.planned = planned
        self.done = 0.0
        self.started = time.monotonic()

    def left(self):
        rest = max(self.planned - self.done, 0.0)
        if self.done > 0:
            pace = (time.monotonic() - self.started) / self.done
            rest *= min(max(pace, 0.5), 3.0)
        return rest

    def line(self, label):
        share = self.done / self.planned if self.planned else 1.0
        head = '%3d%% ' % (100 * share)
        tail = '  ETA %s' % clock(self.left())
        if not self.tty:
            return '[bench] ' + head + label + tail
        width = shutil.get_terminal_size((100, 20)).columns - 1
        bar = max(width - len(head) - len(label) - len(tail) - 4, 10)
        bar = min(bar, 30)
        filled = int(round(bar * share))
        text = '[%s%s] %s%s%s' % ('#' * filled, '.' * (bar - filled), head,
                                  label, tail)
        return text[:width]

    def show(self, label):
        if self.tty:
            self.stream.write('\r\x1b[K' + self.line(label))
        else:
            self.stream.write(self.line(label) + '\n')
        self.stream.flush()

    def advance(self, seconds):
        """Count planned seconds as done."""
        self.done = min(self.done + seconds, self.planned)

    def drop(self, seconds):
        """Forget planned work that will not run (a failed target)."""
        self.planned = max(self.planned - seconds, self.done)

    def note(self, text):
        """A message that stays (the bar is redrawn below it)."""
        if self.tty:
            self.stream.write('\r\x1b[K')
        self.stream.write(text + '\n')
        self.stream.flush()

    def close(self):
        if self.tty:
            self.stream.write('\r\x1b[K')
            self.stream.flush()

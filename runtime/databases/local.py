"""What every local database shares: one start or stop at a time, the
lock that says which server manages it, taking over one that no server
manages any more, and making sure that what listens on its port is its own
process before its kept passwords are sent there."""
import logging
import os
import threading
from collections import namedtuple

from data_interface.address import guard
from . import files

from ..processes import command_name, holds, listener, lock, unlock

log = logging.getLogger('databases')


GUARDED = {}    # (host, port) -> Owner, for this process's workers


def guard_all(owners):
    """guard() for Owners given as lists (a worker's, from its parent)."""
    for owner in map(Owner._make, owners):
        guard(owner.host, owner.port, owner.check)
        GUARDED[owner.host, owner.port] = owner


class NotOurs(ConnectionError):
    """Another process listens on a local database's port."""


class Owner(namedtuple('Owner', 'name host port pid_path directory option')):
    """The local database `name` of `directory`, which must be the process
    named in pid_path, listening at host:port, before the passwords kept
    in directory go there.

    What is checked is every socket a connection to host:port may reach
    (processes.listening): those bound to host itself, else to the
    wildcard address. A process listening on the port at another address
    (::1 when host is 127.0.0.1) gets no connection of ours, and is left
    alone: refusing for it would let any local user stop the site."""

    def pid(self):
        """That pid if it holds every socket a connection to host:port may
        reach, else None."""
        try:
            pid = int(files.read(self.pid_path).split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if holds(pid, self.port, self.host) else None

    def check(self):
        """NotOurs unless its own process listens there."""
        if self.pid() is not None:
            return
        pid = listener(self.port, self.host)
        who = ('process %d (%s)' % (pid, command_name(pid)) if pid
               else 'a process this user cannot see')
        raise NotOurs(
            '%s:%d is held by %s, not by the %s of %s: the passwords kept '
            'there are not sent to it. Stop that process, or give the %s '
            'another port, or give the address of your own with %s'
            % (self.host, self.port, who, self.name, self.directory,
               self.name, self.option))


class LocalDatabase:
    """A subclass sets name, option, host and port, and gives _prepare()
    (make its directories ready), _start(), pid_path (the pid file its
    process writes) and _take(pid) (manage that one)."""
    name = None
    option = None     # server.py's option to give an address of one's own

    def __init__(self, directory):
        self.directory = os.path.abspath(directory)
        self._lock = threading.Lock()   # start() and stop() one at a time
        self._stopping = False
        self._held = None    # server.lock while this object manages it

    def start(self):
        """Start and wait until ready (blocking: run it off the event
        loop); a stop() meanwhile ends the wait and the process."""
        with self._lock:
            self._stopping = False
            if not self._manage():
                raise RuntimeError('another server manages the %s in %s'
                                   % (self.name, self.directory))
            self._start()

    def restart(self):
        """start(), unless a stop() came first."""
        with self._lock:
            if self._stopping:
                raise RuntimeError('%s is being stopped' % self.name)
            self._start()

    def adopt(self):
        """Manage the instance running here, if no server does any more
        (its own was killed before it could stop it): True if adopted,
        then watched, restarted and stopped as if started here."""
        with self._lock:
            if not self._manage():
                return False
            pid = self._orphan()
            if pid is None:
                self._unmanage()
                return False
            self._stopping = False
            self._take(pid)
            log.info('%s (pid %d) in %s runs with no server managing it: '
                     'managed from now on', self.name, pid, self.directory)
            return True

    def _orphan(self):
        """The pid of an instance running here, or None."""
        return self.ours()

    @property
    def ownership(self):
        return Owner(self.name, self.host, self.port, self.pid_path,
                     self.directory, self.option)

    def ours(self):
        return self.ownership.pid()

    def check_listener(self):
        self.ownership.check()

    def guard(self):
        """From now on, check_listener() before each connection opened to
        it (data_interface.address.guard): after a crash, what listens on
        its port must be its own process again."""
        guard(self.host, self.port, self.ownership.check)
        GUARDED[self.host, self.port] = self.ownership

    def _manage(self):
        """Hold server.lock (False if another process does), with the
        directories ready."""
        if self._held is None:
            self._prepare()
            self._held = lock(os.path.join(self.directory, 'server.lock'))
        return self._held is not None

    def _unmanage(self):
        unlock(self._held)
        self._held = None

"""What a ceilings run does on each database it measures: one piece per
database (tarantool_db.py, postgres_db.py), named by the database's line of
runtime/databases/table.py (ceilings_class): the database layer, the drivers
timed alone, the HTTP layers' drivers, its addresses as server.py uses them,
and what it shows before and after a run."""
from .. import profile
from runtime.databases import table
from . import CALLS


class DatabaseCeilings:
    """A database's part of a ceilings run; `database` is its descriptor."""
    timed = ()          # the drivers timed alone, by their module (the layer)
    http_driver = None  # serve.py's --driver of the HTTP async layer
    fields = {}         # what the 'ceilings' record says of the database layer
    starts = 2          # servers started, for the guess: server.py, HTTP
    http_layers = 1     # HTTP layers run, for the guess

    def __init__(self, database):
        self.database = database
        self.name = database.name

    @property
    def holder(self):
        """The engine whose server.py starts (or finds) the database, as a
        run's engines do."""
        d = self.database.drivers[0]
        return 'aiohttp-%s-%s-uvloop' % (d.name, d.modes[0])

    def drivers(self):
        """{engine driver name: its driver-alone layer}."""
        return {d.name: d.modules[0] for d in self.database.drivers
                if d.modules[0] in self.timed}

    def guess(self, start, per, http):
        """Rough seconds of its layers, for the progress bar."""
        return start * self.starts + len(CALLS) * (
            per * (1 + len(self.timed)) + http * self.http_layers)

    def local_pid(self, address):
        """The pid of the database process at this address when it runs on
        this machine, else None (its CPU is not ours to read)."""
        host, port = self.host_port(address)
        if not host.startswith(('127.', 'localhost', '::1', '[::1]')):
            return None
        return profile.listener(int(port))

    def sync_driver(self, framework):
        """(serve.py's --driver, None) of the HTTP sync layer on
        `framework`, else (None, why not)."""
        return None, 'no synchronous %s driver is installed' % self.name

    # Each database's own:
    def addresses(self, s):
        """(the site's address, the owner's) as the holder's server.py uses
        them: given to bench.py, else the local database's."""
        raise NotImplementedError

    def host_port(self, address):
        raise NotImplementedError

    async def snapshot(self, address, owner, session=None):
        """{'stats': site_stats, ...}: what the database shows."""
        raise NotImplementedError

    def inside(self, ceilings):
        """The database layer: each call timed inside the database, added
        to `ceilings` (run.Ceilings)."""
        raise NotImplementedError


def measured():
    """The piece of each database a ceilings run measures, in the table's
    order."""
    return tuple(d.ceilings() for d in table.TABLE if d.ceilings_class)

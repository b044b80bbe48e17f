"""Tarantool's storage engines and read replicas as dimensions of a run
(bench.py --tarantool-engine memtx,vinyl --replicas N): each Tarantool
engine is served on each storage engine, and each Tarantool or PostgreSQL
engine with no replica and with N, in turns, its name tagged with what
differs ('aiohttp-tarantool-one (vinyl, 1 replica)'; before the
interpreter's '@3.12'). A run on memtx alone with no replicas, the
default, tags nothing."""
from runtime.settings import STORAGES

DEFAULT = ['memtx']


def tagged(storages):
    """Whether the names of a run carry their storage engine."""
    return list(storages) != DEFAULT


def label(name, storage, storages, replicas=0):
    """'aiohttp-tarantool-one' on vinyl with 1 replica ->
    'aiohttp-tarantool-one (vinyl, 1 replica)'."""
    parts = [storage] if storage and tagged(storages) else []
    if replicas:
        parts.append('%d replica%s' % (replicas, 's' if replicas > 1 else ''))
    return '%s (%s)' % (name, ', '.join(parts)) if parts else name


def _tags(name):
    base = name.partition('@')[0]
    return base.split(' (')[1].rstrip(')').split(', ') if ' (' in base else []


def untag(name):
    """'aiohttp-tarantool-one (vinyl)@3.12' -> 'aiohttp-tarantool-one@3.12'."""
    base, at, version = name.partition('@')
    return base.split(' (')[0] + at + version


def storage_of(name):
    """The storage engine a name is tagged with, or None."""
    found = [t for t in _tags(name) if t in STORAGES]
    return found[0] if found else None


def replicas_of(name):
    """The read replicas a name is tagged with (0 for none)."""
    found = [t for t in _tags(name) if t.endswith(('replica', 'replicas'))]
    return int(found[0].split()[0]) if found else 0


def retagged(name, tags):
    """The name with these tags instead of its own."""
    base, at, version = name.partition('@')
    plain = base.split(' (')[0]
    return plain + (' (%s)' % ', '.join(tags) if tags else '') + at + version


def on_memtx(name):
    """The name of the same engine served on memtx."""
    return retagged(name, ['memtx' if t == 'vinyl' else t
                           for t in _tags(name)])


def without_replicas(name):
    """The name of the same engine served with no replica."""
    return retagged(name, [t for t in _tags(name) if t in STORAGES])

"""Tarantool's storage engines as a dimension of a run (bench.py
--tarantool-engine memtx,vinyl): each Tarantool engine is served on each,
in turns, its name tagged with the storage engine ('aiohttp-tarantool-one
(vinyl)'; before the interpreter's '@3.12'). A run on memtx alone, the
default, tags nothing."""
DEFAULT = ['memtx']


def tagged(storages):
    """Whether the names of a run carry their storage engine."""
    return list(storages) != DEFAULT


def label(name, storage, storages):
    """'aiohttp-tarantool-one' on vinyl -> 'aiohttp-tarantool-one (vinyl)'."""
    return '%s (%s)' % (name, storage) if storage and tagged(storages) else name


def untag(name):
    """'aiohttp-tarantool-one (vinyl)@3.12' -> 'aiohttp-tarantool-one@3.12'."""
    base, at, version = name.partition('@')
    return base.split(' (')[0] + at + version


def storage_of(name):
    """The storage engine a name is tagged with, or None."""
    base = name.partition('@')[0]
    return base.split(' (')[1].rstrip(')') if ' (' in base else None

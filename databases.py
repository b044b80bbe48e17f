"""Open the data interface an engine needs: use the address given, or start
a local database under var/ when nothing answers at the default address,
and load the generated data set into an empty database."""
import logging
import os
import time

import dataset
import engines
from data_interface.address import DEFAULT_POSTGRES, DEFAULT_TARANTOOL, as_admin
from data_interface.tarantool.managed import ManagedTarantool, answers

log = logging.getLogger('databases')

ROOT = os.path.dirname(os.path.abspath(__file__))
VAR = os.path.join(ROOT, 'var')
IMAGES = os.path.join(VAR, 'img')


def write_images(packs):
    """Write the generated sticker images once per data set size."""
    stamp = os.path.join(IMAGES, '.complete-%d' % packs)
    if os.path.exists(stamp):
        return
    started = time.monotonic()
    written = dataset.write_images(IMAGES, packs=packs)
    open(stamp, 'w').close()
    log.info('wrote %d sticker images in %.1f s', written,
             time.monotonic() - started)


async def load_if_empty(data, admin_data, packs, dump=None):
    """Load the data set (a JSON dump, or the generated one) into an empty
    database; refuse a dump the database does not already hold."""
    if dump is None:
        write_images(packs)
        chosen = dataset.generate(packs=packs)
    else:
        chosen = dataset.read_dump(dump)
    stickers = (await data.stats()).stickers
    if stickers:
        if dump is not None:
            first = chosen.stickers[0]
            held = await data.sticker(first.pack, first.id)
            if held is None or held.image != first.image:
                raise RuntimeError(
                    'the database already holds %d other stickers: load %s '
                    'into an empty one (local databases live in %s)'
                    % (stickers, dump, VAR))
        return 0
    log.info('loading %d stickers in %d packs', len(chosen.stickers),
             len(chosen.packs))
    await admin_data.start()
    try:
        inserted = await admin_data.load(chosen)
    finally:
        await admin_data.close()
    log.info('loaded %d stickers', inserted)
    return inserted


def tarantool_driver(driver):
    """The DataInterface class of a Tarantool driver of engines.DRIVERS."""
    if driver == 'aiotarantool':
        from data_interface.tarantool.aiotarantool_data import AiotarantoolData
        return AiotarantoolData
    from data_interface.tarantool.asynctnt_data import TarantoolData
    return TarantoolData


class Databases:
    """Starts what the engine needs; stop() undoes what start() started."""

    def __init__(self, tarantool=None, packs=300, dump=None, postgres=None):
        self.tarantool_address = tarantool
        self.postgres_dsn = postgres
        self.packs = packs
        self.dump = dump
        self.managed = []

    def tarantool(self):
        """The Tarantool address to use, starting a local one if needed."""
        if self.tarantool_address is None:
            default = DEFAULT_TARANTOOL
            if not answers(default.host, default.port):
                server = ManagedTarantool(os.path.join(VAR, 'tarantool'),
                                          default.host, default.port)
                server.start()
                self.managed.append(server)
            self.tarantool_address = default
        return self.tarantool_address

    async def postgres(self):
        """The PostgreSQL DSN to use: the one given, a cluster answering to
        the default DSN, else the local one under var/ (started if needed)."""
        if self.postgres_dsn is None:
            from data_interface.postgres.asyncpg_data import can_connect
            from data_interface.postgres.managed import ManagedPostgres
            server = ManagedPostgres(os.path.join(VAR, 'postgres'))
            if server.running():
                self.postgres_dsn = server.dsn
            elif await can_connect(DEFAULT_POSTGRES):
                self.postgres_dsn = DEFAULT_POSTGRES
            else:
                server.start()
                self.managed.append(server)
                self.postgres_dsn = server.dsn
        return self.postgres_dsn

    async def open(self, engine):
        """A started-later DataInterface for the engine, with data loaded."""
        if engines.database(engine) == 'postgres':
            from data_interface.postgres.asyncpg_data import PostgresData
            dsn = await self.postgres()
            # The app's role owns the tables, so it loads them too.
            data, admin = PostgresData(dsn), PostgresData(dsn, min_size=1)
        else:
            Data = tarantool_driver(engine.driver)
            address = self.tarantool()
            data, admin = Data(address, engine.mode), Data(as_admin(address))
        await data.start()
        try:
            await load_if_empty(data, admin, self.packs, self.dump)
        finally:
            await data.close()
        return data

    def stop(self):
        while self.managed:
            self.managed.pop().stop()

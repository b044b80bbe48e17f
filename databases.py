"""Open the data interface an engine needs: use the address given, or start
a local database under var/ when nothing answers at the default address,
and load the generated data set into an empty database."""
import logging
import os
import time

import dataset
from data_interface.address import DEFAULT_TARANTOOL, as_admin
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


async def load_if_empty(data, admin_data, packs):
    """Load the generated data set unless stickers are already there."""
    write_images(packs)
    if (await data.stats()).stickers:
        return 0
    log.info('loading the generated data set (%d packs)', packs)
    await admin_data.start()
    try:
        inserted = await admin_data.load(dataset.generate(packs=packs))
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

    def __init__(self, tarantool=None, packs=300):
        self.tarantool_address = tarantool
        self.packs = packs
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

    async def open(self, engine):
        """A started-later DataInterface for the engine, with data loaded."""
        Data = tarantool_driver(engine.driver)
        address = self.tarantool()
        data = Data(address, engine.mode)
        await data.start()
        try:
            await load_if_empty(data, Data(as_admin(address)), self.packs)
        finally:
            await data.close()
        return data

    def stop(self):
        while self.managed:
            self.managed.pop().stop()

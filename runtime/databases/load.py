"""The data set loaded into an empty database: the generated one (its
pictures written once under var/img), or a JSON dump."""
import asyncio
import logging
import os
import time

import dataset

log = logging.getLogger('databases')


def write_images(images, packs):
    """Write the generated sticker images once per data set size."""
    stamp = os.path.join(images, '.complete-%d' % packs)
    if os.path.exists(stamp):
        return
    started = time.monotonic()
    written = dataset.write_images(images, packs=packs)
    open(stamp, 'w').close()
    log.info('wrote %d sticker images in %.1f s', written,
             time.monotonic() - started)


def data_set(settings):
    """The data set of the settings: their dump, else the generated one."""
    if settings.dump is None:
        return dataset.generate(settings.packs)
    return dataset.read_dump(settings.dump)


async def load_if_empty(data, admin_data, settings):
    """Load the data set (a JSON dump, or the generated one) into an empty
    database; refuse a dump the database does not already hold."""
    dump = settings.dump
    loop = asyncio.get_event_loop()   # files and CPU work off the loop
    if dump is None:
        await loop.run_in_executor(None, write_images, settings.images,
                                   settings.packs)
    chosen = await loop.run_in_executor(None, data_set, settings)
    stickers = (await data.stats()).stickers
    if stickers:
        if dump is not None:
            first = chosen.stickers[0]
            held = await data.sticker(first.pack, first.id)
            if held is None or held.image != first.image:
                raise RuntimeError(
                    'the database already holds %d other stickers: load %s '
                    'into an empty one (local databases live in %s)'
                    % (stickers, dump, settings.var))
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


async def forget_visitors(admin_data):
    """Remove every session and ballot the database holds (--forget-visitors),
    as its loader; logs how many."""
    await admin_data.start()
    try:
        ballots, sessions = await admin_data.forget_visitors()
    finally:
        await admin_data.close()
    log.info('forgot %d sessions and %d ballots', sessions, ballots)

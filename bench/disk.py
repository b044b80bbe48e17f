"""The disk's write rate where the local databases keep their files
(settings.var), taken at the start of a run: blocks written and each
fsync'd for about a second, as a WAL or an append-only file is. advise
holds a site's bytes written per request against it."""
import os
import time

BLOCK = 4 * 1024 * 1024
SECONDS = 1.0
MOST = 1024 * 1024 * 1024


def write_rate(directory, seconds=SECONDS, block=BLOCK):
    """{'bytes_per_s', 'fsyncs_per_s', 'block', 'seconds', 'directory'}
    of block-sized writes each fsync'd, or {'error'} when it cannot write
    there."""
    path = os.path.join(directory, '.disk-rate-%d' % os.getpid())
    data = os.urandom(block)
    n, took = 0, 0.0
    try:
        os.makedirs(directory, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            start = time.monotonic()
            while took < seconds and n * block < MOST:
                os.write(fd, data)
                os.fsync(fd)
                n += 1
                took = time.monotonic() - start
        finally:
            os.close(fd)
            os.unlink(path)
    except OSError as e:
        return {'error': str(e), 'directory': directory}
    return {'bytes_per_s': round(n * block / took), 'fsyncs_per_s': round(n / took, 1),
            'block': block, 'seconds': round(took, 3), 'directory': directory}

"""A ceilings run on Tarantool: inside it, the stored functions called in a
loop of fibers (fibers.lua, in a scratch instance of instance.lua holding
the same data set); asynctnt and aiotarantool alone; HTTP async over
asynctnt, and sync over the blocking connector on japronto."""
import json
import os
import secrets
import shutil
import subprocess
import tempfile

import dataset
from runtime.databases.tarantool import INSTANCE_LUA
from runtime.processes import free_port
from runtime.settings import from_environment
from . import BALLOT_TTL, CALLS, RANKED_COUNT, SKIP_CALL, VISIT_BATCH
from .databases import DatabaseCeilings

FIBERS_LUA = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          'fibers.lua')
FIBERS = 100            # fibers calling in a loop


class TarantoolCeilings(DatabaseCeilings):
    timed = ('asynctnt', 'aiotarantool')
    http_driver = 'asynctnt'
    fields = {'fibers': FIBERS}
    starts, http_layers = 3, 2

    def sync_driver(self, framework):
        if framework == 'japronto':
            return 'blocking', None
        return None, 'no synchronous driver for %s' % framework

    def addresses(self, s):
        given = s.server_env.get(self.database.environment)
        settings = from_environment()
        a = (self.database.parse(given) if given else self.database.managed(
            self.database.directory(settings), settings=settings
        ).found_address(settings.app_user))
        text = self.database.url(a)
        return text, text

    def host_port(self, address):
        return address.rsplit('@', 1)[-1].rsplit(':', 1)

    async def snapshot(self, address, owner, session=None):
        from .calls import data_of
        data = data_of(self.http_driver, address)
        await data.start()
        try:
            return {'stats': list(await data.stats())}
        finally:
            await data.close()

    def inside(self, ceilings):
        s = ceilings.s
        ceilings.m.progress.show('ceilings · %s · fibers inside it'
                                 % self.name)
        log = os.path.join(ceilings.logs, 'ceilings-fibers.log')
        try:
            found = self.fibers(CALLS, s.duration, ceilings.packs(),
                                s.pin['server'], log)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
            return ceilings.skip(self.name, 'database', str(e), failed=True)
        finally:
            ceilings.m.progress.advance(len(CALLS) * (s.duration + 1))
        for call in CALLS:
            r = found.get(call)
            if r is None:
                ceilings.skip(self.name, 'database', 'fibers.lua did not run '
                              '%s' % call, failed=True)
                continue
            ceilings.add({'database': self.name, 'layer': 'database',
                          'call': call, 'done': r['done'], 'bad': r['bad'],
                          'seconds': r['seconds'], 'before': r['before'],
                          'after': r['after'],
                          'evidence': {'max_ballots': r['max_ballots']},
                          'database_us': r['cpu_s'] * 1e6 / max(r['done'], 1),
                          'how': '%d fibers in a scratch Tarantool' % FIBERS})

    def fibers(self, calls, seconds, packs, pin, log):
        """{call: record} of fibers.lua in a scratch instance, pinned like
        the engines' databases; RuntimeError if it fails."""
        binary = shutil.which(self.database.server_binary)
        if binary is None:
            raise RuntimeError('%s is not installed'
                               % self.database.server_binary)
        directory = tempfile.mkdtemp(prefix='stickers-ceilings-')
        try:
            chosen = dataset.generate(packs=packs)
            path = os.path.join(directory, 'data.json')
            with open(path, 'w') as f:
                json.dump({'packs': [list(p) for p in chosen.packs],
                           'stickers': [list(s) for s in chosen.stickers]}, f)
            env = dict(
                os.environ, TNT_DIR=directory, TNT_LOG=log,
                TNT_LISTEN='127.0.0.1:%d' % free_port(),
                TNT_APP_PASSWORD=secrets.token_hex(16),
                TNT_ADMIN_PASSWORD=secrets.token_hex(16),
                CEILINGS_INSTANCE=INSTANCE_LUA, CEILINGS_DATA=path,
                CEILINGS_CALLS=','.join(calls), CEILINGS_SECONDS=str(seconds),
                CEILINGS_FIBERS=str(FIBERS),
                CEILINGS_RANKED=str(RANKED_COUNT),
                CEILINGS_BATCH=str(VISIT_BATCH), CEILINGS_TTL=str(BALLOT_TTL),
                CEILINGS_SKIP=os.environ.get(SKIP_CALL, ''))
            done = subprocess.run(
                list(pin) + [binary, FIBERS_LUA], env=env, cwd=directory,
                capture_output=True, text=True,
                timeout=len(calls) * (seconds + 30) + 60)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        found = {}
        for line in done.stdout.splitlines():
            if line.startswith('{'):
                r = json.loads(line)
                found[r['call']] = r
        if done.returncode != 0 or not found:
            raise RuntimeError('fibers.lua exited with %d: %s' % (
                done.returncode, (done.stderr or done.stdout)[-500:]))
        return found

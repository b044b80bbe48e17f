"""DataInterface on Tarantool through asynctnt: every operation is one call
of a stored function of app.lua."""
import asynctnt
from asynctnt.exceptions import TarantoolDatabaseError, TarantoolError

from .. import DataInterface, DataUnavailable, Pack, Stats, Sticker

LOAD_BATCH = 2000


class TarantoolData(DataInterface):
    """mode 'one': one connection shared by all requests, reconnecting by
    itself; mode 'multi': a connection opened and closed per operation."""

    sweeps_itself = True    # app.lua's expiry fiber

    def __init__(self, address, mode='one'):
        if mode not in ('one', 'multi'):
            raise ValueError('mode must be one or multi, not %r' % mode)
        self.address = address
        self.mode = mode
        self._conn = None

    def _connection(self):
        a = self.address
        return asynctnt.Connection(
            host=a.host, port=a.port, username=a.user, password=a.password,
            fetch_schema=False, auto_refetch_schema=False,
            connect_timeout=2.0, request_timeout=10.0,
            reconnect_timeout=0.3 if self.mode == 'one' else 0,
            ping_timeout=0)

    async def start(self):
        conn = self._connection()
        try:
            await conn.connect()
        except (OSError, TarantoolError) as e:
            raise DataUnavailable('cannot connect to Tarantool at %s: %s'
                                  % (self.address, e)) from e
        if self.mode == 'one':
            self._conn = conn
        else:
            await conn.disconnect()

    async def close(self):
        if self._conn is not None:
            await self._conn.disconnect()
            self._conn = None

    async def _call(self, name, args):
        try:
            if self.mode == 'one':
                response = await self._conn.call(name, args)
            else:
                conn = self._connection()
                await conn.connect()
                try:
                    response = await conn.call(name, args)
                finally:
                    await conn.disconnect()
        except TarantoolDatabaseError:
            raise
        except (OSError, TarantoolError) as e:
            raise DataUnavailable('Tarantool: %s' % e) from e
        return response.body[0] if response.body else None

    async def sticker_pair(self, visit, tokens, ttl):
        rows = await self._call('sticker_pair', [
            visit.session, visit.ip, visit.user_agent,
            tokens[0], tokens[1], ttl])
        return [Sticker(*row) for row in rows]

    async def cast_vote(self, session, win_token, lose_token):
        return await self._call('cast_vote', [session, win_token, lose_token])

    async def top_stickers(self, visit, count):
        rows = await self._call('top_stickers', [
            visit.session, visit.ip, visit.user_agent, count])
        return [Sticker(*row) for row in rows]

    async def bottom_stickers(self, visit, count):
        rows = await self._call('bottom_stickers', [
            visit.session, visit.ip, visit.user_agent, count])
        return [Sticker(*row) for row in rows]

    async def stats(self):
        return Stats(*await self._call('site_stats', []))

    async def packs(self):
        return [Pack(*row) for row in await self._call('list_packs', [])]

    async def pack(self, name):
        row = await self._call('pack_stickers', [name])
        if row is None:
            return None
        return Pack(row[0], row[1], [Sticker(*s) for s in row[2]])

    async def sticker(self, pack, sticker_id):
        row = await self._call('get_sticker', [pack, sticker_id])
        return None if row is None else Sticker(*row)

    async def expire(self, session_ttl, max_sessions, max_ballots):
        return tuple(await self._call(
            'expire', [session_ttl, max_sessions, max_ballots]))

    async def load(self, dataset):
        packs = [list(p) for p in dataset.packs]
        inserted = 0
        for i in range(0, len(dataset.stickers), LOAD_BATCH):
            rows = [list(s) for s in dataset.stickers[i:i + LOAD_BATCH]]
            inserted += await self._call('load_stickers', [packs, rows])
            packs = []
        return inserted

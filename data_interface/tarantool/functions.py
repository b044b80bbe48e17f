"""The page operations as calls of app.lua's stored functions, shared by the
Tarantool drivers: a driver adds start, close and _call."""
from .. import DataInterface, Pack, Stats, Sticker

LOAD_BATCH = 2000


class AppFunctions(DataInterface):
    sweeps_itself = True    # app.lua's expiry fiber

    async def _call(self, name, args):
        """The first value the stored function returns (None for none).
        DataUnavailable when Tarantool cannot be reached or the call fails
        there (out of memory, a refused argument, no privilege): pages
        validate what visitors send, so no failure there is theirs."""
        raise NotImplementedError

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

    async def load(self, dataset):
        packs = [list(p) for p in dataset.packs]
        inserted = 0
        for i in range(0, len(dataset.stickers), LOAD_BATCH):
            rows = [list(s) for s in dataset.stickers[i:i + LOAD_BATCH]]
            inserted += await self._call('load_stickers', [packs, rows])
            packs = []
        return inserted

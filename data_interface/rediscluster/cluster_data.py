"""DataInterface on a Redis Cluster through redis-py's asyncio RedisCluster.

Per-visitor data (a session, its visits, its ballots, its votes) lives in
one of BUCKETS hash-tagged buckets chosen from the session; the catalogue
and the rankings in one more group, {c}, which every vote reaches. Each
call is one FCALL on the keys of one slot (cluster.lua), routed here by its
key (no COMMAND GETKEYS). Nothing is retried: a vote sent twice would be
refused the second time, so a call that fails answers 503 and the caller
decides (docs/databases.md, Redis Cluster). The votes a server counts are
applied to the rankings in batches, one call and one WAIT at a time, and
the catalogue is read on {c}'s replicas for a while after a batch's WAIT
said they have every vote answered so far."""
import asyncio
import logging
import os
import re
import zlib

from redis.asyncio.cluster import ClusterNode, NodesManager, RedisCluster
from redis.asyncio.connection import async_timeout
from redis.asyncio.retry import Retry
from redis._parsers.commands import AsyncCommandsParser
from redis.backoff import NoBackoff
from redis.exceptions import (AskError, ClusterDownError, MovedError,
                              NoPermissionError, RedisClusterException,
                              RedisError, ResponseError, TryAgainError)

from .. import (KEEPALIVE, MAX_VISITS, REFUSED, DataInterface,
                DataUnavailable, NotSetUp, PartlyWritten, Stats, VoteOutcome,
                VoteUnknown, new_tokens, pack_of, packs_of, sticker_of,
                stickers_of)
from ..address import no_password
from ..redis.redis_data import Connection, argument, caps

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       'cluster.lua'), encoding='utf-8') as _f:
    LIBRARY = _f.read()
VERSION = re.search(r"^local VERSION = '(\w+)'", LIBRARY, re.M).group(1)

log = logging.getLogger('rediscluster')

# Fixed, so that a reshard moves whole buckets (each is one slot).
BUCKETS = 64
CATALOGUE = 'st:{c}:'
READ_ONLY = ('pick_pair', 'judge_vote', 'applied_marks', 'bucket_stats',
             'top_stickers', 'bottom_stickers', 'catalogue_stats',
             'list_packs', 'pack_stickers', 'get_sticker', 'limits',
             'stickers_version')
CATALOGUE_READS = ('pick_pair', 'top_stickers', 'bottom_stickers',
                   'catalogue_stats', 'list_packs', 'pack_stickers',
                   'get_sticker')
EXPIRE_BATCH = 200
# A vote's bucket write is applied to the rankings once a replica of its
# shard has it: WAIT for one, this many milliseconds at most (else the
# sweep applies it once a replica has it). A batch of applies waits as
# long for every replica of {c}.
WAIT_MS = 100
# Votes applied in one call at most (cluster.lua's MAX_LOG).
APPLY_BATCH = 1000
# Seconds between a server's calls that apply votes, at least: under load
# a call carries the votes of this long, whatever the server's rate (the
# rankings' shard pays per call, then per vote); a vote whose call must
# wait for it is answered before it is applied (docs/databases.md).
APPLY_EVERY = 0.25
# Seconds a visit batch's call in a bucket waits for another call to that
# bucket's primary, to go in its write (under load a visit then costs no
# write and no reply to wait for of its own); after that it goes alone.
CARRY_WAIT = 0.005
# Errors of a command that did not run: the regular path follows them.
NOT_RUN = (MovedError, AskError, TryAgainError, ClusterDownError)
# AttributeError: redis-py 8.1 writes to a connection that a concurrent
# reinitialisation (after a node died) has just closed ('NoneType' object
# has no attribute 'writelines'); the next call connects anew.
UNAVAILABLE = (RedisError, RedisClusterException, OSError,
               asyncio.TimeoutError, AttributeError)
UUID = re.compile(rb'^[0-9a-f-]{36}$')
# Calls at once of a call on every bucket (the sweep, /about's sums).
FAN_OUT = 8
# Seconds a read of the shards' members (CLUSTER SHARDS) is used.
SHARDS_EVERY = 1.0
# A ballot token's first character names its pair's bucket (its index).
ALPHABET = ('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
            '0123456789-_')
assert len(ALPHABET) == BUCKETS


class NotSent(DataUnavailable):
    """A call that failed before it was written: it did not run."""


def bucket_of(session):
    """The bucket of a session (any text: a bad one is refused later)."""
    return zlib.crc32(str(session).encode('utf-8', 'replace')) % BUCKETS


async def few_at_once(calls):
    """The results of `calls` (coroutines), FAN_OUT of them at a time: a
    call on every bucket opens no more connections than that at once
    (each is checked before its password goes, which takes a while)."""
    turns = asyncio.Semaphore(FAN_OUT)

    async def one(call):
        try:
            async with turns:
                return await call
        finally:
            call.close()    # one never started, when another failed
    return await asyncio.gather(*[one(c) for c in calls])


def bucket(n):
    return 'st:{b%d}:' % n


def packed(commands):
    """Commands (tuples of bytes, str and int) in Redis's protocol, one
    buffer: what redis-py's pack_commands makes, in some 40 % of its time
    (a vote's call and its WAIT: 3.3 µs against 8.3)."""
    parts = []
    for command in commands:
        parts.append(b'*%d\r\n' % len(command))
        for a in command:
            if not isinstance(a, bytes):
                a = str(a).encode()
            parts.append(b'$%d\r\n%b\r\n' % (len(a), a))
    return b''.join(parts)


def hand_on(carried, replies):
    """Each carried call's reply (or error) to its future, if it waits."""
    for (_, future), reply in zip(carried, replies):
        if not future.done():
            if isinstance(reply, DataUnavailable):
                future.set_exception(reply)
            else:
                future.set_result(reply)


def token_bucket(token):
    """The bucket a ballot token names, or None."""
    n = ALPHABET.find(token[:1]) if isinstance(token, str) and token else -1
    return n if n >= 0 else None


def share(total, n):
    """Bucket n's share of a cap of `total`: the shares add up to it."""
    return total // BUCKETS + (1 if n < total % BUCKETS else 0)


def member(sticker_id):
    return '%016d' % sticker_id


def declared(name, key, args):
    """Every key a call of `name` uses, `key` (its group's) first. Declared,
    so that while a slot migrates Redis redirects the call (ASK, or
    TRYAGAIN while its keys are split) instead of running it where some of
    its keys have already gone. (Not declared: what a call finds only by
    reading, the oldest sessions or ballots it drops at a cap and a pack's
    title in list_packs: a drop that misses one leaves it to the sweep or
    its TTL, a title may be missing from one answer; nor a bucket's limits,
    which the app's account may only read (a write function's keys must be
    writable): a call that misses them uses the defaults.)"""
    prefix = key[:key.index('}:') + 2]
    more = MORE_KEYS.get(name)
    return [key] + [prefix + k for k in more(args)] if more else [key]


def _tokens(args):
    return ['b:%s' % t for t in args[1:3]]


# Each function's keys beyond its first, from its arguments (declared).
MORE_KEYS = {
    'record_visits': lambda a: ['counters'] + [
        's:%s' % a[i] for i in range(0, len(a), 3)],
    'issue_ballots': _tokens,
    'cast_vote': lambda a: ['counters', 'log'] + _tokens(a),
    'judge_vote': _tokens,
    'expire': lambda a: ['log', 'swept', 'sessions', 'ballots'],
    'bucket_stats': lambda a: ['sessions', 'ballots'],
    'apply_votes': lambda a: ['stickers', 'ratings', 'early:%s' % a[0]]
    if a else [],
    'pick_pair': lambda a: ['stickers'],
    'top_stickers': lambda a: ['stickers'],
    'bottom_stickers': lambda a: ['stickers'],
    'get_sticker': lambda a: ['stickers'],
    'catalogue_stats': lambda a: ['packs'],
    'list_packs': lambda a: ['packs'],
    'pack_stickers': lambda a: ['stickers', 'pack:%s' % a[0],
                                'pack_ids:%s' % a[0]] if a else [],
    'apply_many': lambda a: ['stickers', 'ratings'] + [
        'early:%s' % b for b in sorted(set(a[::4]))],
}


class Nodes(NodesManager):
    """redis-py's slot map, read whole again after a MOVED."""
    __slots__ = ()

    async def move_slot(self, e):
        await super().move_slot(e)
        await self.initialize()


class Commands(AsyncCommandsParser):
    """redis-py's table of commands (COMMAND), read once, not again at
    each read of the slot map (a failover reads it often)."""
    __slots__ = ()

    async def initialize(self, node=None):
        if node:
            self.node = node
        if not self.commands:
            await super().initialize(node)


class Cluster(RedisCluster):
    """Finds an FCALL's slot from its first key, as redis-py does for EVAL,
    instead of asking a node (COMMAND GETKEYS) at each redirect; reads the
    whole slot map again after a MOVED (redis-py patches the one slot, and
    after a reshard lists no replica for it)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.nodes_manager.__class__ = Nodes
        self.commands_parser.__class__ = Commands

    async def _determine_slot(self, command, *args):
        if command.upper() in ('FCALL', 'FCALL_RO') and len(args) > 2 \
                and str(args[1]) != '0':
            return self.keyslot(args[2])
        return await super()._determine_slot(command, *args)


class ClusterData(DataInterface):
    """mode 'pool': up to max_size connections per node."""

    sweeps_itself = False

    def __init__(self, address, mode='pool', max_size=16, timeout=3.0,
                 read_lag=1.0, apply_every=APPLY_EVERY, carry_wait=CARRY_WAIT):
        """read_lag: seconds {c}'s replicas take reads after a WAIT said
        they had every vote applied (settings.replica_lag); apply_every:
        APPLY_EVERY; carry_wait: CARRY_WAIT."""
        if mode != 'pool':
            raise ValueError('mode must be pool, not %r' % mode)
        self.address = address
        self.mode = mode
        self.max_size = max_size
        self.timeout = timeout
        self.read_lag = read_lag
        self.apply_every = apply_every
        self.carry_wait = carry_wait
        self._client = None
        # Votes answered before a replica confirmed them (WAIT timed out):
        # a failover of their shard may lose them.
        self.unreplicated = 0

    def __str__(self):
        return str(self.address)

    async def start(self):
        a = self.address
        if a.password is None:
            raise DataUnavailable(no_password('Redis Cluster', a))
        nodes = [ClusterNode(*seed.rsplit(':', 1)) for seed in a.seeds]
        client = Cluster(
            startup_nodes=nodes, username=a.user, password=a.password,
            decode_responses=True, require_full_coverage=False,
            # No retry: a write is never sent twice (module docstring).
            retry=Retry(NoBackoff(), 0), max_connections=self.max_size,
            socket_timeout=self.timeout, socket_connect_timeout=2.0,
            socket_keepalive=True, socket_keepalive_options=KEEPALIVE)
        # The project's connection checks who listens before its password
        # goes there (data_interface.address.guard).
        client.connection_kwargs['connection_class'] = Connection
        # Every connection READONLY, so that {c}'s replicas answer its
        # reads (a primary ignores it).
        client.connection_kwargs['redis_connect_func'] = client.on_connect
        for node in client.startup_nodes:
            node.connection_class = Connection
            node.connection_kwargs['redis_connect_func'] = client.on_connect
        self._client = client
        self._turns = {}        # node's name -> its turns (_take_turn)
        self._slots = {}        # a key's hash tag -> its slot
        # {c}'s replicas that had every applied batch at the last WAIT
        # (names), and when: the catalogue's reads go there for read_lag
        # seconds, else to its primary.
        self._readers = ()
        self._readers_at = 0.0
        self._shards = None     # (when, the read of CLUSTER SHARDS)
        self._marks = None      # (when, the read of the applied marks)
        self._voted_on = {}     # bucket -> its primary at its last vote
        self._turn = 0
        self._pending = []      # (bucket, (seq, win, lose), future)
        self._applier = None
        self._apply_failed = False
        self._next_apply = 0.0  # when the next apply_many may go
        self._closing = asyncio.Event()
        # visit calls waiting for a write to their node: {node's name:
        # (node, [(command, future of its reply)], the timer that sends
        # them alone)}
        self._carried = {}
        self.batches = 0        # apply_many calls made
        self.answered_first = 0     # votes answered before their apply
        try:
            await self._execute(('CLUSTER', 'SLOTS'), client.initialize)
            await self._check_library()
        except BaseException:
            await self.close()
            raise

    async def _check_library(self):
        """Load cluster.lua on every primary that lacks this version (the
        loader's account may, the app's may not: NotSetUp)."""
        for node in self._client.get_primaries():
            try:
                if await self._node(node, 'FCALL_RO', 'stickers_version',
                                    0) == VERSION:
                    continue
            except DataUnavailable as e:
                if 'Function not found' not in str(e):
                    raise
            try:
                await self._node(node, 'FUNCTION', 'LOAD', 'REPLACE', LIBRARY)
            except DataUnavailable as e:
                if not isinstance(e.__cause__, NoPermissionError):
                    raise
                raise NotSetUp(
                    'Redis Cluster node %s has not the functions of '
                    'cluster.lua version %s, and this account cannot load '
                    "them (%s): start once with the loader's account"
                    % (node.name, VERSION, e)) from e

    async def close(self):
        if getattr(self, '_closing', None) is not None:
            self._closing.set()     # the votes waiting go now
            for node, _, _ in list(self._carried.values()):
                await self._send_carried(node)
        if self._applier is not None:
            # the votes counted so far: applied, or left to a sweep
            await asyncio.wait([self._applier], timeout=self.timeout)
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def _take_turn(self, node, name):
        """One of `node`'s max_size turns (its connections): a call waits
        here for one, not in redis-py, which fails a call past them. Each
        node has its own, so a dead node's calls hold no other's turns."""
        turns = self._turns.get(node.name)
        if turns is None:
            turns = self._turns[node.name] = asyncio.Semaphore(self.max_size)
        if not turns.locked():
            return await turns.acquire()
        try:
            await asyncio.wait_for(turns.acquire(), self.timeout)
        except asyncio.TimeoutError:
            raise DataUnavailable('Redis Cluster at %s: %s: no connection '
                                  'free at %s in %g s'
                                  % (self, name, node.name, self.timeout))

    def _give_turn(self, node):
        self._turns[node.name].release()

    async def _execute(self, what, function, *args, node=None, **kwargs):
        """redis-py's own path (its redirects followed), on `node`'s turns,
        or those of the primary of the call's key."""
        name = what[1] if what[0].startswith('FCALL') else what[0]
        if node is None and what[0].startswith('FCALL') and len(what) > 3:
            node = (self._client.nodes_manager.slots_cache.get(
                self._client.keyslot(what[3])) or [None])[0]
        if node is not None:
            await self._take_turn(node, name)
        try:
            return await function(*args, **kwargs)
        except UNAVAILABLE as e:
            raise DataUnavailable('Redis Cluster at %s: %s: %s' % (
                self, name, e)) from e
        finally:
            if node is not None:
                self._give_turn(node)

    async def _node(self, node, *args):
        return await self._execute(args, self._client.execute_command,
                                   *args, target_nodes=node, node=node)

    def _slot(self, key):
        """The slot of a key, by its hash tag (one of 65 here)."""
        tag = key[:key.find('}') + 1]
        slot = self._slots.get(tag)
        if slot is None:
            slot = self._slots[tag] = self._client.keyslot(key)
        return slot

    async def _shard(self, key):
        """[primary, replicas...] of key's slot in the client's map, read
        again first if a failed call asked for it; [] if none.
        DataUnavailable once closed (a batch still applying when close()
        stopped waiting for it is left to the sweep)."""
        client = self._client
        if client is None:
            raise DataUnavailable('Redis Cluster at %s: closed' % self)
        if client._initialize:
            try:
                await client.initialize()
            except UNAVAILABLE as e:
                raise DataUnavailable('Redis Cluster at %s: the slot map: '
                                      '%s' % (self, e)) from e
        return client.nodes_manager.slots_cache.get(self._slot(key)) or []

    async def _direct(self, node, commands):
        """The replies to `commands`, written at once on one of `node`'s
        connections (an error reply in its place), without redis-py's
        routing. DataUnavailable if nothing was sent; VoteUnknown once sent
        and the answer lost: it may have run. A lost connection has the
        slot map read again and the node's idle connections closed, no
        other node's. The visit calls waiting for a write to the node go
        in this one (_visit_call), their replies to their futures."""
        name = commands[0][1] if commands else 'record_visits'
        await self._take_turn(node, name)
        conn = node.acquire_connection()
        sent, carried, replies = False, (), []
        try:
            if conn.should_reconnect():
                await conn.disconnect()
            if not conn.is_connected:
                await conn.connect()
            carried = self._take_carried(node)
            commands = list(commands) + [c for c, _ in carried]
            # Written and read here, one timer for all: redis-py's
            # send_packed_command starts a task per write (wait_for).
            try:
                conn._writer.write(packed(commands))
            except RuntimeError as e:   # uvloop: the handler is closed
                raise ConnectionError('connection closed: %s' % e) from e
            sent = True
            async with async_timeout(self.timeout):
                await conn._writer.drain()
                for _ in commands:
                    replies.append(await conn._parser.read_response())
        except BaseException as e:
            if isinstance(e, asyncio.CancelledError) and carried and sent:
                # the visits it carried are not the caller's to give up
                await self._read_rest(conn, replies, len(commands), carried)
                raise
            # Replies may be left unread: this connection is not reused.
            await conn.disconnect()
            error = (VoteUnknown if sent else NotSent)(
                'Redis Cluster at %s: %s: %s' % (self, name,
                                                 str(e) or type(e).__name__))
            hand_on(carried, [error] * len(carried))
            if isinstance(e, UNAVAILABLE):
                self._client._initialize = True
                await node.disconnect_free_connections()
                raise error from e
            raise
        finally:
            node.release(conn)
            self._give_turn(node)
        if carried:
            hand_on(carried, replies[-len(carried):])
            del replies[-len(carried):]
        return replies

    async def _read_rest(self, conn, replies, count, carried):
        """After a call was cancelled once its write went: its replies read
        on to `count` (should that fail, the connection is closed and the
        rest lost), the carried calls' handed on."""
        try:
            async with async_timeout(self.timeout):
                while len(replies) < count:
                    replies.append(await conn._parser.read_response())
        except BaseException as e:
            await conn.disconnect()
            error = VoteUnknown('Redis Cluster at %s: record_visits: %s'
                                % (self, str(e) or type(e).__name__))
            replies = [error] * count
        hand_on(carried, replies[-len(carried):])

    def _take_carried(self, node):
        """The visit calls waiting for a write to node, taken."""
        if node.name not in self._carried:
            return ()
        _, carried, timer = self._carried.pop(node.name)
        timer.cancel()
        return carried

    async def _send_carried(self, node):
        """The visit calls waiting for node, written alone: their futures
        get the replies, or the error (also when none could be written)."""
        if node.name in self._carried:
            try:
                await self._direct(node, [])
            except DataUnavailable as e:
                carried = self._take_carried(node)
                hand_on(carried, [e] * len(carried))

    async def _visit_call(self, key, flat):
        """record_visits in the bucket of key: its call goes in the write
        of the next call to the bucket's primary, or alone after
        carry_wait."""
        shard = await self._shard(key)
        if not shard or not self.carry_wait or self._closing.is_set():
            return await self._fcall('record_visits', key, flat)
        command = self._command('record_visits', key, flat)
        node, loop = shard[0], asyncio.get_event_loop()
        if node.name not in self._carried:
            self._carried[node.name] = (node, [], loop.call_later(
                self.carry_wait, lambda: asyncio.ensure_future(
                    self._send_carried(node))))
        future = loop.create_future()
        self._carried[node.name][1].append((command, future))
        return await self._followed(command, await future)

    def _settled(self, command, reply):
        """An FCALL's reply, or DataUnavailable for an error reply (the
        slot map read again after one of a call that did not run)."""
        if isinstance(reply, ResponseError):
            if isinstance(reply, NOT_RUN):
                self._client._initialize = True
            raise DataUnavailable('Redis Cluster at %s: %s: %s'
                                  % (self, command[1], reply)) from reply
        return reply

    def _command(self, name, key, args):
        keys = declared(name, key, args)
        return (('FCALL_RO' if name in READ_ONLY else 'FCALL', name,
                 len(keys)) + tuple(argument(k) for k in keys)
                + tuple(argument(a) for a in args))

    async def _fcall(self, name, key, args=()):
        """One FCALL on the primary of its key's slot; one that did not
        run for a redirect (MOVED, ASK, TRYAGAIN) is sent again the way
        redis-py follows them. CLUSTERDOWN closes no connection."""
        command = self._command(name, key, args)
        shard = await self._shard(key)
        if shard:
            return await self._followed(
                command, (await self._direct(shard[0], [command]))[0])
        return await self._execute(command, self._client.execute_command,
                                   *command)

    async def _followed(self, command, reply):
        """A direct call's reply settled, or, where it did not run for a
        redirect, the call sent again the way redis-py follows them."""
        if not isinstance(reply, NOT_RUN) or isinstance(
                reply, ClusterDownError):
            return self._settled(command, reply)
        self._client._initialize = True
        return await self._execute(command, self._client.execute_command,
                                   *command)

    async def _fcall_acked(self, name, key, args, every=False, again=True):
        """(the FCALL's result, whether its shard's replicas have it, and
        with every the names of those that do), with WAIT sent right after
        it on the same connection: for one replica, or with every for each
        one online. Who is in the shard comes from the cluster (CLUSTER
        SHARDS), not from the client's slot map, which may list no replica:
        a write counts as replicated without a WAIT only where the cluster
        lists no node but the primary (no failover can lose it). A call the
        node did not run (a redirect, a failover) is sent once more once
        the map is read again, then the regular way, unconfirmed. Nothing
        is sent twice."""
        client = self._client
        shard = await self._shard(key)
        members = shard and (await self._members(shard[0])).get(
            shard[0].name)
        if not shard or (members is not None and not members[0]):
            return await self._sent(name, key, args), bool(shard), ()
        if members is None:     # CLUSTER SHARDS unread: the map's
            members = [[n.name for n in shard[1:]]] * 2
        wanted = len(members[1]) if every else 1
        if wanted < 1:          # none online
            return await self._sent(name, key, args), False, ()
        result, replicas = await self._direct(
            shard[0], [self._command(name, key, args), ('WAIT', wanted,
                                                         WAIT_MS)])
        if isinstance(result, NOT_RUN):
            client._initialize = True
            if again:
                return await self._fcall_acked(name, key, args, every, False)
            return await self._sent(name, key, args), False, ()
        if isinstance(result, ResponseError):
            raise DataUnavailable('Redis Cluster at %s: %s: %s'
                                  % (self, name, result)) from result
        replicated = isinstance(replicas, int) and replicas >= wanted
        return result, replicated, tuple(members[1]) if replicated else ()

    async def _sent(self, name, key, args):
        """_fcall, its failure VoteUnknown unless the call surely did not
        run (no connection free, a redirect given up on)."""
        try:
            return await self._fcall(name, key, args)
        except DataUnavailable as e:
            if isinstance(e, NotSent) or e.__cause__ is None or \
                    isinstance(e.__cause__, NOT_RUN):
                raise
            raise VoteUnknown(str(e)) from e.__cause__

    async def _members(self, node):
        """{primary's name: (every other node of its shard, those of them
        online as replicas)}, from CLUSTER SHARDS asked of `node` at most
        once a second; {} when it cannot be read."""
        now = asyncio.get_event_loop().time()
        read = self._shards
        if read is None or (read[1].done() and now - read[0] >= SHARDS_EVERY):
            read = self._shards = (now, asyncio.ensure_future(
                self._read_members(node)))
        if read[1].done():
            return read[1].result()
        return await asyncio.shield(read[1])

    async def _read_members(self, node):
        try:
            shards = await self._node(node, 'CLUSTER', 'SHARDS')
        except DataUnavailable:
            return {}
        try:
            return self._parse_members(shards)
        except (KeyError, TypeError, AttributeError):     # an odd reply
            return {}

    @staticmethod
    def _parse_members(shards):
        members = {}
        for shard in shards:
            nodes = [('%s:%s' % (n.get('endpoint') or n['ip'], n['port']),
                      n.get('role'), n.get('health')) for n in shard['nodes']]
            for name, role, _ in nodes:
                if role == 'master':
                    members[name] = (
                        [m for m, _, _ in nodes if m != name],
                        [m for m, r, h in nodes
                         if r == 'replica' and h == 'online'])
        return members

    async def _call(self, name, args):
        """A page's function by name, as a client could call it."""
        if name == 'sticker_pair':
            return await self._pair(*args)
        if name == 'cast_vote':
            return await self.cast_vote(*args)
        if name in CATALOGUE_READS:
            return await self._read(name, args)
        return await self._fcall(name, CATALOGUE + 'ratings', args)

    async def _read(self, name, args=()):
        """A read of the catalogue on one of {c}'s replicas that had every
        vote answered so far, in turn; on its primary when none had, or
        when the replica fails (a read may be sent twice)."""
        key = CATALOGUE + 'ratings'
        shard = await self._shard(key)
        nodes = [n for n in shard[1:] if n.name in self._readers]
        if nodes and asyncio.get_event_loop().time() - self._readers_at > \
                self.read_lag:
            nodes = self._readers = ()    # no batch confirmed them since
        if nodes:
            self._turn += 1
            command = self._command(name, key, args)
            try:
                reply = (await self._direct(nodes[self._turn % len(nodes)],
                                            [command]))[0]
            except DataUnavailable:
                reply = None
            if not isinstance(reply, (NOT_RUN, type(None))):
                return self._settled(command, reply)
            self._readers = ()
        return await self._fcall(name, key, args)

    # Visits and votes: in the visitor's bucket.
    async def record_visits(self, visits):
        """Every visit checked first, so that a bad one refuses the whole
        batch; then one call per bucket (each all or nothing)."""
        if len(visits) > MAX_VISITS:
            raise DataUnavailable('%s: at most %d visits in a batch'
                                  % (REFUSED, MAX_VISITS))
        by_bucket = {}
        for v in visits:
            if len(v) != 3:
                raise DataUnavailable('%s: a visit is 3 fields' % REFUSED)
            session, ip, agent = [argument(x) for x in v]
            if not UUID.match(session):
                raise DataUnavailable('%s: session must be a uuid' % REFUSED)
            if len(ip) > 64 or len(agent) > 256:
                raise DataUnavailable('%s: ip or user agent too long'
                                      % REFUSED)
            by_bucket.setdefault(bucket_of(v[0]), []).extend(v)
        if len(by_bucket) == 1:     # a quiet site's: no task for it
            (n, flat), = by_bucket.items()
            return await self._visit_call(bucket(n) + 'sessions', flat)
        counts = await asyncio.gather(*[
            self._visit_call(bucket(n) + 'sessions', flat)
            for n, flat in by_bucket.items()], return_exceptions=True)
        failed = [c for c in counts if isinstance(c, BaseException)]
        if failed:
            # Only the failed buckets' visits go back (PartlyWritten).
            unwritten = [v for v in visits if isinstance(
                counts[list(by_bucket).index(bucket_of(v[0]))],
                BaseException)]
            if len(unwritten) == len(visits):
                raise failed[0]
            raise PartlyWritten(str(failed[0]), unwritten) from failed[0]
        return sum(counts)

    async def _pair(self, session, token_a, token_b, ttl):
        picked = await self._read('pick_pair')
        await self._fcall('issue_ballots',
                          bucket(bucket_of(session)) + 'ballots',
                          [session, token_a, token_b, ttl,
                           member(picked[0][0]), member(picked[1][0])])
        return picked

    def ballot_tokens(self, session):
        """Their first character names the session's bucket, which keeps
        the pair: a refused vote asks that bucket alone (_whose)."""
        a, b = new_tokens()
        first = ALPHABET[bucket_of(session)]
        return first + a[1:], first + b[1:]

    async def sticker_pair(self, session, tokens, ttl):
        return stickers_of(await self._pair(session, tokens[0], tokens[1],
                                            ttl))

    async def cast_vote(self, session, win_token, lose_token):
        """Counted in the voter's bucket (the answer), then applied to the
        rankings once a replica of the bucket has it; else, or if that
        fails, the sweep applies it. Answered once applied when its call
        goes at once (or apply_every is 0); when a call is under way or the
        last went less than apply_every ago, at once, its call following
        within apply_every. The first vote in a bucket after its
        primary changed (a failover: its replica may lack the last votes)
        takes the rankings' applied mark of the bucket, so that no new vote
        gets a sequence the rankings hold as applied."""
        n = bucket_of(session)
        key = bucket(n) + 'ballots'
        args = [session, win_token, lose_token]
        shard = await self._shard(key)
        primary = shard[0].name if shard else None
        if self._voted_on.get(n) != primary:
            args.append((await self._applied_marks()).get(n, 0))
        result, replicated, _ = await self._fcall_acked('cast_vote', key,
                                                        args)
        self._voted_on[n] = primary
        if result[0] == VoteOutcome.OK:
            if not replicated:    # a failover could still lose it
                self.unreplicated += 1
                return VoteOutcome.OK
            loop = asyncio.get_event_loop()
            future = loop.create_future()
            self._pending.append((n, result[1:], future))
            # with apply_every 0, every vote waits for its batch
            at_once = not self.apply_every
            if self._applier is None or self._applier.done():
                at_once = at_once or loop.time() >= self._next_apply
                self._applier = asyncio.ensure_future(self._apply_pending())
            if at_once:
                await asyncio.shield(future)
            else:
                self.answered_first += 1
            return VoteOutcome.OK
        if result[0] != VoteOutcome.UNKNOWN:
            return result[0]
        return await self._whose(n, result, session, win_token, lose_token)

    async def _applied_marks(self):
        """{bucket: the rankings' applied mark}, from {c}'s primary, in a
        read started now or later (one at a time)."""
        now = asyncio.get_event_loop().time()
        if self._marks is None or self._marks[0] < now:
            self._marks = (now, asyncio.ensure_future(self._fcall(
                'applied_marks', CATALOGUE + 'applied')))
        flat = await asyncio.shield(self._marks[1])
        return {int(flat[i]): int(flat[i + 1])
                for i in range(0, len(flat), 2)}

    async def _whose(self, n, here, session, win_token, lose_token):
        """Unknown in the voter's bucket: a token of another session's pair
        names that session's bucket (ballot_tokens), so ask there (no
        writes; two buckets at most, when the tokens name two) and answer
        as one Redis would: 'foreign' for another session's pair,
        'not_pair' for two tokens that both exist."""
        others = {token_bucket(t) for t, known in
                  ((win_token, here[1]), (lose_token, here[2]))
                  if not known} - {n, None}
        answers = await asyncio.gather(*[
            self._fcall('judge_vote', bucket(other) + 'ballots',
                        [session, win_token, lose_token])
            for other in sorted(others)])
        answers = list(answers) + [here]
        for a in answers:
            if a[0] != VoteOutcome.UNKNOWN:
                return a[0]
        if any(a[1] for a in answers) and any(a[2] for a in answers):
            return VoteOutcome.NOT_PAIR
        return VoteOutcome.UNKNOWN

    async def _apply_pending(self):
        """The votes counted meanwhile, applied in one call with a WAIT for
        every replica of {c}, batch after batch, apply_every apart at least
        (a batch of APPLY_BATCH goes at once; so does all on close()); a
        vote's request that waits, waits for its batch. A batch that fails
        is left to the sweep (logged once until one is applied again)."""
        batch = []
        loop = asyncio.get_event_loop()
        try:
            while self._pending:
                wait = self._next_apply - loop.time()
                if wait > 0 and len(self._pending) < APPLY_BATCH \
                        and not self._closing.is_set():
                    try:
                        await asyncio.wait_for(self._closing.wait(), wait)
                    except asyncio.TimeoutError:
                        pass
                self._next_apply = loop.time() + self.apply_every
                batch = sorted(self._pending[:APPLY_BATCH],
                               key=lambda v: v[0])
                del self._pending[:APPLY_BATCH]
                args = []
                for n, entry, _ in batch:
                    args.extend([n] + list(entry))
                self.batches += 1
                try:
                    self._readers = await self._apply_many(args)
                    self._readers_at = asyncio.get_event_loop().time()
                    self._apply_failed = False
                except DataUnavailable as e:
                    self._readers = ()
                    if not self._apply_failed:
                        log.warning('votes are counted, their rankings wait '
                                    'for the next sweep: %s', e)
                    self._apply_failed = True
                self._answer(batch)
        finally:
            # cancelled: the rest is counted, and left to the sweep
            self._answer(batch + self._pending)
            del self._pending[:]

    async def _apply_many(self, args):
        """{c}'s replicas that have these votes applied (names)."""
        return (await self._fcall_acked('apply_many', CATALOGUE + 'applied',
                                        args, True))[2]

    @staticmethod
    def _answer(batch):
        for _, _, future in batch:
            if not future.done():
                future.set_result(None)

    async def _apply(self, n, floor, entries):
        return await self._fcall('apply_votes', CATALOGUE + 'applied',
                                 [n, floor] + list(entries))

    # The catalogue.
    async def top_stickers(self, count):
        return stickers_of(await self._call('top_stickers', [count]))

    async def bottom_stickers(self, count):
        return stickers_of(await self._call('bottom_stickers', [count]))

    async def packs(self):
        return packs_of(await self._call('list_packs', []))

    async def pack(self, name):
        return pack_of(await self._call('pack_stickers', [name]))

    async def sticker(self, pack, sticker_id):
        return sticker_of(await self._call('get_sticker', [pack, sticker_id]))

    async def stats(self):
        """The catalogue's counts and the buckets' sums."""
        parts = await few_at_once(
            [self._call('catalogue_stats', [])]
            + [self._fcall('bucket_stats', bucket(n) + 'counters')
               for n in range(BUCKETS)])
        sums = [sum(p[i] for p in parts[1:]) for i in range(5)]
        return Stats(*(list(parts[0]) + sums))

    # Sweeps.
    async def expire(self):
        """Each bucket's sweep (at its pace), and its logged votes that the
        rankings lack applied (once)."""
        flat = await self._fcall('applied_marks', CATALOGUE + 'applied')
        marks = {int(flat[i]): int(flat[i + 1])
                 for i in range(0, len(flat), 2)}
        removed = await few_at_once([
            self._expire_bucket(n, marks.get(n, 0)) for n in range(BUCKETS)])
        return (sum(r[0] for r in removed), sum(r[1] for r in removed))

    async def _expire_bucket(self, n, mark):
        removed = [0, 0]
        while True:
            r, replicated, _ = await self._fcall_acked(
                'expire', bucket(n) + 'counters', [EXPIRE_BATCH, mark])
            removed = [removed[0] + r[0], removed[1] + r[1]]
            floor, entries = r[2], r[3:]
            if replicated and (entries or floor > mark):
                mark = await self._apply(n, floor, entries)
            if max(r[:2]) < EXPIRE_BATCH:
                return removed

    async def expire_below(self, session_ttl, max_sessions, max_ballots,
                           batch=1000):
        """Loader only: every bucket's sweep with lowered limits (tests)."""
        removed = [0, 0]
        for n in range(BUCKETS):
            while True:
                r = await self._fcall('expire_below', bucket(n) + 'admin', [
                    session_ttl, share(max_sessions, n),
                    share(max_ballots, n), batch])
                removed = [removed[0] + r[0], removed[1] + r[1]]
                if max(r) < batch:
                    break
        return tuple(removed)

    async def forget_visitors(self):
        return await self.expire_below(0, 0, 0)

    async def configure(self, session_ttl, max_sessions=None,
                        max_ballots=None, keep=False, sweep_every=5.0):
        """Loader only: each bucket's share of the caps (no more than fit
        the primaries' maxmemory), the idle time and the sweep's pace;
        returns (session_ttl, max_sessions, max_ballots) of the whole."""
        if keep:
            first = await self._fcall('limits', bucket(0) + 'admin')
            if first[4]:
                return (first[0], first[1] * BUCKETS, first[2] * BUCKETS)
        primaries = self._client.get_primaries()
        info = await self._node(primaries[0], 'INFO', 'memory')
        memory = int(info.get('maxmemory', 0)) if isinstance(info, dict) \
            else 0
        sessions, ballots = caps(memory * len(primaries), max_sessions,
                                 max_ballots)
        await few_at_once([
            self._fcall('set_limits', bucket(n) + 'admin', [
                session_ttl, share(sessions, n), share(ballots, n),
                sweep_every]) for n in range(BUCKETS)])
        return session_ttl, sessions, ballots

    async def load_batch(self, packs, stickers):
        args = [len(packs)]
        for p in packs:
            args.extend(p)
        for s in stickers:
            args.extend(s)
        return await self._fcall('load_stickers', CATALOGUE + 'admin', args)

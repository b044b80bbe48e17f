-- The sticker site's app module: schema, stored functions (globals, which
-- box.schema.func names) and the expiry fiber. Loaded by instance.lua after
-- box.cfg; start() makes the schema on its storage engine (memtx or vinyl),
-- sets the expiry limits and starts the fiber. Every page operation is one
-- call of a function below.
local fiber = require('fiber')
local digest = require('digest')
local log = require('log')

local M = {}

-- Set by start().
local ENGINE, SESSION_TTL, SWEEP_EVERY, MAX_SESSIONS, MAX_BALLOTS
local stickers, packs, ballots, sessions, server

-- Caps that fit memtx_memory. Measured on 2.6 with maximal strings, indexes
-- and slab overhead included: a session takes about 520 bytes of the quota, a
-- ballot about 195; with a margin, sessions get half the memory and ballots a
-- quarter, so both full still leave a quarter for stickers and slack.
local SESSION_BYTES, BALLOT_BYTES = 600, 224
local function cap(wanted, share, bytes)
    local fits = math.floor(box.cfg.memtx_memory * share / bytes)
    return math.min(wanted or fits, fits)
end
-- vinyl keeps them on disk: its caps are settings, not what memory holds.
local VINYL_CAP = 1000000
-- Above this share of the quota in use, the expiry fiber drops the oldest
-- sessions and ballots without waiting for their time.
local HIGH_WATER = 0.85

-- What a page may store and ask for (pages check the same before calling).
local MAX_IP, MAX_AGENT, MAX_NAME = 64, 256, 64
local MAX_COUNT, MAX_TTL = 100, 3600

-- Every space on one engine: a transaction may not span two.
local function create_schema(engine)
    local s = box.schema.space.create('stickers', {engine = engine, format = {
        {'id', 'unsigned'}, {'pack', 'string'}, {'image', 'string'},
        {'rating', 'integer'}, {'votes_plus', 'unsigned'},
        {'votes_minus', 'unsigned'}}})
    s:create_index('primary', {parts = {'id'}})
    s:create_index('rating', {parts = {'rating', 'id'}})
    s:create_index('pack', {parts = {'pack', 'id'}})

    s = box.schema.space.create('packs', {engine = engine, format = {
        {'name', 'string'}, {'title', 'string'}}})
    s:create_index('primary', {parts = {'name'}})

    s = box.schema.space.create('ballots', {engine = engine, format = {
        {'token', 'string'}, {'session', 'string'}, {'sticker', 'unsigned'},
        {'partner', 'string'}, {'deadline', 'number'}}})
    s:create_index('primary', {parts = {'token'}})
    s:create_index('deadline', {parts = {'deadline'}, unique = false})

    s = box.schema.space.create('sessions', {engine = engine, format = {
        {'uuid', 'string'}, {'last_seen', 'number'}, {'visits', 'unsigned'},
        {'ip', 'string'}, {'user_agent', 'string'}}})
    s:create_index('primary', {parts = {'uuid'}})
    s:create_index('last_seen', {parts = {'last_seen'}, unique = false})

    s = box.schema.space.create('server', {engine = engine, format = {
        {'id', 'unsigned'}, {'users', 'unsigned'}, {'views', 'unsigned'},
        {'votes', 'unsigned'}}})
    s:create_index('primary', {parts = {'id'}})
    s:insert{1, 0, 0, 0}
end

-- Seed LuaJIT's generator from the OS so pairs differ between restarts.
do
    local b1, b2, b3, b4 = digest.urandom(4):byte(1, 4)
    math.randomseed(((b1 * 256 + b2) * 256 + b3) * 256 + b4)
end

-- Pack titles by pack name, looked up once: packs change only when a data
-- set loads, and any change to the space (start() sets the trigger)
-- empties the table.
local titles = {}

local function card(t)
    local title = titles[t[2]]
    if title == nil then
        local pack = packs:get(t[2])
        title = pack and pack[2] or t[2]
        titles[t[2]] = title
    end
    return {t[1], t[2], t[3], t[4], t[5], t[6], title}
end

-- Argument checks: a failed one raises 'bad argument: ...', which the
-- drivers report as the database failing the call. Errors need a code:
-- aiotarantool takes code 0 for success.
local function refuse(what)
    box.error{code = box.error.ILLEGAL_PARAMS,
              reason = 'bad argument: ' .. what}
end

local function check_text(value, max_bytes, what)
    if type(value) ~= 'string' or #value > max_bytes
            or utf8.len(value) == nil then
        refuse(what .. ' must be UTF-8 text of at most ' .. max_bytes
               .. ' bytes')
    end
end

local function check_uuid(value)
    if type(value) ~= 'string' or #value ~= 36
            or not value:match('^[0-9a-f-]+$') then
        refuse('session must be a uuid of 36 characters')
    end
end

local function check_token(value)
    if type(value) ~= 'string' or #value ~= 22
            or not value:match('^[A-Za-z0-9_-]+$') then
        refuse('ballot tokens must be 22 URL-safe characters')
    end
end

local function check_visit(uuid, ip, user_agent)
    check_uuid(uuid)
    check_text(ip, MAX_IP, 'ip')
    check_text(user_agent, MAX_AGENT, 'user agent')
end

local function check_integer(value, low, high, what)
    if type(value) ~= 'number' or value ~= math.floor(value)
            or value < low or value > high then
        refuse(what .. ' must be an integer in ' .. low .. '..' .. high)
    end
end

-- Tuples per space. memtx: space:len(), exact and cheap. vinyl has no
-- exact len(), and count() reads the whole space: its counts are taken once
-- by start(), then moved by what each committed transaction inserted and
-- deleted (every write goes through the functions here).
local counts = {}
local NONE = {}     -- no change (yet) in this call

local function size(space, change)
    if ENGINE == 'memtx' then return space:len() end
    return counts[space.name] + (change[space.name] or 0)
end

local function changed(change, space, n)
    change[space.name] = (change[space.name] or 0) + n
end

-- A transaction: fn(change, ...) between box.begin() and box.commit().
-- memtx runs it whole, with no yield inside. vinyl may yield on a read, and
-- aborts a transaction that read what another one wrote meanwhile: it
-- changed nothing, so it runs again from the start, reads included, up to
-- RETRIES times; then the call fails (503). At least one of a set of
-- conflicting transactions commits each round.
local RETRIES = 100
-- Since start: transactions run again after a conflict, and calls that
-- failed on one after RETRIES runs (conflicts() tells them).
local retried, gave_up = 0, 0

local function conflict(err)
    return type(err) == 'cdata' and err.code == box.error.TRANSACTION_CONFLICT
end

local function atomically(fn, ...)
    local most = RETRIES    -- set_retries() may change it meanwhile
    for attempt = 1, most do
        local change = {}
        box.begin()
        local ok, result = pcall(fn, change, ...)
        local committed, err = ok, result
        if ok then committed, err = pcall(box.commit) end
        if committed then
            for name, n in pairs(change) do
                counts[name] = (counts[name] or 0) + n
            end
            return result
        end
        box.rollback()
        if not conflict(err) then error(err) end
        if attempt == most then
            gave_up = gave_up + 1
            error(err)
        end
        retried = retried + 1
    end
end

-- {runs again, calls failed, RETRIES}: for tests and operators.
function conflicts()
    return {retried, gave_up, RETRIES}
end

-- Fewer (or more) runs before a conflicting call fails, until a restart:
-- the tests' way to a failed one.
function set_retries(retries)
    check_integer(retries, 1, 1000, 'retries')
    RETRIES = retries
    return RETRIES
end

-- Delete the tuple of `key` if it is there; 1 if it was. memtx's delete
-- returns it. vinyl's says nothing, and reads the old tuple anyway (for the
-- secondary indexes): a get first costs little more, and makes the delete
-- conflict with a concurrent one.
local function remove(change, space, key)
    if ENGINE == 'memtx' then
        return space:delete(key) and 1 or 0
    end
    if space:get(key) == nil then return 0 end
    space:delete(key)
    changed(change, space, -1)
    return 1
end

-- Make room for `n` more tuples in a full space: drop its oldest ones
-- (by `index`) in the caller's transaction, so the cap holds at all times
-- (on vinyl, give or take the transactions in flight).
-- A dropped tuple stays allocated while Lua refers to it (here, until the
-- collector runs), so a full space collects every GC_EVERY drops: else a
-- batch of visits, which makes little other garbage, could run out of
-- memory on tuples already gone.
local GC_EVERY, dropped = 1000, 0
local function make_room(change, space, index, cap, n)
    for _ = 1, size(space, change) + n - cap do
        local oldest = index:min()
        if oldest == nil then return end
        remove(change, space, oldest[1])
        dropped = dropped + 1
    end
    if dropped >= GC_EVERY then
        dropped = 0
        collectgarbage('collect')
    end
end

-- The site's counters (users, views, votes): upserts, which read nothing,
-- so on vinyl the transactions that move them do not conflict on them.
local function count(ops)
    server:upsert({1, 0, 0, 0}, ops)
end

-- At most this many visits per record_visits call.
local MAX_VISITS = 1000

-- Record visits: {uuid, ip, user_agent} each, in the order they came.
-- Each upserts its session (last seen now, one visit more, its ip and user
-- agent) and counts a view, and a user for a session not there before. The
-- site sends them in batches after answering (pages.visits), so a batch is
-- one transaction and one write to the log.
function record_visits(visits)
    if type(visits) ~= 'table' or #visits > MAX_VISITS then
        refuse('visits must be an array of at most ' .. MAX_VISITS)
    end
    for _, v in ipairs(visits) do
        if type(v) ~= 'table' then refuse('a visit must be an array') end
        check_visit(v[1], v[2], v[3])
    end
    if #visits == 0 then return 0 end
    local now = fiber.time()
    return atomically(function(change)
        local new = 0
        for _, v in ipairs(visits) do
            local uuid = v[1]
            if sessions:get(uuid) == nil then
                make_room(change, sessions, sessions.index.last_seen,
                          MAX_SESSIONS, 1)
                sessions:insert{uuid, now, 1, v[2], v[3]}
                changed(change, sessions, 1)
                new = new + 1
            else
                sessions:update(uuid, {{'=', 2, now}, {'+', 3, 1},
                                       {'=', 4, v[2]}, {'=', 5, v[3]}})
            end
        end
        count{{'+', 2, new}, {'+', 3, #visits}}
        return #visits
    end)
end

-- A random existing sticker id other than `other`: a random key up to the
-- largest id, then the first id at or above it (ids may have gaps), wrapping
-- around past the end.
local function random_sticker(other)
    local top = stickers.index.primary:max()
    local t = stickers.index.primary:select(math.random(top[1]),
                                            {iterator = 'GE', limit = 1})[1]
    if t[1] == other then
        t = stickers.index.primary:select(other, {iterator = 'GT',
                                                  limit = 1})[1]
        if t == nil then t = stickers.index.primary:min() end
    end
    return t
end

function sticker_pair(uuid, token_a, token_b, ttl)
    check_uuid(uuid)
    check_token(token_a)
    check_token(token_b)
    if token_a == token_b then refuse('the two ballot tokens must differ') end
    if type(ttl) ~= 'number' or not (ttl > 0 and ttl <= MAX_TTL) then
        refuse('ttl must be a number of seconds in (0, ' .. MAX_TTL .. ']')
    end
    if size(stickers, NONE) < 2 then
        box.error{code = box.error.PROC_LUA,
                  reason = 'fewer than two stickers loaded'}
    end
    local a = random_sticker(nil)
    local b = random_sticker(a[1])
    local deadline = fiber.time() + ttl
    atomically(function(change)
        make_room(change, ballots, ballots.index.deadline, MAX_BALLOTS, 2)
        ballots:insert{token_a, uuid, a[1], token_b, deadline}
        ballots:insert{token_b, uuid, b[1], token_a, deadline}
        changed(change, ballots, 2)
    end)
    -- Read again: a vote may have changed them while the commit waited.
    return {card(stickers:get(a[1])), card(stickers:get(b[1]))}
end

function cast_vote(uuid, win_token, lose_token)
    check_uuid(uuid)
    check_token(win_token)
    check_token(lose_token)
    -- The checks read in the transaction that deletes the ballots: a second
    -- call with the same tokens finds them gone (memtx: no yield between;
    -- vinyl: the later of two such transactions conflicts and runs again).
    return atomically(function(change)
        local win, lose = ballots:get(win_token), ballots:get(lose_token)
        if win == nil or lose == nil or win_token == lose_token then
            return 'unknown'
        end
        if win[4] ~= lose_token or lose[4] ~= win_token then
            return 'not_pair'
        end
        if win[2] ~= uuid then return 'foreign' end
        if win[5] < fiber.time() then return 'expired' end
        remove(change, ballots, win_token)
        remove(change, ballots, lose_token)
        stickers:update(win[3], {{'+', 4, 1}, {'+', 5, 1}})
        stickers:update(lose[3], {{'-', 4, 1}, {'+', 6, 1}})
        count{{'+', 4, 1}}
        return 'ok'
    end)
end

local function ranked(count, iterator)
    check_integer(count, 1, MAX_COUNT, 'count')
    local result = stickers.index.rating:select(nil, {iterator = iterator,
                                                     limit = count})
    for i, t in ipairs(result) do result[i] = card(t) end
    return result
end

function top_stickers(count)
    return ranked(count, 'LE')
end

function bottom_stickers(count)
    return ranked(count, 'GE')
end

function site_stats()
    local counters = server:get(1)
    return {size(packs, NONE), size(stickers, NONE), counters[2], counters[3],
            counters[4], size(sessions, NONE), size(ballots, NONE)}
end

function list_packs()
    local result = {}
    for _, p in packs:pairs() do
        result[#result + 1] = {p[1], p[2], stickers.index.pack:count(p[1])}
    end
    return result
end

function pack_stickers(name)
    check_text(name, MAX_NAME, 'pack name')
    local pack = packs:get(name)
    if pack == nil then return nil end
    local result = {}
    for _, t in stickers.index.pack:pairs(name) do
        result[#result + 1] = {t[1], t[2], t[3], t[4], t[5], t[6], pack[2]}
    end
    return {pack[1], pack[2], result}
end

function get_sticker(pack, id)
    check_text(pack, MAX_NAME, 'pack name')
    check_integer(id, 0, 2 ^ 53, 'sticker id')
    local t = stickers:get(id)
    if t == nil or t[2] ~= pack then return nil end
    return card(t)
end

-- Deletes tuples of `space` found by `index` below `limit` (or the oldest
-- beyond `cap`), SWEEP_BATCH at a time, `pause` seconds apart (the expiry
-- fiber: SWEEP_PAUSE), so that the requests that write never wait long
-- behind it. Paced, a backlog of 250,000 sessions goes in 5 s; 1,000 at a
-- time without a pause took 2.5 s and raised the p99 of / at 1,500
-- requests/s from 5 to 18 ms meanwhile.
local SWEEP_BATCH, SWEEP_PAUSE = 100, 0.001

-- A tuple found is deleted only if its key field is still what the scan
-- saw: on vinyl the scan may yield, and a visit meanwhile may have made an
-- idle session fresh again.
local function sweep(space, index, limit, cap, pause)
    local removed = 0
    local fieldno = index.parts[1].fieldno
    while true do
        local over = size(space, NONE) - cap
        local found = {}
        for _, t in index:pairs(nil, {iterator = 'GE'}) do
            if #found >= SWEEP_BATCH then break end
            if t[fieldno] >= limit and #found >= over then break end
            found[#found + 1] = {t[1], t[fieldno]}
        end
        if #found == 0 then return removed end
        removed = removed + atomically(function(change)
            local n = 0
            for _, f in ipairs(found) do
                local t = space:get(f[1])
                if t ~= nil and t[fieldno] == f[2] then
                    n = n + remove(change, space, f[1])
                end
            end
            return n
        end)
        if pause > 0 then fiber.sleep(pause) else fiber.yield() end
    end
end

local function sweep_all(session_ttl, max_sessions, max_ballots, pause)
    local now = fiber.time()
    return {sweep(ballots, ballots.index.deadline, now, max_ballots, pause),
            sweep(sessions, sessions.index.last_seen, now - session_ttl,
                  max_sessions, pause)}
end

-- The sweep the expiry fiber runs, for the admin account only (tests): the
-- limits default to the instance's and may be lowered, never raised.
function expire(session_ttl, max_sessions, max_ballots)
    session_ttl = session_ttl or SESSION_TTL
    if type(session_ttl) ~= 'number' or not (session_ttl >= 0) then
        refuse('session ttl must be a number of seconds')
    end
    max_sessions = max_sessions or MAX_SESSIONS
    max_ballots = max_ballots or MAX_BALLOTS
    check_integer(max_sessions, 0, 2 ^ 53, 'max sessions')
    check_integer(max_ballots, 0, 2 ^ 53, 'max ballots')
    -- Its caller waits for the answer: no pause.
    return sweep_all(math.min(session_ttl, SESSION_TTL),
                     math.min(max_sessions, MAX_SESSIONS),
                     math.min(max_ballots, MAX_BALLOTS), 0)
end

-- The limits in force: {session_ttl, max_sessions, max_ballots}.
function limits()
    return {SESSION_TTL, MAX_SESSIONS, MAX_BALLOTS}
end

-- The share of memtx_memory that tuples and indexes take now (the arena's
-- own figure keeps slabs freed tuples leave behind).
local function memory_used()
    return (box.slab.info().items_used + box.info.memory().index)
           / box.cfg.memtx_memory
end

-- Past the high-water mark, drop the oldest tenth of the sessions and
-- ballots, whatever their age, once a tick so that memory can show the
-- effect. Index memory is not always given back, so a quarter of each cap
-- is kept whatever the figure says.
local function shed()
    if ENGINE ~= 'memtx' or memory_used() <= HIGH_WATER then return end
    -- Deleted tuples stay allocated while Lua objects still refer to them.
    collectgarbage('collect')
    local used = memory_used()
    if used <= HIGH_WATER then return end
    local function keep(space, cap)
        return math.floor(math.max(space:len() * 0.9, cap / 4))
    end
    local removed = sweep_all(SESSION_TTL, keep(sessions, MAX_SESSIONS),
                              keep(ballots, MAX_BALLOTS), 0)
    log.warn('memory %.0f%% used: dropped the %d oldest ballots and '
             .. 'the %d oldest sessions', used * 100, removed[1], removed[2])
end

function load_stickers(pack_rows, sticker_rows)
    local ok, inserted = pcall(atomically, function(change)
        for _, p in ipairs(pack_rows) do
            if packs:get(p[1]) == nil then
                packs:insert(p)
                changed(change, packs, 1)
            end
        end
        local n = 0
        for _, s in ipairs(sticker_rows) do
            if stickers:get(s[1]) == nil then
                stickers:insert(s)
                n = n + 1
            end
        end
        changed(change, stickers, n)
        return n
    end)
    titles = {}     -- a rolled back change may have filled it
    if not ok then error(inserted) end
    return inserted
end

-- The storage engine of the site's spaces (server.py checks the one it
-- asked for).
-- How far this instance has come in the primary's log: the sum of its
-- vclock's components, the local one (0) left out. A replica has caught up
-- with the primary as it was when the primary's position was this.
function replication_position()
    local sum = 0
    for id, lsn in pairs(box.info.vclock) do
        if id ~= 0 then sum = sum + lsn end
    end
    return sum
end

function storage_engine()
    return ENGINE
end

M.APP_FUNCTIONS = {'record_visits', 'sticker_pair', 'cast_vote',
    'top_stickers', 'bottom_stickers', 'site_stats', 'list_packs', 'pack_stickers',
    'get_sticker', 'replication_position'}
-- Not for the app: the expiry fiber sweeps (expire(0, 0, 0) would empty
-- every session); limits(), conflicts() and set_retries() are for tests
-- and operators.
M.ADMIN_FUNCTIONS = {'load_stickers', 'expire', 'limits', 'storage_engine',
    'conflicts', 'set_retries'}

-- config: engine ('memtx' or 'vinyl', of new spaces; existing ones must be
-- on it), session_ttl and sweep_every (seconds), max_sessions and
-- max_ballots (memtx: nil for what fits memtx_memory, never more; vinyl:
-- nil for VINYL_CAP), replica (true: a read-only replica, whose schema and
-- writes come from its primary: no schema made here, no expiry fiber).
function M.start(config)
    local engine = config.engine or 'memtx'
    if engine ~= 'memtx' and engine ~= 'vinyl' then
        error(string.format('engine must be memtx or vinyl, not %q', engine), 0)
    end
    if config.replica then
        if box.space.stickers == nil then
            error('the primary has no sticker site schema', 0)
        end
    else
        box.once('stickers-schema-v1', create_schema, engine)
    end
    local found = box.space.stickers.engine
    if found ~= engine then
        error(string.format('the site\'s spaces here are on %s, not %s: a '
                            .. 'data directory keeps the engine it was made '
                            .. 'with (start it on %s, or use another '
                            .. 'directory for %s)', found, engine, found,
                            engine), 0)
    end
    ENGINE = engine
    stickers, packs = box.space.stickers, box.space.packs
    ballots, sessions = box.space.ballots, box.space.sessions
    server = box.space.server
    packs:on_replace(function() titles = {} end)
    SESSION_TTL = config.session_ttl
    SWEEP_EVERY = config.sweep_every
    if ENGINE == 'memtx' then
        MAX_SESSIONS = cap(config.max_sessions, 0.5, SESSION_BYTES)
        MAX_BALLOTS = cap(config.max_ballots, 0.25, BALLOT_BYTES)
    else
        MAX_SESSIONS = config.max_sessions or VINYL_CAP
        MAX_BALLOTS = config.max_ballots or VINYL_CAP
        -- Once, before the instance listens: count() reads every tuple.
        for _, space in ipairs{stickers, packs, ballots, sessions} do
            counts[space.name] = space:count()
            -- A replica's writes come from its primary, not through
            -- atomically(): the counts follow them here.
            if config.replica then
                space:on_replace(function(old, new)
                    local n = (new and 1 or 0) - (old and 1 or 0)
                    counts[space.name] = counts[space.name] + n
                end)
            end
        end
    end
    if config.replica then
        log.info('%s replica: reads only', ENGINE)
        return
    end
    log.info('%s: sessions idle %d s, at most %d sessions and %d ballots',
             ENGINE, SESSION_TTL, MAX_SESSIONS, MAX_BALLOTS)
    fiber.create(function()
        fiber.name('expiry')
        local next_sweep = fiber.clock() + SWEEP_EVERY
        while true do
            fiber.sleep(math.min(1, SWEEP_EVERY))
            local ok, err = pcall(shed)
            if ok and fiber.clock() >= next_sweep then
                next_sweep = fiber.clock() + SWEEP_EVERY
                ok, err = pcall(sweep_all, SESSION_TTL, MAX_SESSIONS,
                                MAX_BALLOTS, SWEEP_PAUSE)
            end
            if not ok then log.error('expiry failed: %s', err) end
        end
    end)
end

return M

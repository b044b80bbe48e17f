-- Tarantool instance for the sticker site: schema, users, stored procedures
-- and the expiry fiber. Run: tarantool app.lua (settings from the environment,
-- see README). Every page operation is one call of a function below.
local fiber = require('fiber')
local digest = require('digest')
local log = require('log')

local function env(name, default)
    local value = os.getenv(name)
    if value == nil or value == '' then return default end
    return value
end

local dir = env('TNT_DIR', '.')
-- listen is set at the end, once the accounts' passwords are.
box.cfg{
    memtx_dir = dir,
    wal_dir = dir,
    pid_file = env('TNT_PID_FILE', nil),
    log = env('TNT_LOG', nil),
    log_level = tonumber(env('TNT_LOG_LEVEL', '5')),
    memtx_memory = tonumber(env('TNT_MEMTX_MEMORY', tostring(1024 * 1024 * 1024))),
    checkpoint_interval = 600,
    -- A snapshot after 64 MB of log too: recovery replays less at start.
    checkpoint_wal_threshold = 64 * 1024 * 1024,
}

local SESSION_TTL = tonumber(env('TNT_SESSION_TTL', '900'))
local MAX_SESSIONS = tonumber(env('TNT_MAX_SESSIONS', '1000000'))
local MAX_BALLOTS = tonumber(env('TNT_MAX_BALLOTS', '1000000'))
local SWEEP_EVERY = tonumber(env('TNT_SWEEP_EVERY', '5'))

box.once('stickers-schema-v1', function()
    local s = box.schema.space.create('stickers', {format = {
        {'id', 'unsigned'}, {'pack', 'string'}, {'image', 'string'},
        {'rating', 'integer'}, {'votes_plus', 'unsigned'},
        {'votes_minus', 'unsigned'}}})
    s:create_index('primary', {parts = {'id'}})
    s:create_index('rating', {parts = {'rating', 'id'}})
    s:create_index('pack', {parts = {'pack', 'id'}})

    s = box.schema.space.create('packs', {format = {
        {'name', 'string'}, {'title', 'string'}}})
    s:create_index('primary', {parts = {'name'}})

    s = box.schema.space.create('ballots', {format = {
        {'token', 'string'}, {'session', 'string'}, {'sticker', 'unsigned'},
        {'partner', 'string'}, {'deadline', 'number'}}})
    s:create_index('primary', {parts = {'token'}})
    s:create_index('deadline', {parts = {'deadline'}, unique = false})

    s = box.schema.space.create('sessions', {format = {
        {'uuid', 'string'}, {'last_seen', 'number'}, {'visits', 'unsigned'},
        {'ip', 'string'}, {'user_agent', 'string'}}})
    s:create_index('primary', {parts = {'uuid'}})
    s:create_index('last_seen', {parts = {'last_seen'}, unique = false})

    s = box.schema.space.create('server', {format = {
        {'id', 'unsigned'}, {'users', 'unsigned'}, {'views', 'unsigned'},
        {'votes', 'unsigned'}}})
    s:create_index('primary', {parts = {'id'}})
    s:insert{1, 0, 0, 0}
end)

local stickers, packs = box.space.stickers, box.space.packs
local ballots, sessions = box.space.ballots, box.space.sessions
local server = box.space.server

-- Seed LuaJIT's generator from the OS so pairs differ between restarts.
do
    local b1, b2, b3, b4 = digest.urandom(4):byte(1, 4)
    math.randomseed(((b1 * 256 + b2) * 256 + b3) * 256 + b4)
end

local function card(t)
    local pack = packs:get(t[2])
    return {t[1], t[2], t[3], t[4], t[5], t[6], pack and pack[2] or t[2]}
end

local function touch(uuid, ip, user_agent)
    local now = fiber.time()
    if sessions:get(uuid) == nil then
        sessions:insert{uuid, now, 1, ip, user_agent}
        server:update(1, {{'+', 2, 1}, {'+', 3, 1}})
    else
        sessions:update(uuid, {{'=', 2, now}, {'+', 3, 1}, {'=', 4, ip},
                               {'=', 5, user_agent}})
        server:update(1, {{'+', 3, 1}})
    end
end

function sticker_pair(uuid, ip, user_agent, token_a, token_b, ttl)
    local n = stickers:len()
    if n < 2 then box.error{reason = 'fewer than two stickers loaded'} end
    local a = math.random(n)
    local b = math.random(n - 1)
    if b >= a then b = b + 1 end
    local deadline = fiber.time() + ttl
    box.begin()
    touch(uuid, ip, user_agent)
    ballots:insert{token_a, uuid, a, token_b, deadline}
    ballots:insert{token_b, uuid, b, token_a, deadline}
    box.commit()
    return {card(stickers:get(a)), card(stickers:get(b))}
end

function cast_vote(uuid, win_token, lose_token)
    local win, lose = ballots:get(win_token), ballots:get(lose_token)
    if win == nil or lose == nil or win_token == lose_token then
        return 'unknown'
    end
    if win[4] ~= lose_token or lose[4] ~= win_token then return 'not_pair' end
    if win[2] ~= uuid then return 'foreign' end
    if win[5] < fiber.time() then return 'expired' end
    -- No yield between the checks above and the deletes below, so a second
    -- call with the same tokens finds them gone.
    box.begin()
    ballots:delete(win_token)
    ballots:delete(lose_token)
    stickers:update(win[3], {{'+', 4, 1}, {'+', 5, 1}})
    stickers:update(lose[3], {{'-', 4, 1}, {'+', 6, 1}})
    server:update(1, {{'+', 4, 1}})
    box.commit()
    return 'ok'
end

local function ranked(uuid, ip, user_agent, count, iterator)
    box.begin()
    touch(uuid, ip, user_agent)
    box.commit()
    local result = {}
    for _, t in stickers.index.rating:pairs(nil, {iterator = iterator}) do
        if #result >= count then break end
        result[#result + 1] = card(t)
    end
    return result
end

function top_stickers(uuid, ip, user_agent, count)
    return ranked(uuid, ip, user_agent, count, 'LE')
end

function bottom_stickers(uuid, ip, user_agent, count)
    return ranked(uuid, ip, user_agent, count, 'GE')
end

function site_stats()
    local counters = server:get(1)
    return {packs:len(), stickers:len(), counters[2], counters[3],
            counters[4], sessions:len(), ballots:len()}
end

function list_packs()
    local result = {}
    for _, p in packs:pairs() do
        result[#result + 1] = {p[1], p[2], stickers.index.pack:count(p[1])}
    end
    return result
end

function pack_stickers(name)
    local pack = packs:get(name)
    if pack == nil then return nil end
    local result = {}
    for _, t in stickers.index.pack:pairs(name) do
        result[#result + 1] = {t[1], t[2], t[3], t[4], t[5], t[6], pack[2]}
    end
    return {pack[1], pack[2], result}
end

function get_sticker(pack, id)
    local t = stickers:get(id)
    if t == nil or t[2] ~= pack then return nil end
    return card(t)
end

-- Deletes tuples of `space` found by `index` below `limit` (or the oldest
-- beyond `cap`), in small transactions so other fibers keep running.
local function sweep(space, index, limit, cap)
    local removed = 0
    while true do
        local over = space:len() - cap
        local keys = {}
        for _, t in index:pairs(nil, {iterator = 'GE'}) do
            if #keys >= 1000 then break end
            local key_field = t[index.parts[1].fieldno]
            if key_field >= limit and #keys >= over then break end
            keys[#keys + 1] = t[1]
        end
        if #keys == 0 then return removed end
        box.begin()
        for _, key in ipairs(keys) do space:delete(key) end
        box.commit()
        removed = removed + #keys
        fiber.yield()
    end
end

function expire(session_ttl, max_sessions, max_ballots)
    local now = fiber.time()
    return {sweep(ballots, ballots.index.deadline, now, max_ballots),
            sweep(sessions, sessions.index.last_seen, now - session_ttl,
                  max_sessions)}
end

function load_stickers(pack_rows, sticker_rows)
    box.begin()
    for _, p in ipairs(pack_rows) do
        if packs:get(p[1]) == nil then packs:insert(p) end
    end
    local inserted = 0
    for _, s in ipairs(sticker_rows) do
        if stickers:get(s[1]) == nil then
            stickers:insert(s)
            inserted = inserted + 1
        end
    end
    box.commit()
    return inserted
end

local APP_FUNCTIONS = {'sticker_pair', 'cast_vote', 'top_stickers',
    'bottom_stickers', 'site_stats', 'list_packs', 'pack_stickers',
    'get_sticker', 'expire'}

-- Users are (re)configured on every start so passwords follow the settings.
box.once('stickers-users-v1', function()
    box.schema.user.create('sticker_app', {password = 'x'})
    box.schema.user.create('sticker_admin', {password = 'x'})
    for _, name in ipairs(APP_FUNCTIONS) do
        box.schema.func.create(name, {setuid = true})
        box.schema.user.grant('sticker_app', 'execute', 'function', name)
        box.schema.user.grant('sticker_admin', 'execute', 'function', name)
    end
    box.schema.func.create('load_stickers', {setuid = true})
    box.schema.user.grant('sticker_admin', 'execute', 'function',
                          'load_stickers')
    box.schema.user.grant('sticker_app', 'read', 'space', 'stickers')
    box.schema.user.grant('sticker_app', 'read', 'space', 'packs')
end)
local APP_PASSWORD = env('TNT_APP_PASSWORD', nil)
local ADMIN_PASSWORD = env('TNT_ADMIN_PASSWORD', nil)
box.schema.user.passwd('sticker_app', APP_PASSWORD or 'sticker_app')
box.schema.user.passwd('sticker_admin', ADMIN_PASSWORD or 'sticker_admin')

-- A Unix socket or a loopback host; a bare port means every interface.
local function loopback(listen)
    if listen:find('^/') or listen:find('^unix/') then return true end
    local host = listen:match('^(.*):%d+$')
    if host == nil then return false end
    host = host:gsub('^%[(.*)%]$', '%1')
    return host == 'localhost' or host == '::1' or host:find('^127%.') ~= nil
end

local LISTEN = env('TNT_LISTEN', '127.0.0.1:3301')
if not loopback(LISTEN) and (APP_PASSWORD == nil or APP_PASSWORD == 'sticker_app'
        or ADMIN_PASSWORD == nil or ADMIN_PASSWORD == 'sticker_admin') then
    log.error('refusing to listen on %s with a default password: set '
              .. 'TNT_APP_PASSWORD and TNT_ADMIN_PASSWORD, or listen on '
              .. '127.0.0.1', LISTEN)
    os.exit(1)
end
box.cfg{listen = LISTEN}

fiber.create(function()
    fiber.name('expiry')
    while true do
        fiber.sleep(SWEEP_EVERY)
        local ok, err = pcall(expire, SESSION_TTL, MAX_SESSIONS, MAX_BALLOTS)
        if not ok then log.error('expiry failed: %s', err) end
    end
end)

log.info('sticker site instance ready')

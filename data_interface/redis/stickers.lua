#!lua name=stickers
-- The sticker site's Redis Functions: every page operation is one FCALL of
-- a function below, atomic (Redis runs one at a time) and checked before it
-- writes anything. redis_data.py loads this library (FUNCTION LOAD) with
-- the loader's account. Keys, all under st: (the accounts' ACL):
--   st:stickers      hash  field: the id in 16 digits (a MEMBER), value:
--                    the sticker as one MessagePack document, {pack, image,
--                    rating, plus, minus, title} (its pack's title, written
--                    with it: packs never change once loaded), as
--                    PostgreSQL keeps each row as one jsonb document
--   st:ratings       zset  MEMBER by rating, so that ZRANGE orders ties by
--                    id as the other backends do
--   st:packs         zset  pack names (score 0: in name order)
--   st:pack:NAME     hash  title
--   st:pack_ids:NAME zset  the pack's ids (score: id)
--   st:s:UUID        hash  seen visits ip ua (a session; TTL as a backstop)
--   st:sessions      zset  uuid by last seen
--   st:b:TOKEN       hash  session sticker partner deadline (TTL too)
--   st:ballots       zset  token by deadline
--   st:counters      hash  users views votes
--   st:limits        hash  session_ttl max_sessions max_ballots sweep_every
--                    (the loader's; the app may only read it)
--   st:swept         when the app's last sweep ended
-- Functions only the loader may call take the key st:admin, which the
-- app's account may not name.
local VERSION = '4'

local MAX_IP, MAX_AGENT, MAX_NAME = 64, 256, 64
local MAX_COUNT, MAX_TTL, MAX_VISITS = 100, 3600, 1000
local MAX_BATCH = 10000
-- Seconds a session or ballot key outlives its time, in case no sweep runs.
local GRACE = 3600
local ADMIN = 'st:admin'

local function refuse(what)
    error({err = 'bad argument: ' .. what}, 0)
end

-- Lua 5.1 has no utf8 library: valid UTF-8, as Tarantool's utf8.len checks.
local function utf8_ok(s)
    if not s:find('[\128-\255]') then return true end
    local i, n = 1, #s
    while i <= n do
        local c = s:byte(i)
        local size, low, high = 1, 0x80, 0xBF
        if c < 0x80 then size = 1
        elseif c >= 0xC2 and c <= 0xDF then size = 2
        elseif c >= 0xE0 and c <= 0xEF then
            size = 3
            if c == 0xE0 then low = 0xA0 elseif c == 0xED then high = 0x9F end
        elseif c >= 0xF0 and c <= 0xF4 then
            size = 4
            if c == 0xF0 then low = 0x90 elseif c == 0xF4 then high = 0x8F end
        else return false end
        for j = 1, size - 1 do
            local b = s:byte(i + j)
            if b == nil then return false end
            if j == 1 and (b < low or b > high) then return false end
            if b < 0x80 or b > 0xBF then return false end
        end
        i = i + size
    end
    return true
end

local function check_text(value, max_bytes, what)
    if type(value) ~= 'string' or #value > max_bytes or not utf8_ok(value) then
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

-- An integer in low..high from its decimal text.
local function integer(value, low, high, what)
    local n = type(value) == 'string' and value:match('^-?%d+$')
              and tonumber(value)
    if not n or n < low or n > high then
        refuse(what .. ' must be an integer in ' .. low .. '..' .. high)
    end
    return n
end

local function seconds(value, what)
    local n = tonumber(value)
    if n == nil or not (n >= 0) or n == math.huge then
        refuse(what .. ' must be a number of seconds')
    end
    return n
end

local function now()
    local t = redis.call('TIME')
    return tonumber(t[1]) + tonumber(t[2]) / 1e6
end

local function member(id)
    return string.format('%016d', id)
end

-- Sticker rows as every backend returns them, for a list of members: one
-- read (a member not there gives nil).
local function cards(members)
    if #members == 0 then return {} end
    local docs = redis.call('HMGET', 'st:stickers', unpack(members))
    local result = {}
    for i, m in ipairs(members) do
        if docs[i] then
            local s = cmsgpack.unpack(docs[i])
            result[i] = {tonumber(m), s[1], s[2], s[3], s[4], s[5], s[6]}
        end
    end
    return result
end

-- Add `by` to a sticker's rating and 1 to its votes for or against.
local function rate(m, by)
    local s = cmsgpack.unpack(redis.call('HGET', 'st:stickers', m))
    s[3] = s[3] + by
    if by > 0 then s[4] = s[4] + 1 else s[5] = s[5] + 1 end
    redis.call('HSET', 'st:stickers', m, cmsgpack.pack(s))
    redis.call('ZINCRBY', 'st:ratings', by, m)
end

local function limits()
    local l = redis.call('HMGET', 'st:limits', 'session_ttl', 'max_sessions',
                        'max_ballots')
    return tonumber(l[1]) or 900, tonumber(l[2]) or 1000000,
           tonumber(l[3]) or 1000000
end

-- Delete `keys` (members of `index`) and their records under `prefix`.
local function drop(index, prefix, keys)
    for i = 1, #keys, 1000 do
        local part = {}
        for j = i, math.min(i + 999, #keys) do
            part[#part + 1] = keys[j]
            redis.call('DEL', prefix .. keys[j])
        end
        redis.call('ZREM', index, unpack(part))
    end
end

-- Room for `n` more in `index` under `cap`: the oldest go, in this call.
local function make_room(index, prefix, cap, n)
    local over = redis.call('ZCARD', index) + n - cap
    if over > 0 then
        drop(index, prefix, redis.call('ZRANGE', index, 0, over - 1))
    end
end

local function record_visits(_, args)
    if #args % 3 ~= 0 or #args / 3 > MAX_VISITS then
        refuse('visits must be an array of at most ' .. MAX_VISITS)
    end
    for i = 1, #args, 3 do
        check_uuid(args[i])
        check_text(args[i + 1], MAX_IP, 'ip')
        check_text(args[i + 2], MAX_AGENT, 'user agent')
    end
    if #args == 0 then return 0 end
    local t = now()
    local ttl, max_sessions = limits()
    local keep = math.ceil(ttl) + GRACE
    local new = 0
    for i = 1, #args, 3 do
        local uuid, key = args[i], 'st:s:' .. args[i]
        if not redis.call('ZSCORE', 'st:sessions', uuid) then
            make_room('st:sessions', 'st:s:', max_sessions, 1)
            new = new + 1
        end
        redis.call('ZADD', 'st:sessions', t, uuid)
        redis.call('HSET', key, 'seen', t, 'ip', args[i + 1],
                   'ua', args[i + 2])
        redis.call('HINCRBY', key, 'visits', 1)
        redis.call('EXPIRE', key, keep)
    end
    redis.call('HINCRBY', 'st:counters', 'users', new)
    redis.call('HINCRBY', 'st:counters', 'views', #args / 3)
    return #args / 3
end

local function sticker_pair(_, args)
    local uuid, token_a, token_b = args[1], args[2], args[3]
    check_uuid(uuid)
    check_token(token_a)
    check_token(token_b)
    if token_a == token_b then refuse('the two ballot tokens must differ') end
    local ttl = tonumber(args[4])
    if ttl == nil or not (ttl > 0 and ttl <= MAX_TTL) then
        refuse('ttl must be a number of seconds in (0, ' .. MAX_TTL .. ']')
    end
    if #args ~= 4 then refuse('sticker_pair takes 4 arguments') end
    if redis.call('ZCARD', 'st:ratings') < 2 then
        return redis.error_reply('fewer than two stickers loaded')
    end
    if redis.call('EXISTS', 'st:b:' .. token_a, 'st:b:' .. token_b) > 0 then
        return redis.error_reply('ballot token already issued')
    end
    local picked = redis.call('ZRANDMEMBER', 'st:ratings', 2)
    local a, b = picked[1], picked[2]
    local _, _, max_ballots = limits()
    make_room('st:ballots', 'st:b:', max_ballots, 2)
    local deadline = now() + ttl
    local keep = math.ceil((ttl + GRACE) * 1000)
    redis.call('HSET', 'st:b:' .. token_a, 'session', uuid, 'sticker', a,
               'partner', token_b, 'deadline', deadline)
    redis.call('HSET', 'st:b:' .. token_b, 'session', uuid, 'sticker', b,
               'partner', token_a, 'deadline', deadline)
    redis.call('PEXPIRE', 'st:b:' .. token_a, keep)
    redis.call('PEXPIRE', 'st:b:' .. token_b, keep)
    redis.call('ZADD', 'st:ballots', deadline, token_a, deadline, token_b)
    return cards({a, b})
end

local FIELDS = {'session', 'sticker', 'partner', 'deadline'}

local function cast_vote(_, args)
    local uuid, win_token, lose_token = args[1], args[2], args[3]
    check_uuid(uuid)
    check_token(win_token)
    check_token(lose_token)
    local win = redis.call('HMGET', 'st:b:' .. win_token, unpack(FIELDS))
    local lose = redis.call('HMGET', 'st:b:' .. lose_token, unpack(FIELDS))
    if not win[1] or not lose[1] or win_token == lose_token then
        return 'unknown'
    end
    if win[3] ~= lose_token or lose[3] ~= win_token then return 'not_pair' end
    if win[1] ~= uuid then return 'foreign' end
    if tonumber(win[4]) < now() then return 'expired' end
    redis.call('DEL', 'st:b:' .. win_token, 'st:b:' .. lose_token)
    redis.call('ZREM', 'st:ballots', win_token, lose_token)
    rate(win[2], 1)
    rate(lose[2], -1)
    redis.call('HINCRBY', 'st:counters', 'votes', 1)
    return 'ok'
end

local function ranked(args, reverse)
    local count = integer(args[1], 1, MAX_COUNT, 'count')
    local ids = reverse
        and redis.call('ZRANGE', 'st:ratings', 0, count - 1, 'REV')
        or redis.call('ZRANGE', 'st:ratings', 0, count - 1)
    return cards(ids)
end

local function top_stickers(_, args) return ranked(args, true) end
local function bottom_stickers(_, args) return ranked(args, false) end

local function site_stats()
    local c = redis.call('HMGET', 'st:counters', 'users', 'views', 'votes')
    return {redis.call('ZCARD', 'st:packs'), redis.call('ZCARD', 'st:ratings'),
            tonumber(c[1]) or 0, tonumber(c[2]) or 0, tonumber(c[3]) or 0,
            redis.call('ZCARD', 'st:sessions'),
            redis.call('ZCARD', 'st:ballots')}
end

local function list_packs()
    local result = {}
    for i, name in ipairs(redis.call('ZRANGE', 'st:packs', 0, -1)) do
        result[i] = {name, redis.call('HGET', 'st:pack:' .. name, 'title'),
                     redis.call('ZCARD', 'st:pack_ids:' .. name)}
    end
    return result
end

local function pack_stickers(_, args)
    local name = args[1]
    check_text(name, MAX_NAME, 'pack name')
    local title = redis.call('HGET', 'st:pack:' .. name, 'title')
    if not title then return false end
    return {name, title,
            cards(redis.call('ZRANGE', 'st:pack_ids:' .. name, 0, -1))}
end

local function get_sticker(_, args)
    local pack = args[1]
    check_text(pack, MAX_NAME, 'pack name')
    local id = integer(args[2], 0, 2 ^ 53, 'sticker id')
    local s = cards({member(id)})[1]
    if s == nil or s[2] ~= pack then return false end
    return s
end

-- Remove up to `batch` ballots past their deadline and sessions idle past
-- `ttl`, then the oldest beyond the caps: {ballots, sessions} removed.
local function sweep(ttl, max_sessions, max_ballots, batch)
    local t = now()
    local function one(index, prefix, limit, cap)
        local keys = redis.call('ZRANGE', index, '-inf', '(' .. limit,
                                'BYSCORE', 'LIMIT', 0, batch)
        drop(index, prefix, keys)
        local over = math.min(redis.call('ZCARD', index) - cap,
                              batch - #keys)
        if over > 0 then
            local oldest = redis.call('ZRANGE', index, 0, over - 1)
            drop(index, prefix, oldest)
            return #keys + #oldest
        end
        return #keys
    end
    return {one('st:ballots', 'st:b:', t, max_ballots),
            one('st:sessions', 'st:s:', t - ttl, max_sessions)}
end

-- The app's sweep, by the limits in st:limits (the site calls it every
-- refresh). Redis keeps the pace: a sweep that ended less than sweep_every
-- seconds ago (st:swept) is not begun again, however many servers ask.
local function expire(_, args)
    local batch = integer(args[1], 1, MAX_BATCH, 'batch')
    local t = now()
    local every = tonumber(redis.call('HGET', 'st:limits', 'sweep_every'))
    if t - (tonumber(redis.call('GET', 'st:swept')) or 0) < (every or 0) then
        return {0, 0}
    end
    local ttl, max_sessions, max_ballots = limits()
    local removed = sweep(ttl, max_sessions, max_ballots, batch)
    if removed[1] < batch and removed[2] < batch then
        redis.call('SET', 'st:swept', t)
    end
    return removed
end

local function check_admin(keys)
    if keys[1] ~= ADMIN then refuse('this function takes the key ' .. ADMIN) end
end

-- The loader's sweep with limits lowered, never raised (tests).
local function expire_below(keys, args)
    check_admin(keys)
    local ttl, max_sessions, max_ballots = limits()
    return sweep(math.min(seconds(args[1], 'session ttl'), ttl),
                 math.min(integer(args[2], 0, 2 ^ 53, 'max sessions'),
                          max_sessions),
                 math.min(integer(args[3], 0, 2 ^ 53, 'max ballots'),
                          max_ballots),
                 integer(args[4], 1, MAX_BATCH, 'batch'))
end

local function set_limits(keys, args)
    check_admin(keys)
    redis.call('HSET', 'st:limits',
               'session_ttl', seconds(args[1], 'session ttl'),
               'max_sessions', integer(args[2], 0, 2 ^ 53, 'max sessions'),
               'max_ballots', integer(args[3], 0, 2 ^ 53, 'max ballots'),
               'sweep_every', seconds(args[4] or '0', 'sweep every'))
    return {limits()}
end

-- The limits in force, and 1 if the loader has set them (else 0).
local function get_limits(keys)
    check_admin(keys)
    local ttl, max_sessions, max_ballots = limits()
    return {ttl, max_sessions, max_ballots,
            redis.call('EXISTS', 'st:limits')}
end

-- Packs then stickers, flat: npacks, (name, title) * npacks, then
-- (id, pack, image, rating, plus, minus) each; those there are kept.
local function load_stickers(keys, args)
    check_admin(keys)
    local npacks = integer(args[1], 0, #args, 'pack count')
    local first = 2 + 2 * npacks
    if first - 1 > #args or (#args - first + 1) % 6 ~= 0 then
        refuse('load_stickers takes packs of 2 fields and stickers of 6')
    end
    for i = 2, first - 1, 2 do
        check_text(args[i], MAX_NAME, 'pack name')
        if redis.call('EXISTS', 'st:pack:' .. args[i]) == 0 then
            redis.call('HSET', 'st:pack:' .. args[i], 'title', args[i + 1])
            redis.call('ZADD', 'st:packs', 0, args[i])
        end
    end
    local inserted = 0
    for i = first, #args, 6 do
        local id = integer(args[i], 1, 2 ^ 53, 'sticker id')
        local m = member(id)
        if redis.call('HEXISTS', 'st:stickers', m) == 0 then
            local rating = integer(args[i + 3], -2 ^ 53, 2 ^ 53, 'rating')
            local title = redis.call('HGET', 'st:pack:' .. args[i + 1],
                                     'title') or args[i + 1]
            redis.call('HSET', 'st:stickers', m, cmsgpack.pack({
                args[i + 1], args[i + 2], rating,
                integer(args[i + 4], 0, 2 ^ 53, 'votes'),
                integer(args[i + 5], 0, 2 ^ 53, 'votes'), title}))
            redis.call('ZADD', 'st:ratings', rating, m)
            redis.call('ZADD', 'st:pack_ids:' .. args[i + 1], id, m)
            inserted = inserted + 1
        end
    end
    return inserted
end

local function version() return VERSION end

-- At load time only `redis` is there (not even pairs): one call each.
local function writes(name, f) redis.register_function(name, f) end
local function reads(name, f)
    redis.register_function{function_name = name, callback = f,
                            flags = {'no-writes'}}
end
writes('record_visits', record_visits)
writes('sticker_pair', sticker_pair)
writes('cast_vote', cast_vote)
writes('expire', expire)
writes('expire_below', expire_below)
writes('set_limits', set_limits)
writes('load_stickers', load_stickers)
reads('top_stickers', top_stickers)
reads('bottom_stickers', bottom_stickers)
reads('site_stats', site_stats)
reads('list_packs', list_packs)
reads('pack_stickers', pack_stickers)
reads('get_sticker', get_sticker)
reads('limits', get_limits)
reads('stickers_version', version)

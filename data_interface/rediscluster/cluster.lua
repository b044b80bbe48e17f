#!lua name=stickers_cluster
-- The sticker site's Redis Functions for a Redis Cluster. A cluster runs a
-- function on the keys of one slot only, so the keys are in hash-tagged
-- groups and every function works in one group, named by KEYS[1]:
--   the catalogue, tag {c} (every vote reaches it):
--     st:{c}:stickers        hash  MEMBER -> MessagePack {pack, image,
--                            rating, plus, minus, title}
--     st:{c}:ratings         zset  MEMBER by rating
--     st:{c}:packs           zset  pack names
--     st:{c}:pack:NAME       hash  title
--     st:{c}:pack_ids:NAME   zset  the pack's ids
--     st:{c}:applied         hash  bucket -> the highest vote sequence of
--                            that bucket applied with all before it
--     st:{c}:early:BUCKET    zset  sequences applied above a gap
--   a bucket, tag {bN} (N in 0..63, chosen from the session):
--     st:{bN}:s:UUID         hash  seen visits ip ua
--     st:{bN}:sessions       zset  uuid by last seen
--     st:{bN}:b:TOKEN        hash  session sticker partner deadline
--     st:{bN}:ballots        zset  token by deadline
--     st:{bN}:counters       hash  users views votes, seq (the last vote's
--                            sequence), mark mark_at (applied up to mark,
--                            learned at mark_at), floor (log trimmed to)
--     st:{bN}:log            hash  seq -> "WIN LOSE" (the votes' effects)
--     st:{bN}:limits         hash  session_ttl max_sessions max_ballots
--                            sweep_every (this bucket's share of the caps)
--     st:{bN}:swept          when this bucket's last sweep ended
-- A vote is counted in its bucket (ballots consumed, votes + 1, its effect
-- logged with the next sequence) in one call; the catalogue applies a
-- bucket's sequence once (apply_votes), so sending it again, by the vote's
-- request or by a sweep, changes nothing; a call's votes move each sticker
-- once, by their sum (its writes do not grow with the votes it carries,
-- only with the stickers they name). Functions only the loader may
-- call take the key st:{TAG}:admin, which the app's account may not name.
local VERSION = '5'

local MAX_IP, MAX_AGENT, MAX_NAME = 64, 256, 64
local MAX_COUNT, MAX_TTL, MAX_VISITS = 100, 3600, 1000
local MAX_BATCH, MAX_LOG = 10000, 1000
local GRACE = 3600
-- Seconds a logged vote is kept after the catalogue said it was applied:
-- if a failover of the catalogue loses the last writes its replica had not
-- received, the sweep applies them again from here.
local HOLD = 10

local function refuse(what)
    error({err = 'bad argument: ' .. what}, 0)
end

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

local function check_member(value)
    if type(value) ~= 'string' or not value:match('^%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d$') then
        refuse('a sticker must be its id in 16 digits')
    end
end

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

-- The group's prefix 'st:{TAG}:' of KEYS[1], which must be that prefix
-- then `name`, in a bucket (bucket true) or the catalogue.
local function group(keys, name, bucket)
    local key = keys[1]
    local prefix = type(key) == 'string' and key:match('^(st:{[bc]%d*}:)')
    local ok = prefix and key == prefix .. name
    if ok and bucket then ok = prefix:match('^st:{b%d+}:$') ~= nil
    elseif ok then ok = prefix == 'st:{c}:' end
    if not ok then
        refuse('this function takes the key st:{' .. (bucket and 'bN' or 'c')
               .. '}:' .. name)
    end
    return prefix
end

-- Catalogue.
local C = 'st:{c}:'

local function cards(members)
    if #members == 0 then return {} end
    local docs = redis.call('HMGET', C .. 'stickers', unpack(members))
    local result = {}
    for i, m in ipairs(members) do
        if docs[i] then
            local s = cmsgpack.unpack(docs[i])
            result[i] = {tonumber(m), s[1], s[2], s[3], s[4], s[5], s[6]}
        end
    end
    return result
end

local function pick_pair(keys)
    group(keys, 'ratings')
    if redis.call('ZCARD', C .. 'ratings') < 2 then
        return redis.error_reply('fewer than two stickers loaded')
    end
    return cards(redis.call('ZRANDMEMBER', C .. 'ratings', 2))
end

-- A command with many arguments, in parts (Lua's stack holds some 8,000).
local function call_parts(command, key, args, width)
    local step = width * 1000
    for i = 1, #args, step do
        redis.call(command, key,
                   unpack(args, i, math.min(i + step - 1, #args)))
    end
end

-- Which of a bucket's votes (seq, win, lose each, at votes[first..last])
-- are above its applied mark and not applied yet, each sequence once;
-- floor: sequences up to it are gone from the bucket's log (what was not
-- applied of them is lost). Adds those to `take`; returns the new mark,
-- written at once, or kept in `marks` (bucket -> mark, read by the caller
-- for every bucket of its call, written by it after: a bucket may come
-- again in the same call).
local function new_votes(bucket, floor, votes, first, last, take, marks)
    local early = C .. 'early:' .. bucket
    local mark = marks and marks[bucket]
        or tonumber(redis.call('HGET', C .. 'applied', bucket)) or 0
    if floor > mark then
        mark = floor
        redis.call('ZREMRANGEBYSCORE', early, '-inf', floor)
    end
    local seen, held = {}, redis.call('ZRANGE', early, mark + 1, '+inf',
                                      'BYSCORE')
    for _, seq in ipairs(held) do seen[tonumber(seq)] = true end
    local added = {}
    for i = first, last, 3 do
        local seq = tonumber(votes[i])
        if seq > mark and not seen[seq] then
            seen[seq] = true
            added[#added + 1] = seq
            take[#take + 1] = votes[i + 1]
            take[#take + 1] = votes[i + 2]
        end
    end
    local start = mark
    while seen[mark + 1] do mark = mark + 1 end
    if #held > 0 and mark > start then
        redis.call('ZREMRANGEBYSCORE', early, '-inf', mark)
    end
    local above = {}
    for _, seq in ipairs(added) do
        if seq > mark then
            above[#above + 1] = seq
            above[#above + 1] = seq
        end
    end
    call_parts('ZADD', early, above, 2)
    if marks then
        marks[bucket] = mark
    else
        redis.call('HSET', C .. 'applied', bucket, mark)
    end
    return mark
end

-- The votes taken (win, lose each), applied with their effects summed per
-- sticker: one HMGET, one HSET and one ZADD whatever their number. A vote
-- one of whose stickers left the catalogue counts in its bucket and moves
-- none (a ballot names what the app gave it).
local function apply_taken(take)
    if #take == 0 then return end
    local by, members = {}, {}
    for _, m in ipairs(take) do
        if not by[m] then
            by[m] = {0, 0}
            members[#members + 1] = m
        end
    end
    local docs = {}
    for i = 1, #members, 4000 do
        local part = {unpack(members, i, math.min(i + 3999, #members))}
        local got = redis.call('HMGET', C .. 'stickers', unpack(part))
        for j, m in ipairs(part) do docs[m] = got[j] end
    end
    for i = 1, #take, 2 do
        local win, lose = take[i], take[i + 1]
        if docs[win] and docs[lose] then
            by[win][1] = by[win][1] + 1
            by[lose][2] = by[lose][2] + 1
        end
    end
    local fields, scores = {}, {}
    for _, m in ipairs(members) do
        local plus, minus = by[m][1], by[m][2]
        if plus + minus > 0 then
            local s = cmsgpack.unpack(docs[m])
            s[3], s[4], s[5] = s[3] + plus - minus, s[4] + plus, s[5] + minus
            fields[#fields + 1] = m
            fields[#fields + 1] = cmsgpack.pack(s)
            scores[#scores + 1] = s[3]
            scores[#scores + 1] = m
        end
    end
    call_parts('HSET', C .. 'stickers', fields, 2)
    call_parts('ZADD', C .. 'ratings', scores, 2)
end

local function check_votes(args, first)
    if (#args - first + 1) % 3 ~= 0 or (#args - first + 1) / 3 > MAX_LOG then
        refuse('at most ' .. MAX_LOG .. ' votes of 3 fields each')
    end
    for i = first, #args, 3 do
        integer(args[i], 1, 2 ^ 53, 'sequence')
        check_member(args[i + 1])
        check_member(args[i + 2])
    end
end

-- A bucket's logged votes: bucket, floor, then (seq, win, lose) each, in
-- any order (the sweep's). Returns the bucket's applied mark.
local function apply_votes(keys, args)
    group(keys, 'applied')
    local bucket = integer(args[1], 0, 1023, 'bucket')
    local floor = integer(args[2] or '', 0, 2 ^ 53, 'floor')
    check_votes(args, 3)
    local take = {}
    local mark = new_votes(bucket, floor, args, 3, #args, take)
    apply_taken(take)
    return mark
end

-- The votes just counted in several buckets, applied in one call:
-- (bucket, seq, win, lose) each, a bucket's in a row. Returns how many.
local function apply_many(keys, args)
    group(keys, 'applied')
    if #args % 4 ~= 0 or #args / 4 > MAX_LOG then
        refuse('apply_many takes at most ' .. MAX_LOG .. ' votes of 4 fields')
    end
    local votes, buckets, marks = {}, {}, {}
    for i = 1, #args, 4 do
        local b = integer(args[i], 0, 1023, 'bucket')
        if not marks[b] then
            marks[b] = 0
            buckets[#buckets + 1] = b
        end
        votes[#votes + 1] = args[i + 1]
        votes[#votes + 1] = args[i + 2]
        votes[#votes + 1] = args[i + 3]
    end
    check_votes(votes, 1)
    if #buckets == 0 then return 0 end
    -- every bucket's mark in one read and one write, not two calls each
    local got = redis.call('HMGET', C .. 'applied', unpack(buckets))
    for k, b in ipairs(buckets) do marks[b] = tonumber(got[k]) or 0 end
    local take, i = {}, 1
    while i <= #args do
        local j = i
        while j + 4 <= #args and args[j + 4] == args[i] do j = j + 4 end
        new_votes(tonumber(args[i]), 0, votes, (i - 1) / 4 * 3 + 1,
                  (j - 1) / 4 * 3 + 1, take, marks)
        i = j + 4
    end
    local written = {}
    for _, b in ipairs(buckets) do
        written[#written + 1] = b
        written[#written + 1] = marks[b]
    end
    redis.call('HSET', C .. 'applied', unpack(written))
    apply_taken(take)
    return #args / 4
end

local function applied_marks(keys)
    group(keys, 'applied')
    return redis.call('HGETALL', C .. 'applied')
end

local function ranked(keys, args, reverse)
    group(keys, 'ratings')
    local count = integer(args[1], 1, MAX_COUNT, 'count')
    local ids = reverse
        and redis.call('ZRANGE', C .. 'ratings', 0, count - 1, 'REV')
        or redis.call('ZRANGE', C .. 'ratings', 0, count - 1)
    return cards(ids)
end

local function top_stickers(keys, args) return ranked(keys, args, true) end
local function bottom_stickers(keys, args) return ranked(keys, args, false) end

local function catalogue_stats(keys)
    group(keys, 'ratings')
    return {redis.call('ZCARD', C .. 'packs'),
            redis.call('ZCARD', C .. 'ratings')}
end

local function list_packs(keys)
    group(keys, 'ratings')
    local result = {}
    for i, name in ipairs(redis.call('ZRANGE', C .. 'packs', 0, -1)) do
        result[i] = {name, redis.call('HGET', C .. 'pack:' .. name, 'title'),
                     redis.call('ZCARD', C .. 'pack_ids:' .. name)}
    end
    return result
end

local function pack_stickers(keys, args)
    group(keys, 'ratings')
    local name = args[1]
    check_text(name, MAX_NAME, 'pack name')
    local title = redis.call('HGET', C .. 'pack:' .. name, 'title')
    if not title then return false end
    return {name, title,
            cards(redis.call('ZRANGE', C .. 'pack_ids:' .. name, 0, -1))}
end

local function get_sticker(keys, args)
    group(keys, 'ratings')
    local pack = args[1]
    check_text(pack, MAX_NAME, 'pack name')
    local id = integer(args[2], 0, 2 ^ 53, 'sticker id')
    local s = cards({member(id)})[1]
    if s == nil or s[2] ~= pack then return false end
    return s
end

local function load_stickers(keys, args)
    group(keys, 'admin')
    local npacks = integer(args[1], 0, #args, 'pack count')
    local first = 2 + 2 * npacks
    if first - 1 > #args or (#args - first + 1) % 6 ~= 0 then
        refuse('load_stickers takes packs of 2 fields and stickers of 6')
    end
    for i = 2, first - 1, 2 do
        check_text(args[i], MAX_NAME, 'pack name')
        if redis.call('EXISTS', C .. 'pack:' .. args[i]) == 0 then
            redis.call('HSET', C .. 'pack:' .. args[i], 'title', args[i + 1])
            redis.call('ZADD', C .. 'packs', 0, args[i])
        end
    end
    local inserted = 0
    for i = first, #args, 6 do
        local id = integer(args[i], 1, 2 ^ 53, 'sticker id')
        local m = member(id)
        if redis.call('HEXISTS', C .. 'stickers', m) == 0 then
            local rating = integer(args[i + 3], -2 ^ 53, 2 ^ 53, 'rating')
            local title = redis.call('HGET', C .. 'pack:' .. args[i + 1],
                                     'title') or args[i + 1]
            redis.call('HSET', C .. 'stickers', m, cmsgpack.pack({
                args[i + 1], args[i + 2], rating,
                integer(args[i + 4], 0, 2 ^ 53, 'votes'),
                integer(args[i + 5], 0, 2 ^ 53, 'votes'), title}))
            redis.call('ZADD', C .. 'ratings', rating, m)
            redis.call('ZADD', C .. 'pack_ids:' .. args[i + 1], id, m)
            inserted = inserted + 1
        end
    end
    return inserted
end

-- Buckets.
local function limits(p)
    local l = redis.call('HMGET', p .. 'limits', 'session_ttl', 'max_sessions',
                        'max_ballots', 'sweep_every')
    return tonumber(l[1]) or 900, tonumber(l[2]) or 100000,
           tonumber(l[3]) or 100000, tonumber(l[4]) or 0
end

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

local function make_room(index, prefix, cap, n)
    local over = redis.call('ZCARD', index) + n - cap
    if over > 0 then
        drop(index, prefix, redis.call('ZRANGE', index, 0, over - 1))
    end
end

local function record_visits(keys, args)
    local p = group(keys, 'sessions', true)
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
    local ttl, max_sessions = limits(p)
    local keep = math.ceil(ttl) + GRACE
    local new = 0
    for i = 1, #args, 3 do
        local uuid, key = args[i], p .. 's:' .. args[i]
        if not redis.call('ZSCORE', p .. 'sessions', uuid) then
            make_room(p .. 'sessions', p .. 's:', max_sessions, 1)
            new = new + 1
        end
        redis.call('ZADD', p .. 'sessions', t, uuid)
        redis.call('HSET', key, 'seen', t, 'ip', args[i + 1],
                   'ua', args[i + 2])
        redis.call('HINCRBY', key, 'visits', 1)
        redis.call('EXPIRE', key, keep)
    end
    redis.call('HINCRBY', p .. 'counters', 'users', new)
    redis.call('HINCRBY', p .. 'counters', 'views', #args / 3)
    return #args / 3
end

-- The pair the catalogue picked (pick_pair), issued in the session's
-- bucket: uuid, token_a, token_b, ttl, member_a, member_b.
local function issue_ballots(keys, args)
    local p = group(keys, 'ballots', true)
    local uuid, token_a, token_b = args[1], args[2], args[3]
    check_uuid(uuid)
    check_token(token_a)
    check_token(token_b)
    if token_a == token_b then refuse('the two ballot tokens must differ') end
    local ttl = tonumber(args[4])
    if ttl == nil or not (ttl > 0 and ttl <= MAX_TTL) then
        refuse('ttl must be a number of seconds in (0, ' .. MAX_TTL .. ']')
    end
    check_member(args[5])
    check_member(args[6])
    if #args ~= 6 then refuse('issue_ballots takes 6 arguments') end
    if redis.call('EXISTS', p .. 'b:' .. token_a, p .. 'b:' .. token_b) > 0 then
        return redis.error_reply('ballot token already issued')
    end
    local _, _, max_ballots = limits(p)
    make_room(p .. 'ballots', p .. 'b:', max_ballots, 2)
    local deadline = now() + ttl
    local keep = math.ceil((ttl + GRACE) * 1000)
    redis.call('HSET', p .. 'b:' .. token_a, 'session', uuid, 'sticker',
               args[5], 'partner', token_b, 'deadline', deadline)
    redis.call('HSET', p .. 'b:' .. token_b, 'session', uuid, 'sticker',
               args[6], 'partner', token_a, 'deadline', deadline)
    redis.call('PEXPIRE', p .. 'b:' .. token_a, keep)
    redis.call('PEXPIRE', p .. 'b:' .. token_b, keep)
    redis.call('ZADD', p .. 'ballots', deadline, token_a, deadline, token_b)
    return 1
end

local FIELDS = {'session', 'sticker', 'partner', 'deadline'}

-- The outcome of a vote, and the two ballots.
local function judge(p, args)
    local uuid, win_token, lose_token = args[1], args[2], args[3]
    check_uuid(uuid)
    check_token(win_token)
    check_token(lose_token)
    local win = redis.call('HMGET', p .. 'b:' .. win_token, unpack(FIELDS))
    local lose = redis.call('HMGET', p .. 'b:' .. lose_token, unpack(FIELDS))
    if not win[1] or not lose[1] or win_token == lose_token then
        -- Which of the two this bucket holds: a pair split over two
        -- buckets is two sessions' ballots, not a pair.
        return 'unknown', win[1] and 1 or 0,
               (lose[1] and win_token ~= lose_token) and 1 or 0
    end
    if win[3] ~= lose_token or lose[3] ~= win_token then return 'not_pair' end
    if win[1] ~= uuid then return 'foreign' end
    if tonumber(win[4]) < now() then return 'expired' end
    return 'ok', win, lose
end

-- {outcome}, or {'unknown', win here, lose here} (1 or 0 each).
local function judge_vote(keys, args)
    local outcome, win, lose = judge(group(keys, 'ballots', true), args)
    if outcome == 'ok' then return {outcome} end
    return {outcome, win, lose}
end

-- {'ok', seq, win, lose} once counted here, else judge_vote's answer.
-- args: uuid, win token, lose token, and maybe the catalogue's applied
-- mark of this bucket: a sequence is never given twice, even where a
-- failover lost the last votes the catalogue has applied.
local function cast_vote(keys, args)
    local p = group(keys, 'ballots', true)
    if #args > 4 then refuse('cast_vote takes at most 4 arguments') end
    local floor = args[4] and integer(args[4], 0, 2 ^ 53, 'mark') or 0
    if floor > (tonumber(redis.call('HGET', p .. 'counters', 'seq')) or 0) then
        redis.call('HSET', p .. 'counters', 'seq', floor)
    end
    local outcome, win, lose = judge(p, args)
    if outcome ~= 'ok' then return {outcome, win, lose} end
    redis.call('DEL', p .. 'b:' .. args[2], p .. 'b:' .. args[3])
    redis.call('ZREM', p .. 'ballots', args[2], args[3])
    redis.call('HINCRBY', p .. 'counters', 'votes', 1)
    local seq = redis.call('HINCRBY', p .. 'counters', 'seq', 1)
    redis.call('HSET', p .. 'log', seq, win[2] .. ' ' .. lose[2])
    return {'ok', seq, win[2], lose[2]}
end

local function bucket_stats(keys)
    local p = group(keys, 'counters', true)
    local c = redis.call('HMGET', p .. 'counters', 'users', 'views', 'votes')
    return {tonumber(c[1]) or 0, tonumber(c[2]) or 0, tonumber(c[3]) or 0,
            redis.call('ZCARD', p .. 'sessions'),
            redis.call('ZCARD', p .. 'ballots')}
end

local function sweep(p, ttl, max_sessions, max_ballots, batch)
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
    return {one(p .. 'ballots', p .. 'b:', t, max_ballots),
            one(p .. 'sessions', p .. 's:', t - ttl, max_sessions)}
end

-- The log: `mark` is what the catalogue says it has applied. Entries up to
-- the mark learned HOLD seconds ago or more go; returns floor, then the
-- entries above `mark` (seq, win, lose each; at most MAX_LOG).
local function settle(p, mark)
    local t = now()
    local c = redis.call('HMGET', p .. 'counters', 'seq', 'mark', 'mark_at',
                         'floor')
    local seq, old = tonumber(c[1]) or 0, tonumber(c[2]) or 0
    local at, floor = tonumber(c[3]) or 0, tonumber(c[4]) or 0
    if mark > seq then
        -- A failover lost votes the catalogue applied: their sequences
        -- are not given again.
        seq = mark
        redis.call('HSET', p .. 'counters', 'seq', seq)
    end
    if mark < old then
        -- The catalogue lost what it had applied (a failover): keep all.
        redis.call('HSET', p .. 'counters', 'mark', mark, 'mark_at', t)
    elseif mark > old and t - at >= HOLD then
        for i = floor + 1, old, 1000 do
            local part = {}
            for j = i, math.min(i + 999, old) do part[#part + 1] = j end
            redis.call('HDEL', p .. 'log', unpack(part))
        end
        floor = math.max(floor, old)
        redis.call('HSET', p .. 'counters', 'mark', mark, 'mark_at', t,
                   'floor', floor)
    end
    local result = {floor}
    local last = math.min(seq, math.max(mark, floor) + MAX_LOG)
    for s = math.max(mark, floor) + 1, last do
        local e = redis.call('HGET', p .. 'log', s)
        if e then
            local win, lose = e:match('^(%d+) (%d+)$')
            result[#result + 1] = s
            result[#result + 1] = win
            result[#result + 1] = lose
        end
    end
    return result
end

-- The app's sweep of a bucket: batch, and the catalogue's applied mark of
-- this bucket. {ballots, sessions removed, then settle's list}. Redis
-- keeps the pace of the removals (sweep_every), not of the log.
local function expire(keys, args)
    local p = group(keys, 'counters', true)
    local batch = integer(args[1], 1, MAX_BATCH, 'batch')
    local mark = integer(args[2] or '', 0, 2 ^ 53, 'mark')
    local t = now()
    local ttl, max_sessions, max_ballots, every = limits(p)
    local removed = {0, 0}
    if t - (tonumber(redis.call('GET', p .. 'swept')) or 0) >= every then
        removed = sweep(p, ttl, max_sessions, max_ballots, batch)
        if removed[1] < batch and removed[2] < batch then
            redis.call('SET', p .. 'swept', t)
        end
    end
    -- A write of its own, so that a WAIT after this call covers every
    -- vote logged before it (the client applies them only then).
    redis.call('HSET', p .. 'counters', 'settled_at', t)
    local result = {removed[1], removed[2]}
    for _, x in ipairs(settle(p, mark)) do result[#result + 1] = x end
    return result
end

local function expire_below(keys, args)
    local p = group(keys, 'admin', true)
    local ttl, max_sessions, max_ballots = limits(p)
    return sweep(p, math.min(seconds(args[1], 'session ttl'), ttl),
                 math.min(integer(args[2], 0, 2 ^ 53, 'max sessions'),
                          max_sessions),
                 math.min(integer(args[3], 0, 2 ^ 53, 'max ballots'),
                          max_ballots),
                 integer(args[4], 1, MAX_BATCH, 'batch'))
end

local function set_limits(keys, args)
    local p = group(keys, 'admin', true)
    redis.call('HSET', p .. 'limits',
               'session_ttl', seconds(args[1], 'session ttl'),
               'max_sessions', integer(args[2], 0, 2 ^ 53, 'max sessions'),
               'max_ballots', integer(args[3], 0, 2 ^ 53, 'max ballots'),
               'sweep_every', seconds(args[4] or '0', 'sweep every'))
    return {limits(p)}
end

local function get_limits(keys)
    local p = group(keys, 'admin', true)
    local ttl, max_sessions, max_ballots, every = limits(p)
    return {ttl, max_sessions, max_ballots, every,
            redis.call('EXISTS', p .. 'limits')}
end

local function version() return VERSION end

local function writes(name, f) redis.register_function(name, f) end
local function reads(name, f)
    redis.register_function{function_name = name, callback = f,
                            flags = {'no-writes'}}
end
writes('record_visits', record_visits)
writes('issue_ballots', issue_ballots)
writes('cast_vote', cast_vote)
writes('apply_votes', apply_votes)
writes('apply_many', apply_many)
writes('expire', expire)
writes('expire_below', expire_below)
writes('set_limits', set_limits)
writes('load_stickers', load_stickers)
reads('pick_pair', pick_pair)
reads('judge_vote', judge_vote)
reads('applied_marks', applied_marks)
reads('bucket_stats', bucket_stats)
reads('top_stickers', top_stickers)
reads('bottom_stickers', bottom_stickers)
reads('catalogue_stats', catalogue_stats)
reads('list_packs', list_packs)
reads('pack_stickers', pack_stickers)
reads('get_sticker', get_sticker)
reads('limits', get_limits)
reads('stickers_version', version)

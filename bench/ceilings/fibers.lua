-- The site's stored functions called in a loop by N fibers inside
-- Tarantool, no network: the database's own ceiling for each call. Run by
-- bench/ceilings/inside.py as `tarantool fibers.lua`, with instance.lua's
-- environment (a scratch directory) and LIMITS_*; loads the data set from
-- CEILINGS_DATA, then prints one JSON line per call and exits.
local fiber = require('fiber')
local clock = require('clock')
local json = require('json')
local fio = require('fio')

dofile(os.getenv('CEILINGS_INSTANCE'))

local SECONDS = tonumber(os.getenv('CEILINGS_SECONDS'))
local FIBERS = tonumber(os.getenv('CEILINGS_FIBERS'))
local RANKED = tonumber(os.getenv('CEILINGS_RANKED'))
local BATCH = tonumber(os.getenv('CEILINGS_BATCH'))
local TTL = tonumber(os.getenv('CEILINGS_TTL'))
local SKIP = (os.getenv('CEILINGS_SKIP') or '') ~= ''

local file = fio.open(os.getenv('CEILINGS_DATA'))
local data = json.decode(file:read())
file:close()
load_stickers(data.packs, data.stickers)
local STICKERS = box.space.stickers:len()

local session = require('uuid').str()
local issued, visitors = 0, 0

local function tokens()
    issued = issued + 1
    return string.format('%021dA', issued), string.format('%021dB', issued)
end

local function issue()
    local a, b = tokens()
    if #sticker_pair(session, a, b, TTL) ~= 2 then return nil end
    return {a, b}
end

local unvoted = {}
local calls = {}

function calls.ranked()
    return #top_stickers(RANKED) == RANKED
end

function calls.pair()
    return issue() ~= nil
end

-- A vote of a pair issued before, then the next pair: the vote page's work.
function calls.vote()
    local pair = table.remove(unvoted) or issue()
    local outcome = cast_vote(session, pair[1], pair[2])
    local next_pair = issue()
    table.insert(unvoted, next_pair)
    return outcome == 'ok' and next_pair ~= nil
end

function calls.visits()
    local batch = {}
    for i = 1, BATCH do
        visitors = visitors + 1
        batch[i] = {string.format('00000000-0000-4000-8000-%012x', visitors),
                    '127.0.0.1', 'fibers.lua'}
    end
    return record_visits(batch) == BATCH
end

function calls.stats()
    local s = site_stats()
    return #s == 7 and s[2] == STICKERS
end

local function run(name)
    local call = calls[name]
    if SKIP then call = function() return false end end
    local before = site_stats()
    local done, bad = 0, 0
    local finished = fiber.channel(FIBERS)
    local deadline = clock.monotonic() + SECONDS
    local started, cpu = clock.monotonic(), os.clock()
    -- A call that never yields (a read) keeps its fiber running to the
    -- deadline; writes yield at their commit, so the fibers share the log.
    for _ = 1, FIBERS do
        fiber.create(function()
            while clock.monotonic() < deadline do
                local ok, result = pcall(call)
                if ok and result then done = done + 1 else bad = bad + 1 end
            end
            finished:put(true)
        end)
    end
    for _ = 1, FIBERS do finished:get() end
    print(json.encode({
        call = name, done = done, bad = bad,
        seconds = clock.monotonic() - started, cpu_s = os.clock() - cpu,
        before = before, after = site_stats(),
        max_ballots = limits()[3]}))
    io.stdout:flush()
end

for name in string.gmatch(os.getenv('CEILINGS_CALLS'), '[^,]+') do
    run(name)
end
os.exit(0)

-- Tarantool instance file of the sticker site: box.cfg, the app module
-- (app.lua, beside this file), accounts and listen. Run:
-- tarantool instance.lua (settings from the environment, see README).
local log = require('log')

local function env(name, default)
    local value = os.getenv(name)
    if value == nil or value == '' then return default end
    return value
end

local dir = env('TNT_DIR', '.')
-- Checked first, before any file is made: the accounts have no default
-- passwords.
local APP_PASSWORD = env('TNT_APP_PASSWORD', nil)
local ADMIN_PASSWORD = env('TNT_ADMIN_PASSWORD', nil)
if APP_PASSWORD == nil or ADMIN_PASSWORD == nil then
    log.error('refusing to start: set TNT_APP_PASSWORD and '
              .. 'TNT_ADMIN_PASSWORD, the passwords of the sticker_app and '
              .. 'sticker_admin accounts (empty ones are refused)')
    os.exit(1)
end
-- listen is set at the end, once the accounts' passwords are.
-- The storage engine of the site's spaces: memtx (in memory) or vinyl (on
-- disk). A data directory keeps the one it was made with.
local ENGINE = env('TNT_ENGINE', 'memtx')
-- HOST:PORT of a primary: this instance is its read-only replica (an
-- anonymous one: the primary keeps no record of it), joined in an empty
-- directory as the loader's account, which may replicate.
local PRIMARY = env('TNT_REPLICA_OF', nil)
local WAL_THRESHOLD = tonumber(env('TNT_CHECKPOINT_WAL_THRESHOLD',
                                   tostring(64 * 1024 * 1024)))
local SERVING = env('TNT_SNAPSHOTS', 'always') ~= 'start'
box.cfg{
    replication = PRIMARY and ('sticker_admin:' .. ADMIN_PASSWORD .. '@'
                               .. PRIMARY) or nil,
    replication_anon = PRIMARY ~= nil,
    read_only = PRIMARY ~= nil,
    replication_connect_timeout = 10,
    memtx_dir = dir,
    vinyl_dir = dir,
    wal_dir = dir,
    pid_file = env('TNT_PID_FILE', nil),
    log = env('TNT_LOG', nil),
    log_level = tonumber(env('TNT_LOG_LEVEL', '5')),
    memtx_memory = tonumber(env('TNT_MEMTX_MEMORY', tostring(1024 * 1024 * 1024))),
    -- vinyl: its in-memory level (writes wait for a dump when it is full)
    -- and its cache of disk pages; Tarantool's defaults, 128 MB each.
    vinyl_memory = tonumber(env('TNT_VINYL_MEMORY', tostring(128 * 1024 * 1024))),
    vinyl_cache = tonumber(env('TNT_VINYL_CACHE', tostring(128 * 1024 * 1024))),
    -- A snapshot every 10 minutes and after WAL_THRESHOLD bytes of log
    -- (recovery replays less at start); with TNT_SNAPSHOTS=start (a
    -- benchmark's engines) none while serving: only the one at start below.
    checkpoint_interval = SERVING and 600 or 0,
    checkpoint_wal_threshold = SERVING and WAL_THRESHOLD or 1e18,
}

-- Tarantool counts that threshold from its own start, so an instance
-- stopped within minutes of each start (server.py runs, a benchmark's
-- engines) would never make a snapshot, and every start would replay every
-- log since the first one, slower each time. So when the logs since the
-- newest snapshot reach the threshold, one is made now, before the instance
-- is ready (a second or two here for the full data set, rather than a
-- snapshot competing with the first requests).
local fio = require('fio')

local function log_since_snapshot()
    local newest = 0
    for _, path in ipairs(fio.glob(fio.pathjoin(dir, '*.snap'))) do
        newest = math.max(newest, tonumber(fio.basename(path, '.snap')) or 0)
    end
    local bytes = 0
    for _, path in ipairs(fio.glob(fio.pathjoin(dir, '*.xlog'))) do
        local stat = fio.stat(path)
        if (tonumber(fio.basename(path, '.xlog')) or 0) >= newest and stat then
            bytes = bytes + stat.size
        end
    end
    return bytes
end

local since = log_since_snapshot()
if PRIMARY == nil and since >= WAL_THRESHOLD then
    log.info('making a snapshot: %d bytes of log since the last one', since)
    box.snapshot()
end
-- From now on a snapshot writes at most this many MB a second ('none': no
-- limit), so that it takes a slice of a core the instance may share over
-- seconds rather than all of it for one to three (docs/databases.md).
box.cfg{snap_io_rate_limit = tonumber(env('TNT_SNAP_IO_RATE_LIMIT', '8'))}

-- The app module sits beside this file, whatever the working directory.
local here = debug.getinfo(1, 'S').source:match('^@(.*/)') or './'
package.path = here .. '?.lua;' .. package.path
local app = require('app')

-- Defaults for an instance run by hand; server.py's managed instance gets
-- the settings of settings.py.
local started, why = pcall(app.start, {
    engine = ENGINE,
    session_ttl = tonumber(env('TNT_SESSION_TTL', '900')),
    sweep_every = tonumber(env('TNT_SWEEP_EVERY', '5')),
    max_sessions = tonumber(env('TNT_MAX_SESSIONS', nil)),
    max_ballots = tonumber(env('TNT_MAX_BALLOTS', nil)),
    replica = PRIMARY ~= nil,
})
if not started then
    log.error('refusing to start: %s', why)
    os.exit(1)
end

-- Users are (re)configured on every start so passwords follow the settings;
-- a replica has its primary's.
local function set_up_users()
    box.once('stickers-users-v1', function()
        box.schema.user.create('sticker_app', {password = 'x'})
        box.schema.user.create('sticker_admin', {password = 'x'})
        box.schema.func.create('load_stickers', {setuid = true})
        box.schema.user.grant('sticker_admin', 'execute', 'function',
                              'load_stickers')
        box.schema.user.grant('sticker_app', 'read', 'space', 'stickers')
        box.schema.user.grant('sticker_app', 'read', 'space', 'packs')
    end)
    -- Grants follow the app's lists on every start, instances made by
    -- older versions of these scripts included.
    local function create(name)
        box.schema.func.create(name, {setuid = true, if_not_exists = true})
        box.schema.user.grant('sticker_admin', 'execute', 'function', name,
                              {if_not_exists = true})
    end
    for _, name in ipairs(app.APP_FUNCTIONS) do
        create(name)
        box.schema.user.grant('sticker_app', 'execute', 'function', name,
                              {if_not_exists = true})
    end
    for _, name in ipairs(app.ADMIN_FUNCTIONS) do
        create(name)
        box.schema.user.revoke('sticker_app', 'execute', 'function', name,
                               {if_exists = true})
    end
    -- Replicas join as the loader.
    box.schema.user.grant('sticker_admin', 'replication', nil, nil,
                          {if_not_exists = true})
    box.schema.user.passwd('sticker_app', APP_PASSWORD)
    box.schema.user.passwd('sticker_admin', ADMIN_PASSWORD)
end
if PRIMARY == nil then set_up_users() end

-- A Unix socket or a loopback host; a bare port means every interface.
local function loopback(listen)
    if listen:find('^/') or listen:find('^unix/') then return true end
    local host = listen:match('^(.*):%d+$')
    if host == nil then return false end
    host = host:gsub('^%[(.*)%]$', '%1')
    return host == 'localhost' or host == '::1' or host:find('^127%.') ~= nil
end

local LISTEN = env('TNT_LISTEN', '127.0.0.1:3301')
-- The accounts' names, the tests' passwords, only on the loopback.
if not loopback(LISTEN) and (APP_PASSWORD == 'sticker_app'
        or ADMIN_PASSWORD == 'sticker_admin') then
    log.error('refusing to listen on %s with an account name as password: '
              .. 'set other TNT_APP_PASSWORD and TNT_ADMIN_PASSWORD, or '
              .. 'listen on 127.0.0.1', LISTEN)
    os.exit(1)
end
box.cfg{listen = LISTEN}

log.info('sticker site instance ready')

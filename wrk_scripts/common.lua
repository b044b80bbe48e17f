-- Shared by the wrk scripts (wrk runs LuaJIT, Lua 5.1): the GET load of one
-- page, plain or pipelined, and the single JSON line every script prints at
-- the end. A script loads it with package.path set to its own directory.
local M = {}

-- Pipeline depth from the environment: WRK_PIPELINE (default 16).
function M.depth()
  local text = os.getenv("WRK_PIPELINE")
  if text == nil or text == "" then return 16 end
  local n = tonumber(text)
  if n == nil or n < 1 or n ~= math.floor(n) then
    error("WRK_PIPELINE must be a positive integer, not " .. text)
  end
  return n
end

-- GETs of `path`, `depth` requests written back to back per connection.
function M.get(name, path, depth)
  if depth == 1 then
    -- No request() at all: wrk then builds the request once (static).
    wrk.path = path
  else
    local batch
    init = function(args)
      local r = {}
      for i = 1, depth do r[i] = wrk.format("GET", path) end
      batch = table.concat(r)
    end
    request = function() return batch end
  end
  M.report({script = name, path = path, pipeline = depth})
end

local function encode(value)
  local kind = type(value)
  if kind == "number" then
    if value == math.floor(value) and math.abs(value) < 2^53 then
      return string.format("%d", value)
    end
    return string.format("%.3f", value)
  elseif kind == "string" then
    return '"' .. value:gsub('[%c"\\]', function(c)
      return string.format("\\u%04x", c:byte())
    end) .. '"'
  elseif kind == "boolean" then
    return tostring(value)
  elseif kind == "table" then
    local keys = {}
    for k in pairs(value) do keys[#keys + 1] = k end
    table.sort(keys)
    local parts = {}
    for _, k in ipairs(keys) do
      parts[#parts + 1] = encode(tostring(k)) .. ":" .. encode(value[k])
    end
    return "{" .. table.concat(parts, ",") .. "}"
  end
  return "null"
end
M.encode = encode

-- wrk 4.1 corrects for coordinated omission by adding samples that may lie
-- below the smallest latency it recorded; it counts them, but its percentile
-- walk starts at that minimum, so under pipelining p99 comes out as 0. Rescale
-- each p to the share of samples the walk does see (100 when nothing hides).
local function percentiles(latency, wanted)
  -- Pipelined runs may end before any connection got a whole batch back:
  -- then nothing was timed at all.
  if latency.max == 0 then return {}, 0 end
  local seen = 100
  if latency:percentile(100) == 0 then
    local lo, hi = 0, 100
    for _ = 1, 40 do
      local mid = (lo + hi) / 2
      if latency:percentile(mid) == 0 then hi = mid else lo = mid end
    end
    seen = lo
  end
  local result = {max = latency.max / 1000}
  for _, p in ipairs(wanted) do
    result["p" .. p] = latency:percentile(p * seen / 100) / 1000
  end
  return result, seen
end

-- Defines setup() and done(). `counters` names globals that each thread's
-- response() keeps; done() adds them up across threads. A "non2xx" counter
-- replaces wrk's own status count, which only sees statuses above 399.
function M.report(info, counters)
  local threads = {}
  counters = counters or {}
  setup = function(thread) threads[#threads + 1] = thread end
  done = function(summary, latency, requests)
    local totals = {}
    for _, name in ipairs(counters) do
      totals[name] = 0
      for _, thread in ipairs(threads) do
        totals[name] = totals[name] + (thread:get(name) or 0)
      end
    end
    local seconds = summary.duration / 1e6
    local e = summary.errors
    local latency_ms, seen = percentiles(latency, {50, 90, 99})
    local result = {
      requests = summary.requests, seconds = seconds,
      requests_per_sec = summary.requests / seconds, bytes = summary.bytes,
      latency_ms = latency_ms, latency_seen_pct = seen,
      socket_errors = {connect = e.connect, read = e.read, write = e.write,
                       timeout = e.timeout},
      status_errors = e.status, threads = #threads,
    }
    if totals.non2xx then
      result.non2xx, result.non2xx_source = totals.non2xx, "response()"
    else
      result.non2xx, result.non2xx_source = e.status, "wrk status > 399"
    end
    for k, v in pairs(info) do result[k] = v end
    for k, v in pairs(totals) do result[k] = v end
    io.write(encode(result), "\n")
  end
end

return M

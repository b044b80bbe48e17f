-- Real votes: GET / for a session cookie and a ballot pair, then POST the
-- pair back with that cookie, and again with the pair each answer brings.
--
-- wrk keeps state per thread, not per connection, and response() is not told
-- which connection (or request) it answers. So all the connections of a
-- thread share one session: the first sid the server sets. A response that
-- sets another sid (a cookieless GET sent before the thread had its session)
-- is dropped; every other response answers a request made with the thread's
-- cookie, so its ballots belong to that cookie and go into a FIFO queue that
-- request() takes from. A POST therefore always carries a pair issued to its
-- cookie; when the queue is empty request() sends a GET / instead.
local dir = debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./"
package.path = dir .. "?.lua;" .. package.path
local common = require("common")

local BALLOTS = 'name="win" value="([%w_%-]+)">%s*' ..
                '<input type="hidden" name="lose" value="([%w_%-]+)">'
local FORM = {["Content-Type"] = "application/x-www-form-urlencoded"}

local cookie
local queue, head, tail = {}, 1, 0

-- Globals, so done() can read them from each thread.
gets, posts, votes, non2xx, dropped = 0, 0, 0, 0, 0

local function header(headers, name)
  for k, v in pairs(headers) do
    if k:lower() == name then return v end
  end
end

function request()
  if head <= tail then
    local ballot = queue[head]
    queue[head], head = nil, head + 1
    posts = posts + 1
    FORM.Cookie = "sid=" .. cookie
    return wrk.format("POST", "/", FORM,
                      "win=" .. ballot[1] .. "&lose=" .. ballot[2])
  end
  gets = gets + 1
  return wrk.format("GET", "/", cookie and {Cookie = "sid=" .. cookie} or nil)
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
    return
  end
  if body:find("Vote counted.", 1, true) then votes = votes + 1 end
  local set = header(headers, "set-cookie")
  local sid = set and set:match("sid=([^;]+)")
  if sid then
    cookie = cookie or sid
    if sid ~= cookie then
      dropped = dropped + 1
      return
    end
  end
  local win, lose = body:match(BALLOTS)
  if win and cookie then
    tail = tail + 1
    queue[tail] = {win, lose}
  end
end

common.report({script = "vote", path = "/", pipeline = 1},
              {"gets", "posts", "votes", "non2xx", "dropped"})

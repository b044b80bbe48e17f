-- Every page in turn, without cookies (each request a new visitor): the
-- soak's page load. Votes come from vote.lua, run beside it.
local dir = debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./"
package.path = dir .. "?.lua;" .. package.path
local common = require("common")

local requests, i = {}, 0

function init(args)
  for n, path in ipairs({"/", "/good", "/bad", "/about", "/ugly",
                         "/stickers", "/"}) do
    requests[n] = wrk.format("GET", path)
  end
end

function request()
  i = i % #requests + 1
  return requests[i]
end

common.report({script = "mix", path = "*", pipeline = 1})

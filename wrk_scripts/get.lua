-- Plain (one request at a time) GET of the path in WRK_PATH (default /).
local dir = debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./"
package.path = dir .. "?.lua;" .. package.path
local common = require("common")
local path = os.getenv("WRK_PATH")
common.get("get", (path and path ~= "") and path or "/", 1)

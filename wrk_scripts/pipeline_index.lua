-- Pipelined GET /, WRK_PIPELINE requests at a time (default 16).
local dir = debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./"
package.path = dir .. "?.lua;" .. package.path
local common = require("common")
common.get("pipeline_index", "/", common.depth())

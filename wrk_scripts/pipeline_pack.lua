-- Pipelined GET of the pack page in WRK_PATH (bench.py sets it to the first
-- pack's page), WRK_PIPELINE requests at a time (default 16).
local dir = debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./"
package.path = dir .. "?.lua;" .. package.path
local common = require("common")
common.get("pipeline_pack", os.getenv("WRK_PATH") or "/packs", common.depth())

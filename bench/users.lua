-- wrk script for bench/fetch.sh: GET /v1/agents/assistant/prompt with a new query on
-- every request, so no response cache can answer it.
--
--   wrk -t2 -c64 -d10s -s bench/users.lua http://127.0.0.1:PORT -- KEY [MODE] [PREFIX]
--
-- KEY     the bearer token sent in Authorization ("none" for servers without auth).
-- MODE    "users" (default): ?channel=web&user_id=u<PREFIX><thread>-<n>, a user never
--           seen before on every request; threads are numbered in setup(), so two
--           threads never make the same id, and PREFIX keeps repeated runs apart.
--         "zones": ?user_id=flood&channel=<c>&tz=<zone>, cycling through the five
--           channels and the time zones below: many renders of one (large) user.

local threads = 0
function setup(thread)
  thread:set("thread_id", threads)
  threads = threads + 1
end

local channels = { "web", "telegram", "scheduled", "heartbeat", "session_open" }
local zones = { "UTC" }
for h = 1, 12 do zones[#zones + 1] = "Etc/GMT+" .. h end
for h = 1, 14 do zones[#zones + 1] = "Etc/GMT-" .. h end
for _, z in ipairs({
  "Europe/Berlin", "Europe/London", "Europe/Paris", "Europe/Madrid", "Europe/Rome",
  "Europe/Warsaw", "Europe/Kyiv", "Europe/Moscow", "Europe/Istanbul", "Europe/Lisbon",
  "Europe/Helsinki", "Europe/Athens", "Africa/Cairo", "Africa/Lagos", "Africa/Nairobi",
  "Africa/Johannesburg", "Asia/Dubai", "Asia/Karachi", "Asia/Kolkata", "Asia/Kathmandu",
  "Asia/Dhaka", "Asia/Bangkok", "Asia/Shanghai", "Asia/Singapore", "Asia/Tokyo",
  "Asia/Seoul", "Australia/Perth", "Australia/Adelaide", "Australia/Sydney",
  "Pacific/Auckland", "Pacific/Chatham", "Pacific/Honolulu", "America/Anchorage",
  "America/Los_Angeles", "America/Denver", "America/Chicago", "America/New_York",
  "America/Halifax", "America/St_Johns", "America/Sao_Paulo", "America/Mexico_City",
  "America/Bogota", "Atlantic/Azores",
}) do zones[#zones + 1] = z end

local function escape(s)
  return (s:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end

function init(args)
  local key = args[1] or "none"
  mode = args[2] or "users"
  prefix = args[3] or ""
  headers = { ["Authorization"] = "Bearer " .. key }
  n = 0
  if mode == "zones" then
    -- Every (channel, zone) pair, each thread starting at a different place.
    paths = {}
    for _, z in ipairs(zones) do
      for _, c in ipairs(channels) do
        paths[#paths + 1] = "/v1/agents/assistant/prompt?user_id=flood&channel=" .. c .. "&tz=" .. escape(z)
      end
    end
    n = (thread_id or 0) * 97
  end
end

function request()
  n = n + 1
  local path
  if mode == "zones" then
    path = paths[n % #paths + 1]
  else
    path = "/v1/agents/assistant/prompt?channel=web&user_id=u" .. prefix .. (thread_id or 0) .. "-" .. n
  end
  return wrk.format("GET", path, headers)
end

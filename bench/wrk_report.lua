-- wrk script: counts responses by HTTP status across every thread and prints exact, machine
-- readable figures after wrk's own report (one "bench <key> <value>" line each).
-- Used by bench/load.py: wrk -s bench/wrk_report.lua ...
--
-- Only the status is looked at. Defining response() makes wrk hand every body to Lua, which costs
-- the client some CPU; the figures compare runs made the same way.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  statuses = {}
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local by_status = {}
  for _, thread in ipairs(threads) do
    local counts = thread:get("statuses")
    for status, n in pairs(counts or {}) do
      by_status[status] = (by_status[status] or 0) + n
    end
  end
  local non_2xx = 0
  for status, n in pairs(by_status) do
    io.write(string.format("bench status_%d %d\n", status, n))
    if status < 200 or status > 299 then
      non_2xx = non_2xx + n
    end
  end
  local e = summary.errors
  io.write(string.format("bench requests %d\n", summary.requests))
  io.write(string.format("bench duration_us %d\n", summary.duration))
  io.write(string.format("bench bytes %d\n", summary.bytes))
  io.write(string.format("bench non_2xx %d\n", non_2xx))
  io.write(string.format("bench errors_connect %d\n", e.connect))
  io.write(string.format("bench errors_read %d\n", e.read))
  io.write(string.format("bench errors_write %d\n", e.write))
  io.write(string.format("bench errors_timeout %d\n", e.timeout))
  io.write(string.format("bench errors_status %d\n", e.status))
  for _, p in ipairs({50, 75, 90, 99, 99.9}) do
    io.write(string.format("bench latency_p%s_us %d\n", tostring(p), latency:percentile(p)))
  end
  io.write(string.format("bench latency_mean_us %.1f\n", latency.mean))
  io.write(string.format("bench latency_stdev_us %.1f\n", latency.stdev))
  io.write(string.format("bench latency_max_us %d\n", latency.max))
end

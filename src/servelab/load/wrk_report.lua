-- servelab's wrk script: sets the request from the script arguments and
-- prints the results as one JSON line when the run is done.
--
--   wrk ... -s wrk_report.lua URL -- METHOD [BODY_FILE]
--
-- Headers (and Content-Type) are passed with wrk's own -H option.
-- The JSON line starts with {"servelab_wrk": 1, so it can be found in wrk's
-- other output. Times are in microseconds, as wrk measures them.

function init(args)
   wrk.method = args[1] or "GET"
   local body_file = args[2]
   if body_file ~= nil and body_file ~= "" then
      local f = assert(io.open(body_file, "rb"))
      wrk.body = f:read("*a")
      f:close()
   end
end

local function number(x)
   -- An empty histogram gives nan or huge values; JSON has no nan.
   if x ~= x or x == math.huge or x == -math.huge then
      return 0
   end
   return x
end

function done(summary, latency, requests)
   local e = summary.errors
   local answered = summary.requests > 0
   io.write(string.format(
      '{"servelab_wrk": 1, "requests": %d, "duration_us": %d, "bytes": %d, '
      .. '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, '
      .. '"latency_us": {"mean": %.3f, "p50": %d, "p90": %d, "p99": %d, "max": %d}}\n',
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      answered and number(latency.mean) or 0,
      answered and latency:percentile(50) or 0,
      answered and latency:percentile(90) or 0,
      answered and latency:percentile(99) or 0,
      answered and latency.max or 0))
end

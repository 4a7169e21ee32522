-- wrk script for the claims benchmark (bench/claims.py): one distinct offer per request, and every
-- 10th request replays a claim sent 64 requests earlier on the same thread (same Idempotency-Key and
-- body: the stored response must come back). A thread stops when its offers run out.
-- args: <offers file> <threads> <token> <replay every N>
local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
  table.insert(threads, thread)
end

function init(args)
  local file, nthreads = args[1], tonumber(args[2])
  token, replay_every = args[3], tonumber(args[4])
  offers = {}
  local i = 0
  for line in io.lines(file) do
    if i % nthreads == tid - 1 then table.insert(offers, line) end
    i = i + 1
  end
  idx, sent, replays, exhausted = 0, 0, 0, 0
  s200, s409, s4xx, s5xx, sother = 0, 0, 0, 0, 0
  hdrs = {["Authorization"] = "Token " .. token, ["Content-Type"] = "application/json"}
  body = '{"expected_version": 1}'
end

local function claim(line)
  local path, key = line:match("^(%S+) (%S+)$")
  hdrs["Idempotency-Key"] = key
  return wrk.format("POST", path, hdrs, body)
end

function request()
  sent = sent + 1
  if sent % replay_every == 0 and idx > 64 then
    replays = replays + 1
    return claim(offers[idx - 64])
  end
  if idx >= #offers then
    exhausted = 1
    replays = replays + 1
    return claim(offers[math.max(idx - 64, 1)])
  end
  idx = idx + 1
  return claim(offers[idx])
end

function response(status, headers, rbody)
  if status == 200 then s200 = s200 + 1
  elseif status == 409 then s409 = s409 + 1
  elseif status >= 500 then s5xx = s5xx + 1
  elseif status >= 400 then s4xx = s4xx + 1
  else sother = sother + 1 end
  if exhausted == 1 then wrk.thread:stop() end
end

function done(summary, latency, requests)
  local t = {s200 = 0, s409 = 0, s4xx = 0, s5xx = 0, sother = 0, replays = 0, distinct = 0}
  for _, thread in ipairs(threads) do
    for k, _ in pairs(t) do
      if k == "distinct" then t[k] = t[k] + thread:get("idx") else t[k] = t[k] + (thread:get(k) or 0) end
    end
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"connect_errors":%d,"read_errors":%d,"write_errors":%d,' ..
    '"timeouts":%d,"status_errors":%d,"p50_us":%d,"p95_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f,' ..
    '"s200":%d,"s409":%d,"s4xx":%d,"s5xx":%d,"sother":%d,"replays":%d,"distinct":%d}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.timeout, e.status,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.max, latency.mean,
    t.s200, t.s409, t.s4xx, t.s5xx, t.sother, t.replays, t.distinct))
end

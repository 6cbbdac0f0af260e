-- wrk script: riders posting where they are, once for all their open orders
-- (POST /v1/riders/{id}/position). Each thread takes its share of RIDERS_FILE ("riderId key" a
-- line) and walks it round robin. RATE (positions a second, all threads together; 0: as fast as
-- the server answers) paces the connections: each waits before each request, and every second the
-- wait is set again from the last second's answers, so that neither the server's latency nor a
-- change in it moves the rate away from RATE for more than a second.
-- BATCH (default 1) positions go in each request, as an app posting what it gathered does.
-- Every rider rides toward the door (DEST_LAT, DEST_LON) from 6 km at 5 m/s, never closer than
-- 300 m; its recordedAt only grows (a millisecond past the previous when the clock has not moved).
local created = 0

function setup(thread)
    thread:set("id", created)
    created = created + 1
end

function init(args)
    local threads = tonumber(os.getenv("WRK_THREADS"))
    riders = {}
    local index = 0
    for line in io.lines(os.getenv("RIDERS_FILE")) do
        if index % threads == id then
            local rider, key = line:match("^(%S+) (%S+)$")
            riders[#riders + 1] = { id = rider, auth = "Bearer " .. key, last = 0 }
        end
        index = index + 1
    end
    destination = { tonumber(os.getenv("DEST_LAT")), tonumber(os.getenv("DEST_LON")) }
    batch = tonumber(os.getenv("BATCH") or "1")
    target = tonumber(os.getenv("RATE") or "0") / threads / batch
    connections = tonumber(os.getenv("CONNECTIONS")) / threads
    pause = target > 0 and 1000 * connections / target or 0
    window = os.time()
    answered = 0
    windowAnswered = 0
    firstWindow = true
    started = os.time()
    sent = 0
end

function delay()
    return pause
end

function response(status, headers, body)
    if target == 0 then return end
    answered = answered + 1
    windowAnswered = windowAnswered + 1
    local now = os.time()
    if now > window and not firstWindow then
        -- Each connection waits `pause`, then for the answer: a second brings
        -- connections / (pause + latency) answers, which gives the latency of the last window.
        local rate = windowAnswered / (now - window)
        local latency = math.max(0, 1000 * connections / math.max(rate, 1) - pause)
        -- Aim at what brings the rate since the start back to the target, within half of it.
        local behind = target * (now - started) - answered
        local aim = math.min(1.5 * target, math.max(0.5 * target, target + behind))
        pause = math.min(5000, math.max(0, 1000 * connections / aim - latency))
        window = now
        windowAnswered = 0
    elseif now > window then
        -- The first window began when the thread did, part of the way into a second: its count
        -- says nothing of the rate (one answer in it once set the wait to zero).
        firstWindow = false
        window = now
        windowAnswered = 0
    end
end

-- One position of `rider` taken at `at` (seconds, fractional), as JSON.
local function position(rider, at)
    local metres = math.max(300, 6000 - 5 * (at - started))
    local seconds = math.floor(at)
    local stamp = os.date("!%Y-%m-%dT%H:%M:%S", seconds)
        .. string.format(".%03dZ", math.floor((at - seconds) * 1000 + 0.5) % 1000)
    return string.format('{"latitude":%.6f,"longitude":%.6f,"accuracy":8,"recordedAt":"%s"}',
        destination[1] - metres / 111195, destination[2], stamp)
end

function request()
    sent = sent + 1
    local rider = riders[(sent % #riders) + 1]
    local now = os.time()
    local body
    if batch == 1 then
        rider.last = math.max(now, rider.last + 0.001)
        body = position(rider, rider.last)
    else
        -- The fixes the app gathered since its last post, a second apart, oldest first.
        local parts = {}
        for k = 1, batch do
            rider.last = math.max(now - (batch - k), rider.last + 0.001)
            parts[k] = position(rider, rider.last)
        end
        body = '{"positions":[' .. table.concat(parts, ",") .. ']}'
    end
    return wrk.format("POST", "/v1/riders/" .. rider.id .. "/position",
        { ["Authorization"] = rider.auth, ["Content-Type"] = "application/json" }, body)
end

function done(summary, latency, requests)
    io.write(string.format(
        'RESULT {"requests":%d,"duration_us":%d,"status_errors":%d,"socket_errors":%d,' ..
        '"p50_us":%d,"p99_us":%d,"max_us":%d}\n',
        summary.requests, summary.duration, summary.errors.status,
        summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
        latency:percentile(50), latency:percentile(99), latency.max))
end

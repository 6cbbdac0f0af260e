-- wrk script: riders and merchants posting status changes. Each thread walks its share of the
-- orders (ORDERS_FILE, one id a line) one status round at a time, so an order gets its next status
-- only after every other order of the thread got the current one: never out of order. The merchant
-- (MERCHANT_KEY) starts preparing; the rider assigned to every order (RIDER_KEY) does the rest.
local created = 0
local posters = {}

function setup(thread)
    thread:set("id", created)
    created = created + 1
    posters[#posters + 1] = thread
end

function init(args)
    local threads = tonumber(os.getenv("WRK_THREADS"))
    mine = {}
    local index = 0
    for line in io.lines(os.getenv("ORDERS_FILE")) do
        if index % threads == id then mine[#mine + 1] = line end
        index = index + 1
    end
    count = #mine
    statuses = { "preparing", "pickup", "delivering", "delivered" }
    local merchant = { ["Authorization"] = "Bearer " .. os.getenv("MERCHANT_KEY"), ["Content-Type"] = "application/json" }
    local rider = { ["Authorization"] = "Bearer " .. os.getenv("RIDER_KEY"), ["Content-Type"] = "application/json" }
    headers = { merchant, rider, rider, rider }
    sent = 0
end

function request()
    local round = math.floor(sent / #mine) + 1
    local order = mine[(sent % #mine) + 1]
    sent = sent + 1
    -- Past the last round every order is delivered: the posts repeat `delivered`, which changes
    -- nothing (done() counts them apart).
    round = math.min(round, #statuses)
    return wrk.format("POST", "/v1/orders/" .. order .. "/status", headers[round], '{"status":"' .. statuses[round] .. '"}')
end

function done(summary, latency, requests)
    -- Posts sent within the four rounds (those still in flight at the end included), and past them.
    local within, repeated = 0, 0
    for _, thread in ipairs(posters) do
        local sent, rounds = thread:get("sent"), 4 * thread:get("count")
        within = within + math.min(sent, rounds)
        repeated = repeated + math.max(0, sent - rounds)
    end
    io.write(string.format(
        'RESULT {"requests":%d,"duration_us":%d,"status_errors":%d,"socket_errors":%d,' ..
        '"p50_us":%d,"p99_us":%d,"p999_us":%d,"max_us":%d,"within_rounds":%d,"repeated":%d}\n',
        summary.requests, summary.duration, summary.errors.status,
        summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
        latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max, within, repeated))
end

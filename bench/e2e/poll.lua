-- wrk script: customers polling their order's public view, each connection about ten times a
-- second (POLL_DELAY_MS between requests). TRACKING_FILE holds "order-id tracking-token" lines.
function init(args)
    views = {}
    for line in io.lines(os.getenv("TRACKING_FILE")) do
        local order, token = line:match("(%S+) (%S+)")
        views[#views + 1] = { path = "/v1/orders/" .. order, token = "Bearer " .. token }
    end
    next_view = math.random(#views)
    pause = tonumber(os.getenv("POLL_DELAY_MS") or "100")
end

function request()
    next_view = next_view % #views + 1
    local view = views[next_view]
    return wrk.format("GET", view.path, { ["Authorization"] = view.token })
end

function delay()
    return pause
end

function done(summary, latency, requests)
    io.write(string.format('RESULT {"requests":%d,"status_errors":%d,"p50_us":%d,"p99_us":%d}\n',
        summary.requests, summary.errors.status, latency:percentile(50), latency:percentile(99)))
end

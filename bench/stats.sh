#!/usr/bin/env bash
# What the dashboard costs: GET /v1/admin/stats?history=all, every 200 ms as a reload would ask, while
# the end-to-end workload runs (bench/e2e.py's `deliveryd` run, with deliveryd's default access log),
# with a full history (360 fine and 1,440 coarse samples; taken every 10 ms here so that a day's worth
# fills in 90 s, not 24 hours).
# Ends with one line: stats_p50_ms=X stats_p90_ms=Z stats_p99_ms=Y stats_polls=N stats_bytes=B history_samples=N
# changes_per_s=C stats_server_within_5ms=F stats_server_p99_bound_ms=M stats_poller_nice=N. The first
# three are the poller's (a Python client on the same two cores as the load: time to the last byte
# over one connection kept open, as the page's browser keeps it; as root it runs at nice -10, as a
# dashboard on its own machine would not wait for a core, and stats_poller_nice says so);
# the next two deliveryd's own (its request-duration histogram for the route: request read to answer
# queued for the socket), the share within 5 ms and the histogram bound under which 99 % fall.
set -euo pipefail
cd "$(dirname "$0")/.."
export RESULTS=bench/results/stats.json
ACCESS_LOG=on DELIVERYD_ARGS="--history-interval 0.01" STATS_POLL=1 RUNS=deliveryd bash bench/e2e.sh >/dev/null
.venv/bin/python - <<'PY'
import json
run = json.load(open("bench/results/stats.json"))["results"]["deliveryd"]
print(" ".join(f"{key}={run[key]}" for key in
               ("stats_p50_ms", "stats_p90_ms", "stats_p99_ms", "stats_polls", "stats_bytes", "history_samples", "changes_per_s",
                "stats_server_within_5ms", "stats_server_p99_bound_ms", "stats_poller_nice") if key in run))
PY

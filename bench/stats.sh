#!/usr/bin/env bash
# What the dashboard costs: GET /v1/admin/stats?history=all, every 200 ms as a reload would ask, while
# the end-to-end workload runs (bench/e2e.py's `deliveryd` run), with a full history (360 fine and
# 1,440 coarse samples; taken every 10 ms here so that a day's worth fills in 90 s, not 24 hours).
# Ends with one line: stats_p50_ms=X stats_p90_ms=Z stats_p99_ms=Y stats_bytes=B history_samples=N changes_per_s=C
set -euo pipefail
cd "$(dirname "$0")/.."
export RESULTS=bench/results/stats.json
DELIVERYD_ARGS="--history-interval 0.01" STATS_POLL=1 RUNS=deliveryd bash bench/e2e.sh >/dev/null
.venv/bin/python - <<'PY'
import json
run = json.load(open("bench/results/stats.json"))["results"]["deliveryd"]
print(" ".join(f"{key}={run[key]}" for key in
               ("stats_p50_ms", "stats_p90_ms", "stats_p99_ms", "stats_polls", "stats_bytes", "history_samples", "changes_per_s")))
PY

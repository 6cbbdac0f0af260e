#!/usr/bin/env bash
# Status changes end to end (bench/e2e.py's workload, release build, deliveryd's defaults) without
# and with a webhook endpoint for the merchant subscribed to every event, alternated ROUNDS times
# (default 3); the receiver is nginx on loopback answering 204. Ends with one line:
#   webhooks_off_changes_per_s=N webhooks_on_changes_per_s=N webhooks_ratio=R webhooks_cpu_ratio=C webhooks_delivered=N
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

. bench/e2e_tools.sh
make --no-print-directory build >/dev/null  # the binary make run and the package ship
ulimit -n "$(ulimit -Hn)"
RUNS=webhooks RESULTS="${RESULTS:-bench/results/webhooks.json}" \
    exec timeout 3600 .venv/bin/python bench/e2e.py .build/release/deliveryd

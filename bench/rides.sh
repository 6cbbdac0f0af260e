#!/usr/bin/env bash
# Rider positions beside status changes (release build): positions per second accepted from 1,000
# riders with 3 active orders each, whether they slow status changes, and the CPU a position costs
# against a status change. See bench/rides.py for the workload and its settings. Ends with one line:
#   batch=B changes_per_s=N changes_with_positions_per_s=N slowdown_pct=P positions_per_s=N max_positions_per_s=N cpu_us_per_change=X cpu_us_per_position=Y position_to_change_cost=R
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

command -v wrk >/dev/null || {
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wrk >/dev/null
}
.venv/bin/pip install --quiet --disable-pip-version-check -r bench/requirements.txt
make --no-print-directory build >/dev/null  # the binary make run and the package ship
ulimit -n "$(ulimit -Hn)"
exec .venv/bin/python bench/rides.py .build/release/deliveryd

#!/usr/bin/env bash
# Status changes end to end (release build) against the Python peer in bench/peer/, then with
# 1,000,000 orders already stored, with 10,000 connections (1% active), and with a slow APNs.
# Prints a table, saves bench/results/e2e.json and ends with one line:
#   changes_per_s=N peer_changes_per_s=N ratio=R p99_ms=X peer_p99_ms=Y scale_ratio=S conn_rss_mb=M slow_apns_p99_ratio=Q
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

. bench/e2e_tools.sh
make --no-print-directory build >/dev/null  # the binary make run and the package ship
ulimit -n "$(ulimit -Hn)"
exec .venv/bin/python bench/e2e.py .build/release/deliveryd

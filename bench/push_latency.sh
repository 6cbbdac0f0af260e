#!/usr/bin/env bash
# Commit-to-APNs latency at light load (release build, APNs simulator over HTTP/2 and TLS).
# Ends with one line: pushes=N p50_ms=X p99_ms=Y max_ms=Z
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
make --no-print-directory build >/dev/null  # the binary make run and the package ship
.venv/bin/python bench/push_latency.py .build/release/deliveryd

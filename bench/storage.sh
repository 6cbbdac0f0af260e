#!/usr/bin/env bash
# Status changes committed per second with 1,000 and with 1,000,000 orders in the table (release
# build, synchronous=FULL, the default), the same at 1,000 orders with synchronous=NORMAL, and the
# size of the file per million orders. Ends with one line:
#   commits_per_s_1k=N commits_per_s_1m=N ratio=R mb_per_million=M
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
changes="${CHANGES:-3000}"
make --no-print-directory release-product PRODUCT=storage-bench >/dev/null
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

run() { timeout 900 .build/release/storage-bench "$1" "$work/$2" "$3" "$changes" | tee /dev/stderr | tail -n 1; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2"; }

small=$(run 1000 small full)
normal=$(run 1000 normal normal)
large=$(run 1000000 large full)
rps_small=$(field commits_per_s "$small")
rps_normal=$(field commits_per_s "$normal")
rps_large=$(field commits_per_s "$large")
mb_large=$(field file_mb "$large")
ratio=$(awk -v a="$rps_small" -v b="$rps_large" 'BEGIN { printf "%.2f", a / b }')
echo "synchronous=NORMAL at 1k: ${rps_normal} commits/s ($(awk -v a="$rps_normal" -v b="$rps_small" 'BEGIN { printf "%.2f", a / b }')x FULL)"
echo "commits_per_s_1k=${rps_small} commits_per_s_1m=${rps_large} ratio=${ratio} mb_per_million=${mb_large}"

#!/usr/bin/env bash
# Two builds of deliveryd on the same end-to-end workload (bench/e2e.py, the `deliveryd` run),
# alternated ROUNDS times (default 3) so that both see the same machine; prints each run and the
# medians, and the ratio of the second to the first. For "within noise of the previous main".
#   usage: bench/e2e_compare.sh BASELINE_BINARY CANDIDATE_BINARY
# Environment: ROUNDS, and e2e.py's ORDERS, DURATION, CONNECTIONS, POLLERS.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: $0 BASELINE_BINARY CANDIDATE_BINARY" >&2; exit 2; }
. bench/e2e_tools.sh
ulimit -n "$(ulimit -Hn)"
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
for round in $(seq 1 "${ROUNDS:-3}"); do
    for side in baseline candidate; do
        binary=$1
        [ "$side" = candidate ] && binary=$2
        RUNS=deliveryd RESULTS="$results/$side-$round.json" timeout 900 .venv/bin/python bench/e2e.py "$binary" >/dev/null
        .venv/bin/python - "$results/$side-$round.json" "$side" "$round" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["results"]["deliveryd"]
print(f"{sys.argv[2]:<10} round {sys.argv[3]}: changes_per_s={run['changes_per_s']} "
      f"post_p99_ms={run['post_p99_ms']} cpu_s_per_1000_changes={run['cpu_s_per_1000_changes']}")
PY
    done
done
.venv/bin/python - "$results" <<'PY'
import glob, json, statistics, sys
def runs(side):
    return [json.load(open(path))["results"]["deliveryd"] for path in sorted(glob.glob(f"{sys.argv[1]}/{side}-*.json"))]
medians = {}
for side in ("baseline", "candidate"):
    medians[side] = {key: statistics.median(run[key] for run in runs(side))
                     for key in ("changes_per_s", "post_p99_ms", "cpu_s_per_1000_changes")}
    print(side, " ".join(f"{key}={value}" for key, value in medians[side].items()))
ratio = medians["candidate"]["changes_per_s"] / medians["baseline"]["changes_per_s"]
cpu = medians["candidate"]["cpu_s_per_1000_changes"] / medians["baseline"]["cpu_s_per_1000_changes"]
print(f"changes_per_s_ratio={ratio:.3f} cpu_per_change_ratio={cpu:.3f}")
PY

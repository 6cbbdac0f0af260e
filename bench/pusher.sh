#!/usr/bin/env bash
# Pushes per second through one pusher (release build) to a local HTTP/2 sink that is not the
# bottleneck: nghttpd (C, nghttp2) answering every POST with 200. Reports the sink's CPU too.
# Ends with one line:
#   platform=ios pushes_per_s=N p50_ms=X p99_ms=Y connections=C sink_cpu_pct=P workers=W
# WORKERS sets the push workers (default 2, as deliveryd), PUSHES the pushes (30,000), BATCH the batch
# size; PLATFORM=android pushes to Android devices through FCM's HTTP v1 API instead of APNs.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
pushes="${PUSHES:-30000}"
port=18443

if ! command -v nghttpd >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nghttp2-server >/dev/null
fi
make --no-print-directory release-product PRODUCT=pusher-bench >/dev/null

work="$(mktemp -d)"
sink=""
cleanup() {
    [ -n "$sink" ] && kill "$sink" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

(
    cd "$work"
    openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out bench-key.pem
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem \
        -days 1 -subj /CN=bench-ca 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout sink.key -out sink.csr \
        -subj /CN=127.0.0.1 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' >san.ext
    openssl x509 -req -in sink.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out sink.pem -days 1 \
        -extfile san.ext 2>/dev/null
)
mkdir -p "$work/data" "$work/htdocs/3/device"
cp "$work/bench-key.pem" "$work/data/"
# nghttpd answers a request with the file at its path: one empty file per device token the bench
# pushes to (pusher-bench names them token-o-N-0) makes every push a 200. (Its --echo-upload mode
# spools each body through a temporary file and became the bottleneck.)
(cd "$work/htdocs/3/device" && seq 0 $((pushes - 1)) | sed 's/^/token-o-/; s/$/-0/' | xargs touch)
# FCM's send method is one path for every device: one file answers them all, with a message name.
mkdir -p "$work/htdocs/v1/projects/bench"
printf '{"name": "projects/bench/messages/1"}' >"$work/htdocs/v1/projects/bench/messages:send"
# A service account of the project "bench" (a fresh RSA key): the worker signs its assertion.
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$work/account.pem" 2>/dev/null
python3 - "$work/account.pem" "$work/data/service-account.json" <<'PY'
import json, sys
key = open(sys.argv[1]).read()
json.dump({"type": "service_account", "project_id": "bench", "private_key_id": "bench-1", "private_key": key,
           "client_email": "pusher@bench.iam.gserviceaccount.com", "token_uri": "https://127.0.0.1/token"},
          open(sys.argv[2], "w"))
PY

nghttpd --workers=1 --max-concurrent-streams=1000 --htdocs="$work/htdocs" "$port" "$work/sink.key" "$work/sink.pem" >/dev/null 2>&1 &
sink=$!
for _ in $(seq 1 50); do
    curl -sk --http2 -o /dev/null "https://127.0.0.1:$port/" && break
    sleep 0.1
done

ticks() { awk '{ print $14 + $15 }' "/proc/$sink/stat"; }
hz=$(getconf CLK_TCK)
before=$(ticks)
started=$(date +%s.%N)
result=$(.build/release/pusher-bench "$pushes" "https://127.0.0.1:$port" "$work/ca.pem" "$work/data" | tee /dev/stderr | tail -n 1)
elapsed=$(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN { print e - s }')
after=$(ticks)
# The sink's CPU over the whole run (setup included, where it idles): a share of one core.
sink_cpu=$(awk -v t=$((after - before)) -v hz="$hz" -v s="$elapsed" 'BEGIN { printf "%.0f", 100 * t / hz / s }')
echo "${result% batch=*} sink_cpu_pct=${sink_cpu} workers=${result##*workers=}"

#!/usr/bin/env bash
# deliveryd's GET /healthz against nginx serving the same body, side by side: wrk, keep-alive,
# 2 threads, 64 connections. Then 10,000 idle keep-alive connections: deliveryd's RSS, and whether a
# request is still answered. Ends with one line:
#   rps=N nginx_rps=N ratio=R p99_ms=X idle_conns=N rss_mb=M
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
duration="${DURATION:-10}"

missing=""
command -v wrk >/dev/null || missing="$missing wrk"
command -v nginx >/dev/null || missing="$missing nginx-light"
if [ -n "$missing" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
swift build -c release --product deliveryd >/dev/null

work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

ulimit -n "$(ulimit -Hn)"
# Both servers bind with SO_REUSEPORT: a leftover process on a port would silently take half the load.
for port in 18080 18081; do
    if curl -s -o /dev/null "http://127.0.0.1:$port/"; then
        echo "port $port is already in use; stop what listens there first" >&2
        exit 1
    fi
done
.build/release/deliveryd --listen 127.0.0.1:18080 --data-dir "$work/data" --access-log off 2>"$work/deliveryd.log" &
deliveryd_pid=$!
pids+=("$deliveryd_pid")

cat >"$work/nginx.conf" <<CONF
worker_processes 2;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
daemon off;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $work/nginx-body;
    proxy_temp_path $work/nginx-proxy;
    fastcgi_temp_path $work/nginx-fastcgi;
    uwsgi_temp_path $work/nginx-uwsgi;
    scgi_temp_path $work/nginx-scgi;
    server {
        listen 127.0.0.1:18081 reuseport;
        location = /healthz { default_type application/json; return 200 '{"status":"ok"}'; }
    }
}
CONF
nginx -c "$work/nginx.conf" &
pids+=("$!")

for port in 18080 18081; do
    for _ in $(seq 1 100); do
        curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break
        sleep 0.1
    done
done

measure() {
    timeout $((duration + 30)) wrk -t2 -c64 -d"${duration}s" --latency "http://127.0.0.1:$1/healthz"
}
to_ms() {
    awk '{ v = $1; if (v ~ /us$/) { sub(/us$/, "", v); v = v / 1000 } else if (v ~ /ms$/) { sub(/ms$/, "", v) } else if (v ~ /s$/) { sub(/s$/, "", v); v = v * 1000 }; printf "%.2f", v }'
}
ours=$(measure 18080)
theirs=$(measure 18081)
rps=$(awk '/Requests\/sec/ { printf "%d", $2 }' <<<"$ours")
nginx_rps=$(awk '/Requests\/sec/ { printf "%d", $2 }' <<<"$theirs")
p50=$(awk '$1 == "50%" { print $2 }' <<<"$ours" | to_ms)
p99=$(awk '$1 == "99%" { print $2 }' <<<"$ours" | to_ms)
nginx_p50=$(awk '$1 == "50%" { print $2 }' <<<"$theirs" | to_ms)
nginx_p99=$(awk '$1 == "99%" { print $2 }' <<<"$theirs" | to_ms)
ratio=$(awk -v a="$rps" -v b="$nginx_rps" 'BEGIN { printf "%.2f", a / b }')
printf "%-10s %10s %8s %8s\n" server req/s p50_ms p99_ms
printf "%-10s %10s %8s %8s\n" deliveryd "$rps" "$p50" "$p99"
printf "%-10s %10s %8s %8s\n" nginx "$nginx_rps" "$nginx_p50" "$nginx_p99"

idle=$(timeout 300 python3 bench/idle_connections.py 18080 "$deliveryd_pid" "${IDLE_CONNECTIONS:-10000}" | tee /dev/stderr | tail -n 1)
idle_conns=$(sed -n 's/.*idle_conns=\([0-9]*\).*/\1/p' <<<"$idle")
rss_mb=$(sed -n 's/.*rss_mb=\([0-9.]*\).*/\1/p' <<<"$idle")
echo "rps=$rps nginx_rps=$nginx_rps ratio=$ratio p99_ms=$p99 idle_conns=$idle_conns rss_mb=$rss_mb"

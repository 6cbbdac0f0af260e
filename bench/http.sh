#!/usr/bin/env bash
# deliveryd's GET /healthz against nginx serving the same body, side by side: wrk, keep-alive,
# 2 threads, 64 connections; once with both access logs off, once with each server's default access
# log on, written to a file. Then 10,000 idle keep-alive connections: deliveryd's RSS, and whether a
# request is still answered. Ends with one line:
#   rps=N nginx_rps=N ratio=R p99_ms=X nginx_p99_ms=X log_rps=N nginx_log_rps=N log_ratio=R
#   log_p99_ms=X nginx_log_p99_ms=X log_dropped=N idle_conns=N rss_mb=M
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
make --no-print-directory build >/dev/null  # the binary make run and the package ship

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
for port in 18080 18081 18082 18083; do
    if curl -s -o /dev/null "http://127.0.0.1:$port/"; then
        echo "port $port is already in use; stop what listens there first" >&2
        exit 1
    fi
done
# Two pairs, each with both servers in the same state: access logs off, and each server's default
# access log on, written to a file (deliveryd's standard error, nginx's access_log).
# (Not in a command substitution: its subshell would run the EXIT trap and remove $work.)
start_deliveryd() { # $1 port, $2 on|off, $3 log file; sets started_pid
    .build/release/deliveryd --listen "127.0.0.1:$1" --data-dir "$work/data-$1" --access-log "$2" \
        --admin-key "$admin_key" 2>"$3" &
    started_pid=$!
    pids+=("$started_pid")
}
start_nginx() { # $1 port, $2 access_log directive
    mkdir -p "$work/nginx-$1"
    cat >"$work/nginx-$1/nginx.conf" <<CONF
worker_processes 2;
pid $work/nginx-$1/nginx.pid;
error_log $work/nginx-$1/error.log;
daemon off;
events { worker_connections 4096; }
http {
    $2
    keepalive_requests 1000000;
    client_body_temp_path $work/nginx-$1/body;
    proxy_temp_path $work/nginx-$1/proxy;
    fastcgi_temp_path $work/nginx-$1/fastcgi;
    uwsgi_temp_path $work/nginx-$1/uwsgi;
    scgi_temp_path $work/nginx-$1/scgi;
    server {
        listen 127.0.0.1:$1 reuseport;
        location = /healthz { default_type application/json; return 200 '{"status":"ok"}'; }
    }
}
CONF
    nginx -c "$work/nginx-$1/nginx.conf" &
    pids+=("$!")
}
admin_key="bench-admin-key-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
start_deliveryd 18080 off /dev/null
deliveryd_pid=$started_pid
start_nginx 18081 "access_log off;"
start_deliveryd 18082 on "$work/deliveryd-access.log"
start_nginx 18083 "access_log $work/nginx-18083/access.log;"

for port in 18080 18081 18082 18083; do
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
rps_of() { awk '/Requests\/sec/ { printf "%d", $2 }' <<<"$1"; }
p99_of() { awk '$1 == "99%" { print $2 }' <<<"$1" | to_ms; }

printf "%-28s %10s %8s %8s\n" server req/s p50_ms p99_ms
declare -A rps p99
for row in "deliveryd_off 18080" "nginx_off 18081" "deliveryd_log 18082" "nginx_log 18083"; do
    read -r name port <<<"$row"
    out=$(measure "$port")
    rps[$name]=$(rps_of "$out")
    p99[$name]=$(p99_of "$out")
    p50=$(awk '$1 == "50%" { print $2 }' <<<"$out" | to_ms)
    label=$name
    case $name in
        deliveryd_off) label="deliveryd, access log off" ;;
        nginx_off) label="nginx, access_log off" ;;
        deliveryd_log) label="deliveryd, default log on" ;;
        nginx_log) label="nginx, default access_log" ;;
    esac
    printf "%-28s %10s %8s %8s\n" "$label" "${rps[$name]}" "$p50" "${p99[$name]}"
done
logged_lines=$(grep -c '"http.request"' "$work/deliveryd-access.log" || true)
dropped=$(curl -fs -H "Authorization: Bearer $admin_key" "http://127.0.0.1:18082/metrics" | awk '/^deliveryd_log_lines_dropped_total/ { print $2 }')
echo "deliveryd access-log lines written: $logged_lines, dropped: ${dropped:-0}"
ratio=$(awk -v a="${rps[deliveryd_off]}" -v b="${rps[nginx_off]}" 'BEGIN { printf "%.2f", a / b }')
log_ratio=$(awk -v a="${rps[deliveryd_log]}" -v b="${rps[nginx_log]}" 'BEGIN { printf "%.2f", a / b }')

idle=$(timeout 300 python3 bench/idle_connections.py 18080 "$deliveryd_pid" "${IDLE_CONNECTIONS:-10000}" | tee /dev/stderr | tail -n 1)
idle_conns=$(sed -n 's/.*idle_conns=\([0-9]*\).*/\1/p' <<<"$idle")
rss_mb=$(sed -n 's/.*rss_mb=\([0-9.]*\).*/\1/p' <<<"$idle")
echo "rps=${rps[deliveryd_off]} nginx_rps=${rps[nginx_off]} ratio=$ratio p99_ms=${p99[deliveryd_off]} nginx_p99_ms=${p99[nginx_off]}" \
    "log_rps=${rps[deliveryd_log]} nginx_log_rps=${rps[nginx_log]} log_ratio=$log_ratio log_p99_ms=${p99[deliveryd_log]}" \
    "nginx_log_p99_ms=${p99[nginx_log]} log_dropped=${dropped:-0} idle_conns=$idle_conns rss_mb=$rss_mb"

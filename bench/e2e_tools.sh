# Sourced by the end-to-end benchmarks: the load generator, the HTTP/2 sink, the webhook receiver and the Python peer's
# packages, installed when missing.
missing=""
command -v wrk >/dev/null || missing="$missing wrk"
command -v nghttpd >/dev/null || missing="$missing nghttp2-server"
command -v nginx >/dev/null || missing="$missing nginx-light"
if [ -n "$missing" ]; then
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
timeout 600 .venv/bin/pip install --quiet --disable-pip-version-check -r bench/requirements.txt

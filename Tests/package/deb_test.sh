#!/bin/bash
# The Debian package as an operator meets it, on this machine (as root): lintian, install, the
# layout (user, modes, conffile), the unit checked by systemd-analyze, the installed binary started
# as the deliveryd user with the installed settings (ready through sd_notify, /healthz 200, the
# admin key from its file), remove, upgrade, purge keeping the data, and purge leaving nothing.
#
# usage: Tests/package/deb_test.sh PACKAGE.deb
set -euo pipefail

deb=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
export DEBIAN_FRONTEND=noninteractive
failures=0
work=$(mktemp -d)
chmod 0755 "$work"
listener=""
server=""
cleanup() {
    [ -n "$server" ] && kill -KILL "$server" 2>/dev/null
    [ -n "$listener" ] && kill "$listener" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

# Records one verdict; the script goes on, and fails at the end if any check did.
check() {
    local what=$1
    shift
    if "$@"; then
        echo "ok    $what"
    else
        echo "FAIL  $what"
        failures=$((failures + 1))
    fi
}
silently() { "$@" >/dev/null 2>&1; }
equals() { [ "$1" = "$2" ] || { echo "      expected '$2', got '$1'" >&2 && false; }; }
absent() { [ ! -e "$1" ] || { echo "      $1 is still there" >&2 && false; }; }
present() { [ -e "$1" ] || { echo "      $1 is missing" >&2 && false; }; }
owner_and_mode() { stat -c '%U:%G %a' "$1"; }
has_user() { getent passwd deliveryd >/dev/null; }
installed() { [ "$(dpkg-query -W -f='${Status}' deliveryd 2>/dev/null)" = "install ok installed" ]; }
purge_data_answer() { echo "deliveryd deliveryd/purge_data boolean $1" | debconf-set-selections; }

[ "$(id -u)" = 0 ] || { echo "deb_test: installs a package, so it runs as root" >&2 && exit 1; }

# A machine where an earlier run stopped half-way: start from nothing.
if dpkg-query -W deliveryd >/dev/null 2>&1; then
    installed || true
    purge_data_answer true
    dpkg --purge deliveryd >/dev/null
fi
if getent passwd deliveryd >/dev/null; then deluser --system --quiet deliveryd; fi
if getent group deliveryd >/dev/null; then delgroup --system --quiet deliveryd; fi
rm -rf /var/lib/deliveryd /etc/deliveryd

echo "== lintian"
lintian_output=$(lintian --fail-on error --display-info "$deb" 2>&1 | grep -v '^running with root privileges' || true)
echo "$lintian_output" | grep -v 'spelling-error-in-binary' | sed 's/^/      /'
check "lintian reports no error" lintian --fail-on error "$deb"
check "lintian reports no warning" equals "$(echo "$lintian_output" | grep -c '^W:' || true)" 0

echo "== install"
dpkg -i "$deb" >/dev/null
check "the package is installed" installed
IFS=: read -r _ _ uid _ _ home shell <<<"$(getent passwd deliveryd)"
check "a deliveryd system user" test "$uid" -lt 1000
check "its home is the data directory" equals "$home" /var/lib/deliveryd
check "it cannot log in" equals "$shell" /usr/sbin/nologin
check "a deliveryd group" equals "$(getent group deliveryd | cut -d: -f1)" deliveryd
check "/var/lib/deliveryd is deliveryd's, mode 0700" equals "$(owner_and_mode /var/lib/deliveryd)" "deliveryd:deliveryd 700"
check "the settings file is root's, readable by deliveryd" \
    equals "$(owner_and_mode /etc/deliveryd/deliveryd.env)" "root:deliveryd 640"
check "the settings file is a conffile" \
    grep -q '^ /etc/deliveryd/deliveryd.env ' <<<"$(dpkg-query -W -f='${Conffiles}\n' deliveryd)"
check "an admin key was made, readable by deliveryd only" \
    equals "$(owner_and_mode /etc/deliveryd/admin.key)" "root:deliveryd 640"
check "the admin key is 64 hex digits" grep -qE '^[0-9a-f]{64}$' /etc/deliveryd/admin.key
admin_key=$(cat /etc/deliveryd/admin.key)
for variable in $(/usr/bin/deliveryd --help | sed -n 's/^ *env \([A-Z_]*\)$/\1/p'); do
    check "the settings file has $variable" grep -qE "^#?$variable=" /etc/deliveryd/deliveryd.env
done
check "the data directory is set" grep -qx 'DELIVERYD_DATA_DIR=/var/lib/deliveryd' /etc/deliveryd/deliveryd.env
check "the admin key is named by file" \
    grep -qx 'DELIVERYD_ADMIN_KEY_FILE=/etc/deliveryd/admin.key' /etc/deliveryd/deliveryd.env
check "no secret is set in the settings file" \
    equals "$(grep -cE '^(DELIVERYD_ADMIN_KEY|DELIVERYD_DATABASE_URL)=' /etc/deliveryd/deliveryd.env || true)" 0
version_line=$(/usr/bin/deliveryd --version)
echo "      $version_line"
check "--version names the commit built" grep -q "commit $(git -C "$here" describe --always --dirty --abbrev=12)," \
    <<<"$version_line"
check "the binary needs no library from the build machine" \
    equals "$(ldd /usr/bin/deliveryd | grep -cE 'not found|/opt/|\.build/' || true)" 0
check "a manual page" present /usr/share/man/man8/deliveryd.8.gz

echo "== the unit"
man_flag=--man=no
command -v man >/dev/null && man_flag=--man=yes
verify_output=$(systemd-analyze verify "$man_flag" /lib/systemd/system/deliveryd.service 2>&1) && verified=yes || verified=no
[ -n "$verify_output" ] && echo "$verify_output" | sed 's/^/      /'
check "systemd-analyze verify accepts the unit" equals "$verified" yes
check "systemd-analyze verify has nothing to say about it" \
    equals "$(grep -c 'deliveryd' <<<"$verify_output" || true)" 0
unit=$(systemd-analyze cat-config /lib/systemd/system/deliveryd.service 2>/dev/null ||
    cat /lib/systemd/system/deliveryd.service)
for setting in Type=notify User=deliveryd EnvironmentFile=/etc/deliveryd/deliveryd.env Restart=on-failure \
    NoNewPrivileges=yes ProtectSystem=strict ReadWritePaths=/var/lib/deliveryd ProtectHome=yes PrivateTmp=yes \
    PrivateDevices=yes SystemCallFilter=@system-service CapabilityBoundingSet= LimitNOFILE=20480 \
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"; do
    check "the unit sets $setting" grep -qx "$setting" <<<"$unit"
done
# systemd's own rating of the sandbox (0 is the tightest, 10 none): at most 2.0, which it calls OK.
security=$(systemd-analyze security --offline=yes --no-pager /lib/systemd/system/deliveryd.service 2>&1 | tail -1)
echo "      ${security#→ }"
check "systemd-analyze security rates the unit's exposure at most 2.0" \
    silently systemd-analyze security --offline=yes --threshold=20 --no-pager /lib/systemd/system/deliveryd.service
stop_timeout=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s$/\1/p' <<<"$unit")
check "the unit waits longer than the graceful stop (78 s)" test "${stop_timeout:-0}" -gt 78
check "the enable link is recorded" present /var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/deliveryd.service

echo "== run the installed binary as systemd would"
python3 "$here/notify_listener.py" "$work/notify" "$work/notify.log" &
listener=$!
for _ in $(seq 100); do grep -q LISTENING "$work/notify.log" 2>/dev/null && break || sleep 0.1; done
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# EnvironmentFile=: the assignments, not the comments; then what this test changes.
mapfile -t settings < <(grep -E '^[A-Za-z_][A-Za-z0-9_]*=' /etc/deliveryd/deliveryd.env)
(cd / && exec setpriv --reuid=deliveryd --regid=deliveryd --clear-groups \
    env -i PATH=/usr/bin:/bin "${settings[@]}" DELIVERYD_LISTEN="127.0.0.1:$port" NOTIFY_SOCKET="$work/notify" \
    /usr/bin/deliveryd) >"$work/stdout" 2>"$work/stderr" &
server=$!
# A bound, not a measure: systemd's own start timeout is 90 s.
for _ in $(seq 900); do
    grep -qx READY=1 "$work/notify.log" && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
done
check "deliveryd tells systemd it is ready" grep -qx READY=1 "$work/notify.log"
check "it runs as deliveryd" equals "$(ps -o user= -p "$server" | tr -d ' ')" deliveryd
check "GET /healthz answers 200" equals "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz")" 200
check "the admin key from /etc/deliveryd/admin.key is accepted" equals "$(curl -s -o /dev/null -w '%{http_code}' \
    -H "Authorization: Bearer $admin_key" "http://127.0.0.1:$port/v1/admin/keys")" 200
check "the database is in /var/lib/deliveryd, deliveryd's alone" \
    equals "$(find /var/lib/deliveryd -type f ! -user deliveryd -o -type f -perm /077 | wc -l)" 0
check "the database exists" test -n "$(find /var/lib/deliveryd -name '*.sqlite3')"
kill -TERM "$server"
status=0
wait "$server" || status=$?
server=""
check "SIGTERM stops it cleanly" equals "$status" 0
check "deliveryd tells systemd it is stopping" grep -qx STOPPING=1 "$work/notify.log"
check "the admin key is not in the log" equals "$(grep -c "$admin_key" "$work/stderr" "$work/stdout" | awk -F: '{s += $2} END {print s}')" 0
database=$(find /var/lib/deliveryd -name '*.sqlite3' | head -1)

echo "== remove"
dpkg -r deliveryd >/dev/null
check "remove takes the binary" absent /usr/bin/deliveryd
check "remove takes the unit" absent /lib/systemd/system/deliveryd.service
check "remove keeps the settings" present /etc/deliveryd/deliveryd.env
check "remove keeps the data" present "$database"
check "remove keeps the user" has_user

echo "== install again (an upgrade keeps the data and the key)"
dpkg -i "$deb" >/dev/null
check "installed again" installed
check "the data is still there" present "$database"
check "the admin key is unchanged" equals "$(cat /etc/deliveryd/admin.key)" "$admin_key"
check "the data directory is still deliveryd's, mode 0700" \
    equals "$(owner_and_mode /var/lib/deliveryd)" "deliveryd:deliveryd 700"

echo "== purge with the default answer"
dpkg --purge deliveryd >/dev/null 2>"$work/purge.err"
check "purge takes the settings" absent /etc/deliveryd
check "purge keeps the data unless asked" present "$database"
check "purge says so" grep -q "kept the data in /var/lib/deliveryd" "$work/purge.err"
check "purge keeps the user who owns the data" has_user

echo "== purge asked to remove the data"
dpkg -i "$deb" >/dev/null
purge_data_answer true
dpkg --purge deliveryd >/dev/null
check "the package is gone" equals "$(dpkg-query -W -f='${Status}' deliveryd 2>/dev/null || true)" ""
for path in /usr/bin/deliveryd /etc/deliveryd /var/lib/deliveryd /lib/systemd/system/deliveryd.service \
    /usr/share/doc/deliveryd /usr/share/man/man8/deliveryd.8.gz /usr/share/lintian/overrides/deliveryd \
    /etc/systemd/system/multi-user.target.wants/deliveryd.service \
    /var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/deliveryd.service \
    /var/lib/systemd/deb-systemd-helper-enabled/deliveryd.service.dsh-also \
    /var/lib/systemd/deb-systemd-helper-masked/deliveryd.service; do
    check "nothing left at $path" absent "$path"
done
check "no deliveryd user left" equals "$(getent passwd deliveryd || true)" ""
check "no deliveryd group left" equals "$(getent group deliveryd || true)" ""
check "no debconf answer left" equals "$(debconf-show deliveryd 2>/dev/null || true)" ""

if [ "$failures" -gt 0 ]; then
    echo "deb_test: $failures check(s) failed"
    exit 1
fi
echo "deb_test: every check passed"

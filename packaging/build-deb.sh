#!/bin/bash
# Builds deliveryd's Debian package from a stamped release binary, with Debian's own tools
# (dpkg-shlibdeps for the library dependencies, dpkg-deb for the archive).
#
# usage: packaging/build-deb.sh BINARY OUTPUT_DIR [MAINTAINER]
# prints the path of the package it wrote.
set -euo pipefail

binary=$1
output=$2
maintainer=${3:-deliveryd maintainers <deliveryd@example.com>}
here=$(cd "$(dirname "$0")" && pwd)
docs=$here/../docs

# `deliveryd 0.9.0 (commit e495ced1a2b3, built 2026-12-06)`
read -r _ version _ commit _ <<<"$("$binary" --version | tr -d '(),')"
if [ "$commit" = unknown ]; then
    echo "build-deb: $binary is not stamped with its commit; build it with make build" >&2
    exit 1
fi
changelog_version=$(sed -n '1s/^deliveryd (\([^)]*\)).*/\1/p' "$here/changelog")
if [ "$version" != "$changelog_version" ]; then
    echo "build-deb: the binary is $version but packaging/changelog's newest entry is $changelog_version" >&2
    exit 1
fi
arch=$(dpkg --print-architecture)

# dpkg-shlibdeps expects the tree at debian/PACKAGE beside a debian/control.
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/debian/deliveryd
install -d -m 0755 "$root"

install -D -m 0755 "$binary" "$root/usr/bin/deliveryd"
# What dh_strip removes: symbols and notes a running service does not use.
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/deliveryd"

install -d -m 0755 "$root/etc/deliveryd"
{
    cat <<'HEADER'
# Installed by the deliveryd package: the data is in /var/lib/deliveryd, and the admin key that the
# package made is /etc/deliveryd/admin.key. To send to APNs, put the .p8 key beside it
# (/etc/deliveryd/AuthKey_KEYID.p8, owner root:deliveryd, mode 0640) and set APNS_KEY_FILE,
# APNS_KEY_ID, APNS_TEAM_ID and APNS_TOPIC below. docs: /usr/share/doc/deliveryd/operations.md
#
HEADER
    "$binary" env-file DELIVERYD_DATA_DIR=/var/lib/deliveryd DELIVERYD_ADMIN_KEY_FILE=/etc/deliveryd/admin.key
} >"$root/etc/deliveryd/deliveryd.env"
chmod 0640 "$root/etc/deliveryd/deliveryd.env"

install -D -m 0644 "$here/deliveryd.service" "$root/lib/systemd/system/deliveryd.service"

install -d -m 0755 "$root/usr/share/doc/deliveryd" "$root/usr/share/man/man8"
install -m 0644 "$here/copyright" "$root/usr/share/doc/deliveryd/copyright"
gzip -9n <"$here/changelog" >"$root/usr/share/doc/deliveryd/changelog.gz"
for page in operations.md configuration.md; do
    install -m 0644 "$docs/$page" "$root/usr/share/doc/deliveryd/$page"
done
install -D -m 0644 "$here/lintian-overrides" "$root/usr/share/lintian/overrides/deliveryd"
sed "s/@VERSION@/$version/" "$here/deliveryd.8" | gzip -9n >"$root/usr/share/man/man8/deliveryd.8.gz"
chmod 0644 "$root/usr/share/doc/deliveryd/changelog.gz" "$root/usr/share/man/man8/deliveryd.8.gz"

install -d -m 0755 "$root/DEBIAN"
for script in postinst prerm postrm config; do
    install -m 0755 "$here/debian/$script" "$root/DEBIAN/$script"
done
install -m 0644 "$here/debian/templates" "$here/debian/conffiles" "$root/DEBIAN/"

printf 'Source: deliveryd\n\nPackage: deliveryd\nArchitecture: any\n' >"$stage/debian/control"
shlibs=$(cd "$stage" && dpkg-shlibdeps -O -e debian/deliveryd/usr/bin/deliveryd 2>/dev/null)
shlibs=${shlibs#shlibs:Depends=}
installed_size=$(du -k -s --apparent-size --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@INSTALLED_SIZE@/$installed_size/" \
    -e "s/@SHLIBS_DEPENDS@/$shlibs/" -e "s/@MAINTAINER@/$maintainer/" \
    "$here/debian/control.in" >"$root/DEBIAN/control"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) \
    >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums" "$root/DEBIAN/control"

mkdir -p "$output"
package=$output/deliveryd_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$package" >/dev/null
echo "$package"

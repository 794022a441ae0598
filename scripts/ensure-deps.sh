#!/bin/sh
# Make sure the Debian packages of scripts/debian-packages.txt are installed.
# Run by `make run` / `make test` first. Silent when everything is present.
set -eu

# An offline prefix (scripts/offline-env.sh) replaces the system packages,
# and dpkg knows nothing about it: trust it.
if [ -n "${GPUREDUCE_PREFIX:-}" ]; then
    exit 0
fi

here=$(cd "$(dirname "$0")" && pwd)
list="$here/debian-packages.txt"
pkgs=$(awk '{ sub(/#.*/, "") } NF { print $1 }' "$list")

missing=""
for p in $pkgs; do
    # "install ok installed" is the only state in which the files are usable.
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [ "$st" = "install ok installed" ] || missing="$missing $p"
done
missing=${missing# }
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "ensure-deps: installing missing packages: $missing" >&2
    apt-get update
    # shellcheck disable=SC2086 # one word per package
    DEBIAN_FRONTEND=noninteractive apt-get install -y $missing
    # lua5.3 and lua5.1 outrank lua5.4 for /usr/bin/lua, which a plain `busted` runs: keep it 5.4
    if command -v update-alternatives >/dev/null 2>&1 && [ -x /usr/bin/lua5.4 ]; then
        update-alternatives --set lua-interpreter /usr/bin/lua5.4 >/dev/null 2>&1 || true
    fi
    exit 0
fi

echo "ensure-deps: missing Debian packages; install them with (as root, or prefix sudo):" >&2
echo "apt-get install $missing" >&2
exit 1

#!/bin/sh
# Download the amd64 .deb files of scripts/debian-packages.txt and of their
# runtime dependencies into DIR (default: .debs/ at the repo root), so that a
# GPU host with no package registry can use them via scripts/offline-env.sh.
# Run on a Debian 12 machine that has apt. Idempotent: files already
# there with the right checksum are not fetched again.
#
# usage: scripts/fetch-debs.sh [DIR]
# Package and file lists are word-split on purpose (names have no blanks).
# shellcheck disable=SC2046,SC2086
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
dir=${1:-"$root/.debs"}
arch=amd64
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

roots=$(awk '{ sub(/#.*/, "") } NF { printf "%s ", $1 }' "$here/debian-packages.txt")

# Packages never fetched, because the target already has them (glibc, the
# C++ runtime, the essential base system that dpkg/tar/bash pull in), or
# because they only matter for compiling other things (-dev packages other
# than the ones we list: the CUDA host has its own C toolchain), or because
# they are other Lua versions that only satisfy alternatives of lua-busted
# (5.2: the list names 5.1, 5.3 and LuaJIT, whose runtime libraries come with them).
# Dependencies reached only through a skipped package are not fetched either.
# (Written with [.] and [+], not backslashes: awk -v would eat those.)
skip='^(libc6|libc-bin|libgcc-s1|libstdc[+][+]6|gcc-[0-9]+-base|libcrypt1|zlib1g|libtinfo6|ncurses-bin|debconf|dpkg|perl-base|tar|install-info|base-files|coreutils|lua5[.][02]|liblua5[.][02]-.*|.*-dev|.*-dev-bin)$'

# apt-cache prints, for every package of the closure, its Depends and
# PreDepends (" |Depends:" opens an alternative group; "<virtual>" entries are
# followed by their providers, indented by 4). Walk that graph from the roots
# without entering skipped packages; for an alternative group prefer a
# candidate that is a root, else the first one not skipped.
pkgs=$(apt-cache -o APT::Architecture=$arch depends --recurse --no-recommends \
        --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances \
        $(printf '%s:'$arch' ' $roots) |
    awk -v roots="$roots" -v skip="$skip" '
    function strip(s) { sub(/:[a-z0-9]+$/, "", s); return s }
    /^[^ ]/ { node = strip($1); virt = (node ~ /^</); next }
    virt { next }
    /^  [A-Za-z]*Depends: / || /^ \|[A-Za-z]*Depends: / {
        if (!open) { ng[node]++; open = 1 }
        name = strip($2)
        if (name !~ /^</) cand[node, ng[node]] = cand[node, ng[node]] " " name
        open = ($0 ~ /^ \|/)            # group continues on the next line
        next
    }
    /^    [^ ]/ {                      # provider of the virtual just seen
        cand[node, ng[node]] = cand[node, ng[node]] " " strip($1)
        next
    }
    END {
        n = split(roots, r, " ")
        for (i = 1; i <= n; i++) if (r[i] != "") { isroot[r[i]] = 1; q[++qt] = r[i]; seen[r[i]] = 1 }
        for (qh = 1; qh <= qt; qh++) {
            p = q[qh]; print p
            for (g = 1; g <= ng[p]; g++) {
                m = split(cand[p, g], c, " "); pick = ""
                for (j = 1; j <= m && pick == ""; j++) if (isroot[c[j]] || seen[c[j]]) pick = c[j]
                for (j = 1; j <= m && pick == ""; j++) if (c[j] !~ skip) pick = c[j]
                if (pick != "" && !seen[pick] && pick !~ skip) { seen[pick] = 1; q[++qt] = pick }
            }
        }
    }' | sort)

# --print-uris gives the exact file names apt would write ('URI' FILE SIZE
# HASH). It leaves out files already present in the current directory, hence
# the empty one.
empty=$(mktemp -d)
want=$(cd "$empty" && apt-get -o APT::Architecture=$arch download --print-uris \
        $(printf '%s:'$arch' ' $pkgs) | awk '{ print $2 }')
rmdir "$empty"
[ -n "$want" ] || { echo "fetch-debs: apt found nothing to download" >&2; exit 1; }

cd "$dir"
# Older versions of our packages would be unpacked too: drop them.
want1=" $(printf '%s ' $want)" pkgs1=" $(printf '%s ' $pkgs)"
for f in *.deb; do
    [ -e "$f" ] || continue
    case "$want1" in *" $f "*) continue ;; esac
    case "$pkgs1" in *" ${f%%_*} "*) echo "fetch-debs: removing stale $f"; rm -f "$f" ;; esac
done
# As root, apt cannot hand the download to its _apt sandbox user in an
# arbitrary directory; download as root rather than get a warning per file.
sandbox=""
[ "$(id -u)" -ne 0 ] || sandbox="-o APT::Sandbox::User=root"
# apt-get download skips files already there whose checksum matches, and
# fetches again any that are missing or damaged.
apt-get -q -o APT::Architecture=$arch $sandbox download $(printf '%s:'$arch' ' $pkgs)

echo "fetch-debs: $(echo "$want" | wc -w) packages in $dir:"
for f in $want; do
    printf '  %-48s %6s KiB\n' "$f" $(( $(stat -c %s "$f") / 1024 ))
done
total=$(cat $want | wc -c)
echo "fetch-debs: total $(awk -v b="$total" 'BEGIN { printf "%.2f MiB", b / 1048576 }')"

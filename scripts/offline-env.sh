# Source this on a GPU host that has no package registry:
#
#   . scripts/offline-env.sh [DEBS_DIR] [PREFIX]     (bash, zsh, ksh)
#   export GPUREDUCE_DEBS=DIR GPUREDUCE_PREFIX=DIR; . scripts/offline-env.sh
#                                   (sh, which ignores arguments given to `.`)
#
# It unpacks the .deb files that scripts/fetch-debs.sh downloaded (default
# .debs/) into PREFIX (default /tmp/gpureduce-prefix) and points this shell at
# the Lua, busted and headers found there. Nothing is installed system-wide.
# Sourced, so: no `set -e`, no `exit`; on error it returns 1 before exporting
# anything.

_gr_main() {
    # dash ignores arguments given to `.`; $1/$2 would then be the caller's
    # own positional parameters, so only trust them in shells that pass them.
    if [ -n "${BASH_VERSION:-}${ZSH_VERSION:-}${KSH_VERSION:-}" ]; then
        _gr_debs=${1:-${GPUREDUCE_DEBS:-.debs}}
        _gr_prefix=${2:-${GPUREDUCE_PREFIX:-/tmp/gpureduce-prefix}}
    else
        _gr_debs=${GPUREDUCE_DEBS:-.debs}
        _gr_prefix=${GPUREDUCE_PREFIX:-/tmp/gpureduce-prefix}
    fi

    # Repo root: next to this file under bash; elsewhere the current
    # directory (sh cannot tell which file it is sourcing) or git's idea of it.
    if [ -n "${BASH_SOURCE:-}" ]; then
        _gr_root=$(cd "$(dirname "$BASH_SOURCE")/.." && pwd) || return 1
    elif [ -f scripts/offline-env.sh ]; then
        _gr_root=$(pwd)
    else
        _gr_root=$(git rev-parse --show-toplevel 2>/dev/null) || {
            echo "offline-env: run from the gpureduce repo root" >&2; return 1; }
    fi
    case $_gr_debs in /*) ;; *) _gr_debs=$_gr_root/$_gr_debs ;; esac

    # Checksums of the .debs: if the marker holds the same list, this exact
    # set is already unpacked and nothing needs doing.
    _gr_list=$(cd "$_gr_debs" 2>/dev/null && cksum -- *.deb 2>/dev/null)
    if [ -z "$_gr_list" ]; then
        echo "offline-env: no .deb files in $_gr_debs (run scripts/fetch-debs.sh on a machine with apt)" >&2
        return 1
    fi
    mkdir -p "$_gr_prefix" || return 1
    _gr_prefix=$(cd "$_gr_prefix" && pwd) || return 1
    _gr_marker=$_gr_prefix/.gpureduce-unpacked
    if [ "$(cat "$_gr_marker" 2>/dev/null)" != "$_gr_list" ]; then
        for _gr_deb in "$_gr_debs"/*.deb; do
            if command -v dpkg >/dev/null 2>&1; then
                dpkg -x "$_gr_deb" "$_gr_prefix"
            else
                # No dpkg: a .deb is an ar archive whose data.tar.* holds the files.
                _gr_data=$(ar t "$_gr_deb" | grep '^data\.tar') &&
                case $_gr_data in
                    *.xz)  ar p "$_gr_deb" "$_gr_data" | xz -dc ;;
                    *.zst) ar p "$_gr_deb" "$_gr_data" | zstd -dc ;;
                    *.gz)  ar p "$_gr_deb" "$_gr_data" | gzip -dc ;;
                    *)     ar p "$_gr_deb" "$_gr_data" ;;
                esac | tar -xf - -C "$_gr_prefix"
            fi || { echo "offline-env: cannot unpack $_gr_deb" >&2; return 1; }
        done
        # update-alternatives would make /usr/bin/lua; busted's shebang
        # (`env lua`) wants it, so that plain `busted` works as well.
        [ -e "$_gr_prefix/usr/bin/lua" ] || ln -s lua5.4 "$_gr_prefix/usr/bin/lua"
        # luaconf.h includes "lua5.4-deb-multiarch.h", which Debian keeps in
        # the multiarch include dir; a link beside it lets -I$LUA_INCDIR suffice.
        _gr_h=lua5.4-deb-multiarch.h
        [ -e "$_gr_prefix/usr/include/lua5.4/$_gr_h" ] ||
            ln -s "../x86_64-linux-gnu/$_gr_h" "$_gr_prefix/usr/include/lua5.4/$_gr_h"
        printf '%s\n' "$_gr_list" > "$_gr_marker"
    fi
    if [ ! -x "$_gr_prefix/usr/bin/lua5.4" ] || [ ! -f "$_gr_prefix/usr/bin/busted" ]; then
        echo "offline-env: $_gr_prefix lacks usr/bin/lua5.4 or usr/bin/busted" >&2
        return 1
    fi

    _gr_lib=$_gr_prefix/usr/lib/x86_64-linux-gnu
    export GPUREDUCE_PREFIX="$_gr_prefix"
    export LUA="$_gr_prefix/usr/bin/lua5.4"
    # busted's shebang names a lua the host may lack: run it as "$LUA $BUSTED".
    export BUSTED="$_gr_prefix/usr/bin/busted"
    export LUA_INCDIR="$_gr_prefix/usr/include/lua5.4"
    export LUA_LIBDIR="$_gr_prefix/usr/lib/x86_64-linux-gnu"   # liblua5.4.so, for the C host programs
    case ":$PATH:" in *":$_gr_prefix/usr/bin:"*) ;; *) PATH="$_gr_prefix/usr/bin:$PATH" ;; esac
    export PATH
    # lua5.4 needs liblua5.4.so.0 (usr/lib) and libreadline.so.8 (bookworm
    # still ships that one in /lib); the Lua C modules (lfs, system.core,
    # term.core, yaml) are symlinks to libs in usr/lib.
    case ":${LD_LIBRARY_PATH:-}:" in
        *":$_gr_lib:"*) ;;
        *) LD_LIBRARY_PATH="$_gr_lib:$_gr_prefix/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
    esac
    export LD_LIBRARY_PATH
    # The trailing ";;" keeps Lua's built-in defaults after ours.
    export LUA_PATH="$_gr_root/lua/?.lua;$_gr_root/lua/?/init.lua;$_gr_prefix/usr/share/lua/5.4/?.lua;$_gr_prefix/usr/share/lua/5.4/?/init.lua;;"
    export LUA_CPATH="$_gr_root/build/?.so;$_gr_lib/lua/5.4/?.so;;"
    # Lua 5.4 reads these in preference to LUA_PATH/LUA_CPATH.
    unset LUA_PATH_5_4 LUA_CPATH_5_4

    echo "offline-env: GPUREDUCE_PREFIX=$_gr_prefix; set LUA, BUSTED, LUA_INCDIR, PATH, LD_LIBRARY_PATH, LUA_PATH, LUA_CPATH (run tests as \"\$LUA \$BUSTED\")"
}

_gr_main "$@"
_gr_rc=$?
unset -f _gr_main
unset _gr_debs _gr_prefix _gr_root _gr_list _gr_marker _gr_deb _gr_data _gr_lib _gr_h
# `return` ends the sourcing with that status, never the caller's shell.
eval "unset _gr_rc; return $_gr_rc"

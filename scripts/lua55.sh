#!/usr/bin/env bash
# Run the specs under Lua 5.5, which Debian does not package: build Lua 5.5 from its sources, the C
# modules busted loads (LuaFileSystem, luasystem, lua-term) from Debian's sources, and gpureduce's
# CPU-only module against 5.5's headers, all under build-lua5.5/ (ignored), then `make test` with that
# Lua. For a developer: it needs the sources, which CI (offline) has not. busted's Lua code is Debian's
# (lua-busted and the packages it depends on, /usr/share/lua/5.4), as for the other Luas.
#
#   scripts/lua55.sh LUA_SRC [VAR=value ...]
#
# LUA_SRC   a Lua 5.5 source tree (a release's lua-5.5.x/ or its src/, or a checkout of
#           github.com/lua/lua), a tarball of one, or a git directory and a tag: /path/to/lua.git@v5.5.0
# VAR=value more make variables for `make test` (SPEC_ROOT=spec/compat, SPEC_SHARDS=1, ...)
#
# The deps' sources: LFS_SRC, SYSTEM_SRC and TERM_SRC (a folder, a tarball or git-dir@tag, as LUA_SRC),
# else `apt-get source` of Debian bookworm's lua-filesystem, lua-system and lua-term into
# build-lua5.5/src/, through a deb-src list of the script's own (the system's apt setup is not changed).
# STRICT=1 builds Lua without LUA_COMPAT_GLOBAL, so that `global` is a reserved word, as the 5.5
# manual advises testing. Reruns compile only what changed. The last line is
# "Lua 5.5.x: N passed, N failed, N skipped".
set -euo pipefail

[ $# -ge 1 ] || { sed -n '8,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
lua_src=$1
shift

root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build-lua5.5
prefix=$out/prefix
src=$out/src
cc=${CC:-cc}
abi=5.5
mkdir -p "$src" "$prefix/bin" "$prefix/include/lua$abi" "$prefix/lib/lua/$abi"

# unpack NAME SPEC: prints a folder holding SPEC's sources. A folder is used as it is; a tarball or a
# git dir@tag is unpacked once into $src/NAME-<tag or file name> (unpacked again, everything would rebuild).
unpack() {
    local name=$1 spec=$2 dest
    if [ -d "$spec" ] && [[ $spec != *@* ]]; then
        (cd "$spec" && pwd)
    elif [[ $spec == *@* ]] && git --git-dir="${spec%@*}" rev-parse -q --verify "${spec##*@}^{commit}" >/dev/null; then
        dest=$src/$name-${spec##*@}
        if [ ! -d "$dest" ]; then
            mkdir -p "$dest.tmp"
            git --git-dir="${spec%@*}" archive "${spec##*@}" | tar -x -C "$dest.tmp"
            mv "$dest.tmp" "$dest"
        fi
        echo "$dest"
    elif [ -f "$spec" ]; then
        dest=$src/$name-$(basename "$spec" | sed 's/\.tar\.[a-z0-9]*$\|\.tgz$//')
        if [ ! -d "$dest" ]; then
            mkdir -p "$dest.tmp"
            tar -x -f "$spec" -C "$dest.tmp" --strip-components=1
            mv "$dest.tmp" "$dest"
        fi
        echo "$dest"
    else
        echo "lua55.sh: $name: '$spec' is not a folder, a tarball or an existing git-dir@tag" >&2
        exit 2
    fi
}

# debian PACKAGE: the folder of Debian's upstream sources of PACKAGE (its .orig tarball), downloaded
# with apt-get source into $src/deb/ the first time.
debian() {
    local pkg=$1 deb=$src/deb orig
    orig=$(find "$deb" -maxdepth 1 -name "${pkg}_*.orig.tar.*" -print -quit 2>/dev/null || true)
    if [ -z "$orig" ]; then
        mkdir -p "$deb/lists/partial"
        printf '%s\n' 'Types: deb-src' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm' \
            'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' > "$deb/src.sources"
        local apt=(apt-get -q -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$deb"
                   -o Dir::State::Lists="$deb/lists" -o Debug::NoLocking=1)
        [ -f "$deb/lists/updated" ] || { "${apt[@]}" update >&2 && touch "$deb/lists/updated"; }
        (cd "$deb" && "${apt[@]}" source --download-only "$pkg" >&2) || true
        orig=$(find "$deb" -maxdepth 1 -name "${pkg}_*.orig.tar.*" -print -quit)
        if [ -z "$orig" ]; then
            echo "lua55.sh: could not download Debian's sources of $pkg; give them as ${2}=folder, tarball or git-dir@tag" >&2
            exit 2
        fi
    fi
    unpack "$pkg" "$orig"
}

# update FILE: FILE becomes what stdin holds, untouched where it holds that already (its time kept, so
# that nothing built from it is built again).
update() {
    cat > "$1.new"
    if cmp -s "$1.new" "$1"; then rm "$1.new"; else mv "$1.new" "$1"; fi
}

# compile OBJDIR CFLAGS... -- SOURCES...: the object of each source that is newer than it (or than
# which a header of its folder is newer), as many at a time as there are cores.
compile() {
    local objdir=$1 f o pids=() failed=0
    shift
    local flags=()
    while [ "$1" != -- ]; do flags+=("$1"); shift; done
    shift
    mkdir -p "$objdir"
    for f in "$@"; do
        o=$objdir/$(basename "${f%.c}").o
        [ -e "$o" ] && [ -z "$(find "$f" "$(dirname "$f")" -maxdepth 1 \( -name '*.h' -o -path "$f" \) \
                                 -newer "$o" -print -quit)" ] && continue
        echo "  cc ${f#"$out"/}" >&2
        "$cc" "${flags[@]}" -c "$f" -o "$o" &
        pids+=($!)
        if [ ${#pids[@]} -ge "$(nproc)" ]; then wait "${pids[0]}" || failed=1; pids=("${pids[@]:1}"); fi
    done
    for f in "${pids[@]}"; do wait "$f" || failed=1; done
    [ $failed = 0 ] || { echo "lua55.sh: compilation failed" >&2; exit 1; }
}

# ---- Lua 5.5: liblua5.5.a, which the interpreter links (exporting the API to the modules it loads),
# liblua5.5.so for the host program that embeds Lua (spec/host/embed_host.c), lua5.5, and the headers.
lua_dir=$(unpack lua "$lua_src")
[ -f "$lua_dir/lua.h" ] || lua_dir=$lua_dir/src
num=$(sed -n 's/^#define LUA_VERSION_\(MAJOR\|MINOR\|RELEASE\)_N[[:space:]][[:space:]]*\([0-9][0-9]*\).*/\2/p' "$lua_dir/lua.h" 2>/dev/null |
      paste -sd. -)
case $num in
    5.5.*) ;;
    *) echo "lua55.sh: $lua_src: no Lua 5.5 lua.h there (found version '${num:-none}')" >&2; exit 2 ;;
esac
lua_obj=$out/obj-lua
headers=$lua_dir
flavour=
if [ "${STRICT:-0}" = 1 ]; then
    # A copy whose luaconf.h does not define LUA_COMPAT_GLOBAL (the sources given stay as they are).
    strict=$src/lua-$num-strict
    mkdir -p "$strict"
    for f in "$lua_dir"/*.[ch]; do
        sed 's|^#define LUA_COMPAT_GLOBAL|/* & (off: STRICT=1) */|' "$f" | update "$strict/$(basename "$f")"
    done
    lua_dir=$strict lua_obj=$out/obj-lua-strict flavour=" (STRICT=1: global is reserved)"
fi
lua_c=()
for f in "$lua_dir"/*.c; do
    case $(basename "$f") in lua.c | luac.c | onelua.c | ltests.c) ;; *) lua_c+=("$f") ;; esac
done
echo "lua55.sh: Lua $num$flavour from $lua_dir" >&2
compile "$lua_obj" -std=gnu99 -O2 -Wall -fPIC -DLUA_USE_LINUX -- "${lua_c[@]}" "$lua_dir/lua.c"
lib_o=()
for f in "${lua_c[@]}"; do lib_o+=("$lua_obj/$(basename "${f%.c}").o"); done
rm -f "$prefix/lib/liblua$abi.a"
ar rcs "$prefix/lib/liblua$abi.a" "${lib_o[@]}"
"$cc" -shared -o "$prefix/lib/liblua$abi.so" "${lib_o[@]}" -lm -ldl
"$cc" -Wl,-E -o "$prefix/bin/lua$abi" "$lua_obj/lua.o" "$prefix/lib/liblua$abi.a" -lm -ldl
# The headers of the sources as given (STRICT changes only what the parser reserves), copied only when
# they differ, so that the module is not rebuilt.
for h in lua.h luaconf.h lualib.h lauxlib.h; do install -C -m 644 "$headers/$h" "$prefix/include/lua$abi/$h"; done

# ---- busted's C modules, built for 5.5 into prefix/lib/lua/5.5 (their Lua parts are Debian's)
cmod=$prefix/lib/lua/$abi
inc=(-I"$prefix/include/lua$abi")
# module OBJDIR OUT.so SOURCES... -lLIBS...: compile the sources that changed, link the module.
module() {
    local objdir=$1 so=$2 srcs=() objs=() libs=() f
    shift 2
    for f in "$@"; do
        case $f in
            -l*) libs+=("$f") ;;
            *) srcs+=("$f"); objs+=("$objdir/$(basename "${f%.c}").o") ;;
        esac
    done
    compile "$objdir" -std=gnu99 -O2 -fPIC "${inc[@]}" -- "${srcs[@]}"
    mkdir -p "$(dirname "$so")"
    "$cc" -shared -o "$so" "${objs[@]}" "${libs[@]}"
}
lfs_dir=$(if [ -n "${LFS_SRC:-}" ]; then unpack lfs "$LFS_SRC"; else debian lua-filesystem LFS_SRC; fi)
system_dir=$(if [ -n "${SYSTEM_SRC:-}" ]; then unpack luasystem "$SYSTEM_SRC"; else debian lua-system SYSTEM_SRC; fi)
term_dir=$(if [ -n "${TERM_SRC:-}" ]; then unpack lua-term "$TERM_SRC"; else debian lua-term TERM_SRC; fi)
echo "lua55.sh: busted's C modules from $lfs_dir, $system_dir, $term_dir" >&2

# LuaFileSystem 1.8.0 reads a file handle (lfs.lock) only for the Luas it knows, up to 5.4, and stops
# with #error on others; 5.5's handle is 5.4's luaL_Stream. A copy that admits 5.5 (that line only).
mkdir -p "$src/lfs-$abi"
sed 's/LUA_VERSION_NUM >= 502 && LUA_VERSION_NUM <= 504/LUA_VERSION_NUM >= 502 \&\& LUA_VERSION_NUM <= 505/' \
    "$lfs_dir/src/lfs.c" | update "$src/lfs-$abi/lfs.c"
update "$src/lfs-$abi/lfs.h" < "$lfs_dir/src/lfs.h"
module "$out/obj-lfs" "$cmod/lfs.so" "$src/lfs-$abi/lfs.c"
module "$out/obj-system" "$cmod/system/core.so" "$system_dir"/src/{core,compat,time}.c -lrt
module "$out/obj-term" "$cmod/term/core.so" "$term_dir/core.c"

# ---- Debian's Lua code under 5.5. Penlight 1.13, busted 2.1 (and luarocks 3.8) assign to a for loop's
# control variable in a few places, which 5.5 makes read-only (a compile error). Each such file is copied to
# build-lua5.5/share/, which LUA_PATH puts first, with the manual's remedy: a local of the same name at
# the top of the loop body (`do local k = k`), on the same line, so that line numbers stay. The
# project's own Lua files are only checked: what fails to compile under 5.5 is listed, not changed.
share=/usr/share/lua/5.4
overlay=$out/share
"$prefix/bin/lua$abi" - "$share" "$overlay" "$root" <<'LUA'
local share, overlay, root = ...
local function files(dir)
  local list = {}
  for f in io.popen("cd '" .. dir .. "' && find -L . -name '*.lua' | sort"):lines() do list[#list + 1] = f:sub(3) end
  return list
end
local function read(path) local h = assert(io.open(path, "rb")); local s = h:read("a"); h:close(); return s end
-- The text with `local name = name` after the `do` of the nearest `for` above `line` that declares name.
local function remedy(text, line, name)
  local starts = { 1 }
  for pos in text:gmatch("()\n") do starts[#starts + 1] = pos + 1 end
  for i = line, 1, -1 do
    local l = text:sub(starts[i], (starts[i + 1] or #text + 2) - 2)
    local names, rest = l:match("%f[%w_]for%s+([%w_,%s]-)%s+in%f[^%w_](.*)$")
    if not names then names, rest = l:match("%f[%w_]for%s+([%w_]+)%s*=(.*)$") end
    if names and (("," .. names:gsub("%s", "") .. ","):find("," .. name .. ",", 1, true)) then
      local _, b = rest:find("%f[%w_]do%f[^%w_]")
      if not b then return nil end
      local at = starts[i] + #l - #rest + b - 1
      return text:sub(1, at) .. " local " .. name .. " = " .. name .. ";" .. text:sub(at + 1)
    end
  end
end
os.execute("rm -rf '" .. overlay .. "'")
for _, rel in ipairs(files(share)) do
  local text, changed = read(share .. "/" .. rel), false
  for _ = 1, 50 do
    local ok, err = load(text, "=" .. rel)
    if ok then break end
    local line, name = err:match(":(%d+): attempt to assign to const variable '([%w_]+)'")
    text = line and remedy(text, tonumber(line), name)
    if not text then io.stderr:write("lua55.sh: ", share, "/", err, " (left as it is)\n") break end
    changed = true
  end
  if changed and text then
    os.execute("mkdir -p '" .. (overlay .. "/" .. rel):match("(.*)/") .. "'")
    local h = assert(io.open(overlay .. "/" .. rel, "wb")); h:write(text); h:close()
    io.stderr:write("lua55.sh: ", rel, ": loop variables made locals for 5.5 (in ", overlay, ")\n")
  end
end
for _, dir in ipairs({ "lua", "spec", "experiments", "scripts" }) do
  for _, rel in ipairs(files(root .. "/" .. dir)) do
    local ok, err = loadfile(root .. "/" .. dir .. "/" .. rel)
    if not ok then io.stderr:write("lua55.sh: does not compile under 5.5: ", err:sub(#root + 2), "\n") end
  end
end
LUA

# ---- gpureduce's CPU-only module and the specs, through the Makefile (BUILD follows the headers'
# folder: build-lua5.5/). busted and its Lua dependencies are Debian's, from /usr/share/lua/5.4.
export LUA_PATH="$overlay/?.lua;$overlay/?/init.lua;$share/?.lua;$share/?/init.lua;;"
export LUA_CPATH="$cmod/?.so;;"
export LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# luarocks (spec/packaging_spec.lua installs the rock for the Lua that runs it) finds this Lua 5.5 by a
# configuration of its own. Debian's luarocks 3.8 recognises a lua.h by a line "LUA_VERSION_NUM 505",
# which 5.5's lua.h no longer has (it computes the number): its LUA_INCDIR is a folder whose lua.h says
# the number in a comment and includes the real one, beside links to the other headers.
rocks_inc=$out/luarocks-include/lua$abi
mkdir -p "$rocks_inc"
printf '/* LUA_VERSION_NUM 505: for luarocks 3.8, which reads the version from such a line */\n#include "%s"\n' \
    "$prefix/include/lua$abi/lua.h" | update "$rocks_inc/lua.h"
for h in luaconf.h lualib.h lauxlib.h; do ln -sf "$prefix/include/lua$abi/$h" "$rocks_inc/$h"; done
export LUAROCKS_CONFIG=$out/luarocks-config.lua
printf 'lua_interpreter = "lua%s"\nvariables = {\n  LUA_DIR = "%s", LUA_BINDIR = "%s/bin",\n  LUA_INCDIR = "%s", LUA_LIBDIR = "%s/lib",\n}\n' \
    "$abi" "$prefix" "$prefix" "$rocks_inc" "$prefix" > "$LUAROCKS_CONFIG"

log=$out/specs.log
set +e
make -C "$root" --no-print-directory test NVCC= LUA="$prefix/bin/lua$abi" LUA_INCDIR="$prefix/include/lua$abi" \
    LUA_LIBDIR="$prefix/lib" BUSTED=/usr/bin/busted "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
total=$(sed -n 's/^specs, [0-9]* busted runs\{0,1\}: //p' "$log" | tail -n 1)
echo "Lua $num$flavour: ${total:-0 passed, 1 failed, 0 skipped (no summary: see $log)}"
exit "$rc"

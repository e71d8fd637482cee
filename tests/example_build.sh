#!/bin/sh
# examples/engine.c builds from outside the tree exactly as libkvfs(3)
# says: the library, kvfs.h and libkvfs.pc installed into a private
# prefix (libtool's install mode, as make install does), then
#   cc engine.c $(pkg-config --cflags --libs libkvfs)
# with nothing of the build tree on the include path.  The program must
# link against that libkvfs.so and run (its usage error, exit 2).
T=example_build
. "${top_srcdir:-.}/tests/lib.sh"

CC=${CC:-cc}
command -v "$CC" >/dev/null 2>&1 || skip "no C compiler ($CC)"
command -v pkg-config >/dev/null 2>&1 || skip "no pkg-config"
[ -f "$top_builddir/libkvfs.pc" ] || skip "no libkvfs.pc in $top_builddir"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvfs-example.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP
pfx=$tmp/prefix
mkdir -p "$pfx/lib/pkgconfig" "$pfx/include" "$tmp/src"

"$top_builddir/libtool" --quiet --mode=install cp \
	"$top_builddir/src/libkvfs/libkvfs.la" "$pfx/lib/" >"$tmp/install.log" 2>&1 ||
	{ bad "libtool install of libkvfs.la: $(tail -n 3 "$tmp/install.log")"; exit 1; }
cp "$top_srcdir/src/libkvfs/kvfs.h" "$pfx/include/"
sed -e "s|^prefix=.*|prefix=$pfx|" -e "s|^exec_prefix=.*|exec_prefix=$pfx|" \
	-e "s|^libdir=.*|libdir=$pfx/lib|" \
	-e "s|^includedir=.*|includedir=$pfx/include|" \
	"$top_builddir/libkvfs.pc" >"$pfx/lib/pkgconfig/libkvfs.pc"
# the source alone, away from the tree and its config.h
cp "$top_srcdir/examples/engine.c" "$tmp/src/"

flags=$(PKG_CONFIG_PATH=$pfx/lib/pkgconfig PKG_CONFIG_LIBDIR=$pfx/lib/pkgconfig \
	pkg-config --cflags --libs libkvfs) || { bad "pkg-config libkvfs"; exit 1; }
# a library built with --enable-sanitizers needs its runtime first in the
# program, as any program linking such a build would
if readelf -d "$pfx/lib/libkvfs.so" 2>/dev/null | grep -q 'libasan'; then
	flags="$flags -fsanitize=address,undefined"
fi
# shellcheck disable=SC2086 # flags is a list
if (cd "$tmp/src" && "$CC" -Wall -Werror engine.c $flags -o engine) \
	>"$tmp/cc.log" 2>&1; then
	ok "engine.c builds with pkg-config libkvfs alone"
else
	bad "engine.c does not build from outside the tree: $(head -n 5 "$tmp/cc.log")"
	exit 1
fi

LD_LIBRARY_PATH=$pfx/lib "$tmp/src/engine" >"$tmp/run.out" 2>&1
rc=$?
if [ "$rc" -eq 2 ] && grep -q '^usage: engine ' "$tmp/run.out"; then
	ok "the installed-library build runs (usage error, exit 2)"
else
	bad "engine run: exit $rc: $(cat "$tmp/run.out")"
fi
if command -v ldd >/dev/null 2>&1; then
	if LD_LIBRARY_PATH=$pfx/lib ldd "$tmp/src/engine" | grep -q "libkvfs.so.0 => $pfx/lib/"; then
		ok "it links the installed libkvfs.so.0"
	else
		bad "it does not link $pfx/lib/libkvfs.so.0: $(LD_LIBRARY_PATH=$pfx/lib ldd "$tmp/src/engine" | grep kvfs)"
	fi
fi
exit "$fail"

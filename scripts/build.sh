#!/bin/sh
# Build kvfs out of tree: scripts/build.sh DIR [configure options...]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
dir=$1
shift
cd "$top"
[ -x configure ] && [ configure -nt configure.ac ] && [ configure -nt Makefile.am ] ||
	autoreconf -fi >/dev/null
mkdir -p "$dir"
cd "$dir"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
	"$top/configure" -q "$@"
fi
make -s -j"$(nproc)" >/dev/null

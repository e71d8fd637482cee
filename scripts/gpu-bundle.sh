#!/bin/sh
# scripts/gpu-bundle.sh DIR: build kvfs with CUDA here and pack into DIR
# what the GPU checks need on a machine that has a GPU but none of kvfs's
# build dependencies (no compiler, no package manager, maybe no FUSE):
#
#   DIR/bin/     kvfsd, kvctl, kvbench, check_gpu
#   DIR/lib/     libkvfs and every shared library they link but the C
#                library's own and the GPU driver's (found with ldd)
#   DIR/pylib/   libkvfs and libcudart alone, for Python: PyTorch keeps
#                its own newer C++ runtime
#   DIR/python/  the kvfs Python binding
#   DIR/run.sh   tests/gpu/bundle-run.sh: the checks, run there as
#                `sh DIR/run.sh [OUTDIR]`
#
# BUILD=DIR2 builds in DIR2 (default build/gpu; CUDA from CUDA_DIR,
# default /usr/local/cuda).  The bundle must stay under 64 MiB.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 1 ] || {
	echo "usage: scripts/gpu-bundle.sh DIR" >&2
	exit 2
}
dest=$1
build=${BUILD:-$top/build/gpu}
cuda=${CUDA_DIR:-/usr/local/cuda}

echo "== build with CUDA from $cuda in $build"
"$top/scripts/build.sh" "$build" --with-cuda="$cuda"
grep -q '^#define HAVE_CUDA 1' "$build/config.h" || {
	echo "gpu-bundle: configure did not find CUDA in $cuda" >&2
	exit 1
}
make -s -C "$build" tests/check_gpu >/dev/null

rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib" "$dest/pylib" "$dest/python"

# a libtool wrapper script stands for the real program in .libs/
real() {
	d=$(dirname "$1")
	b=$(basename "$1")
	if [ -x "$d/.libs/$b" ]; then echo "$d/.libs/$b"; else echo "$1"; fi
}
for p in fuse/kvfsd src/kvctl/kvctl src/kvbench/kvbench tests/check_gpu; do
	cp "$(real "$build/$p")" "$dest/bin/"
done
cp -P "$build"/src/libkvfs/.libs/libkvfs.so* "$dest/lib/"
cp -P "$build"/src/libkvfs/.libs/libkvfs.so* "$dest/pylib/"

# what they link, resolved here; the C library's and the driver's stay
LD_LIBRARY_PATH=$dest/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
for f in "$dest"/bin/* "$dest"/lib/libkvfs.so.*.*; do
	ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r so; do
	case $(basename "$so") in
	libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | \
		libresolv.so.* | ld-linux*.so.* | libcuda.so.* | libkvfs.so.*) ;;
	*) cp -L "$so" "$dest/lib/" ;;
	esac
done
if ldd "$dest"/bin/* | grep -q 'not found'; then
	ldd "$dest"/bin/* | grep 'not found' >&2
	exit 1
fi
cp -L "$dest"/lib/libcudart.so.* "$dest/pylib/"

cp -r "$top/python/kvfs" "$dest/python/"
find "$dest/python" -name __pycache__ -prune -exec rm -rf {} +
cp "$top/tests/gpu/torch_roundtrip.py" "$dest/"
cp "$top/tests/gpu/bundle-run.sh" "$dest/run.sh"
chmod +x "$dest/run.sh" "$dest/torch_roundtrip.py"

kb=$(du -sk "$dest" | cut -f1)
echo "== $dest: $((kb / 1024)) MiB, $(find "$dest" -type f | wc -l) files"
[ "$kb" -lt $((64 * 1024)) ] || {
	echo "gpu-bundle: $dest is over 64 MiB" >&2
	exit 1
}

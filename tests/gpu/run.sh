#!/bin/sh
# tests/gpu/run.sh - the GPU path end to end, on a machine with a GPU:
# build the tree with CUDA in a temporary directory, run the GPU tests
# (tests/check_gpu alone, tests/gpu.sh with the device part on a private
# kvfsd, tests/libkvfs.sh) and kvbench gpu on a pool of 32 MiB slots, and
# print the results.  Run from anywhere: sh tests/gpu/run.sh [CUDA_DIR].
# Exit status: 0 all passed, 1 something failed, 77 no GPU here.
# KEEP=1 keeps the build directory (a failure always keeps it).
# About 3 minutes on 16 cores; every step is under timeout(1).
set -eu

src=$(cd "$(dirname "$0")/../.." && pwd)
cuda=${1:-/usr/local/cuda}
jobs=$(nproc 2>/dev/null || echo 4)
start=$(date +%s)

say() { echo "== $* ($(($(date +%s) - start)) s)"; }

if command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi --query-gpu=name,driver_version,memory.total \
		--format=csv,noheader || true
else
	echo "gpu/run.sh: SKIP: no nvidia-smi, so no GPU driver here"
	exit 77
fi

build=$(mktemp -d "${TMPDIR:-/tmp}/kvfs-gpu.XXXXXX")
mnt=$build/mnt
pool=/dev/shm/kvfs-gpu-run-$$.pool
kpid=
cleanup() {
	rc=$?
	set +e
	[ -z "$kpid" ] || kill -TERM "$kpid" 2>/dev/null
	[ -z "$kpid" ] || wait "$kpid" 2>/dev/null
	grep -q " $mnt fuse" /proc/mounts && fusermount3 -u -z "$mnt"
	rm -rf "$pool" "$pool.d"
	# a failure keeps the build and its logs; KEEP=1 keeps it anyway
	if [ "$rc" = 0 ] && [ -z "${KEEP:-}" ]; then
		rm -rf "$build"
	else
		echo "build and logs kept in $build"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

say "configure --with-cuda=$cuda in $build"
[ -x "$src/configure" ] || (cd "$src" && autoreconf -fi >/dev/null 2>&1)
cd "$build"
timeout 120 "$src/configure" -q --with-cuda="$cuda" >configure.log 2>&1 || {
	tail -n 20 configure.log
	exit 1
}
grep -q '^#define HAVE_CUDA 1' config.h || {
	echo "gpu/run.sh: configure did not find CUDA in $cuda" >&2
	exit 1
}

say "make"
timeout 240 make -j"$jobs" >make.log 2>&1 || {
	grep -E 'error|Error' make.log | head -n 20
	exit 1
}

say "GPU tests"
fail=0
timeout 180 make check -j1 TESTS='tests/check_gpu tests/gpu.sh tests/libkvfs.sh' \
	>check.log 2>&1 || fail=1
grep -E '^(PASS|FAIL|SKIP|ERROR):' check.log
for t in check_gpu gpu.sh; do
	[ -f "tests/$t.log" ] && sed 's/^/  | /' "tests/$t.log"
done
if grep -q '^SKIP: tests/gpu.sh' check.log; then
	echo "gpu/run.sh: the device part was skipped: no usable GPU" >&2
	exit 77
fi

say "kvbench gpu"
mkdir "$mnt"
timeout -s TERM 150 fuse/kvfsd -f \
	-o "state=$build/state,pool=$pool,slot_size=32M,slots=20" "$mnt" \
	>kvfsd.log 2>&1 &
kpid=$!
n=0
until grep -q " $mnt fuse" /proc/mounts; do
	n=$((n + 1))
	if [ $n -gt 100 ] || ! kill -0 "$kpid" 2>/dev/null; then
		echo "gpu/run.sh: kvfsd did not mount:" >&2
		tail -n 5 kvfsd.log >&2
		exit 1
	fi
	sleep 0.1
done
brc=0
timeout 120 src/kvbench/kvbench gpu "$mnt" || brc=$?
[ $brc = 0 ] || {
	echo "gpu/run.sh: kvbench gpu exit $brc" >&2
	fail=1
}

say "done"
[ $fail = 0 ] && echo "gpu/run.sh: PASS" || echo "gpu/run.sh: FAIL"
exit $fail

#!/bin/sh
# The Python binding (python/kvfs) over the built libkvfs: its unittest
# suite, python/tests/test_kvfs.py.  The hash tests run first, with no
# daemon; then the rest against a real kvfsd mount (match with lease,
# read-only maps, write and read back, batches, errors).  SKIP (77)
# without python3, and when no daemon can be mounted here.
set -eu

T=python_binding
. "${top_srcdir:-.}/tests/lib.sh"

[ -n "$PYTHON3" ] || PYTHON3=$(command -v python3 2>/dev/null || true)
[ -n "$PYTHON3" ] || skip "python3 not found (PYTHON3 is empty)"
SO=$top_builddir/src/libkvfs/.libs/libkvfs.so
if [ ! -e "$SO" ]; then
	echo "$T: $SO not built" >&2
	exit 1
fi
KVFS_LIB=$(cd "$(dirname "$SO")" && pwd)/libkvfs.so
export KVFS_LIB
# a sanitized build: python3 itself is not, so the runtime the library
# needs must be loaded first (and python's own allocations are not ours)
asan=$(ldd "$KVFS_LIB" 2>/dev/null | sed -n 's/.*libasan[^ ]* => \([^ ]*\).*/\1/p')
py() {
	if [ -n "$asan" ]; then
		LD_PRELOAD=$asan${LD_PRELOAD:+:$LD_PRELOAD} \
			ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS} \
			"$PYTHON3" "$@"
	else
		"$PYTHON3" "$@"
	fi
}
SUITE=$top_srcdir/python/tests/test_kvfs.py

# run_suite WHAT [TEST ...]: the unittest suite, verbose, into the log
run_suite() {
	what=$1
	shift
	if py -B "$SUITE" -v "$@"; then
		ok "$what"
	else
		bad "$what"
	fi
}

# no daemon: KVFS_MNT unset, so the daemon tests are skipped here
(
	unset KVFS_MNT
	run_suite "hash and library tests (no daemon)" HashTest LibraryTest
	exit "$fail"
) || fail=1
# a hash failure must not hide behind a SKIP of the mount below
[ "$fail" -eq 0 ] || exit 1

if [ "${BUILD_DAEMON:-yes}" = no ]; then
	echo "$T: kvfsd not built: daemon tests not run"
	exit "$fail"
fi

. "$top_srcdir/tests/fuse_lib.sh"
fuse_begin
# test_kvfs.py's SLOT_SIZE; 8 slots, so a flood evicts
kvfsd_start "slot_size=64K,slots=8"
mkdir "$MNT/p"

KVFS_MNT=$MNT
export KVFS_MNT
run_suite "daemon tests on $MNT" DaemonTest

kvfsd_stop
exit "$fail"

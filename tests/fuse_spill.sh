#!/bin/sh
# fuse_spill.sh - files bigger than a slot through a real mount (kvfsd(8),
# slot_size and capacity): written and read at any size, rewritten,
# renamed, kept across a restart and a kill -9; a file past the capacity
# or one that nothing can be evicted for is refused with EFBIG or ENOSPC
# and never published; the spill files go with their files.  With the
# write-back cache, with -o writethrough and with -o passthrough (where
# kvfsd may not pass files through, the copy path serves them alike).
set -eu

T=fuse_spill
. "${top_srcdir:-.}/tests/fuse_lib.sh"
PY=${PYTHON3:-python3}
command -v "$PY" >/dev/null 2>&1 || skip "python3 is missing"
SCRIPT=$top_srcdir/tests/fuse_spill.py
fuse_begin

SLOT=262144
CAP=$((16 * SLOT))
for opts in "" writethrough passthrough; do
	# the script's writethrough: every write reaches kvfsd (passthrough
	# implies it)
	wt=${opts:+writethrough}
	rm -rf "$POOL" "$POOL.d" "$STATE"
	O="slot_size=256K,slots=64,capacity=$CAP${opts:+,$opts}"
	KVFSD_LAYOUT=open kvfsd_start "$O"
	mkdir "$MNT/eng"
	"$PY" "$SCRIPT" write "$MNT/eng" $SLOT $CAP $wt || bad "${opts:-write-back}: write"
	n=$(find "$POOL.d" -type f | wc -l)
	[ "$n" -ge 3 ] && ok "${opts:-write-back}: $n spill files beside the pool" ||
		bad "${opts:-write-back}: $n spill files"
	kvfsd_stop || bad "kvfsd exits 0 at SIGTERM"
	KVFSD_LAYOUT=open kvfsd_start "$O"
	"$PY" "$SCRIPT" check "$MNT/eng" $SLOT $CAP || bad "${opts:-write-back}: after a restart"
	kvfsd_kill9
	KVFSD_LAYOUT=open kvfsd_start "$O"
	"$PY" "$SCRIPT" check "$MNT/eng" $SLOT $CAP || bad "${opts:-write-back}: after kill -9"
	mkdir "$MNT/lim"
	"$PY" "$SCRIPT" toobig "$MNT/lim" $SLOT $CAP $wt || bad "${opts:-write-back}: past the capacity"
	rm -rf "$MNT/eng" "$MNT/lim"
	mkdir "$MNT/nsp"
	"$PY" "$SCRIPT" nospace "$MNT/nsp" $SLOT $CAP $wt || bad "${opts:-write-back}: nothing evictable"
	rm -rf "$MNT/nsp"
	n=$(find "$POOL.d" -type f 2>/dev/null | wc -l)
	[ "$n" = 0 ] && ok "${opts:-write-back}: every file removed, no spill file left" ||
		bad "${opts:-write-back}: $n spill files left after every file was removed"
	kvfsd_stop || bad "kvfsd exits 0 at SIGTERM"
	[ ! -e "$POOL.d" ] && ok "${opts:-write-back}: the empty spill directory goes at exit" ||
		bad "${opts:-write-back}: $POOL.d left at exit"
done
exit "$fail"

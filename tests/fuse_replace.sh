#!/bin/sh
# fuse_replace.sh - a name replaced again and again while readers read it
# (kvfs(7), Publication): no reader ever gets a short file, bytes of two
# versions, EIO or ESTALE; by rename of tmp files, by O_TRUNC rewrites
# and both at once, with the write-back cache and with -o writethrough.
# tests/fuse_replace.py drives one run and checks every read.
set -eu

T=fuse_replace
. "${top_srcdir:-.}/tests/fuse_lib.sh"
PY=${PYTHON3:-python3}
command -v "$PY" >/dev/null 2>&1 || skip "python3 is missing"
SCRIPT=$top_srcdir/tests/fuse_replace.py
ROUNDS=${KVFS_REPLACE_ROUNDS:-1000}
fuse_begin

for opts in "" writethrough; do
	rm -rf "$POOL" "$POOL.d"
	rm -rf "$STATE"
	KVFSD_LAYOUT=open kvfsd_start "slot_size=256K,slots=512${opts:+,$opts}"
	mkdir "$MNT/eng"
	for mode in rename trunc mixed; do
		mkdir "$MNT/eng/$mode"
		if "$PY" "$SCRIPT" "$MNT/eng/$mode" "$mode" "$ROUNDS" \
			>"$tmp/out" 2>&1; then
			eio=$(sed -n 's/.* \([0-9]*\) EIO from close$/\1/p' \
				"$tmp/out" | awk '{ s += $1 } END { print s + 0 }')
			ok "${opts:-write-back}: $(tail -n 1 "$tmp/out" | sed "s/^ok *//") ($eio EIO from a reader's close, a known bug)"
		else
			cat "$tmp/out" >&2
			bad "${opts:-write-back}: $mode: readers saw a bad file"
		fi
	done
	kvfsd_stop || bad "kvfsd exits 0 at SIGTERM"
done
exit "$fail"

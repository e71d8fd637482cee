#!/bin/sh
# fuse_durable.sh - close-to-open durability (kvfs(7), Publication): a
# file whose close(2) or fsync(2) returned 0 survives a SIGKILL of kvfsd
# sent right after that close returned, and is published at the restart;
# a file written again after its close never appears half-written.  Ten
# rounds of kill and restart, new files, O_TRUNC rewrites and renames,
# with the write-back cache, with -o writethrough and with -o passthrough
# (which implies it), in an open namespace; then a chain namespace's
# block closed right before the kill.
set -eu

T=fuse_durable
. "${top_srcdir:-.}/tests/fuse_lib.sh"
PY=${PYTHON3:-python3}
command -v "$PY" >/dev/null 2>&1 || skip "python3 is missing"
SCRIPT=$top_srcdir/tests/fuse_durable.py
ROUNDS=${KVFS_DURABLE_ROUNDS:-10}
fuse_begin

# the daemon was killed by the writer: let it go, and unmount
reap() {
	wait_until 100 gone "$DPID" || fuse_abort "$MNT"
	wait "$PID" 2>/dev/null || true
	PID=
	DPID=
	fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT"
}

for opts in "" writethrough passthrough; do
	rm -rf "$POOL" "$POOL.d"
	rm -rf "$STATE"
	# files of ~300 KB: bigger than a slot, they spill (kvfsd(8))
	KVFSD_LAYOUT=open kvfsd_start "slot_size=256K,slots=256${opts:+,$opts}"
	mkdir "$MNT/eng"
	r=1
	while [ "$r" -le "$ROUNDS" ]; do
		"$PY" "$SCRIPT" write "$MNT/eng" "$r" "$DPID" \
			${opts:+writethrough} \
			>"$tmp/w.out" 2>&1 ||
			true
		reap
		KVFSD_LAYOUT=open kvfsd_start "${opts}"
		if ! "$PY" "$SCRIPT" check "$MNT/eng" "$r" >"$tmp/c.out" 2>&1; then
			cat "$tmp/w.out" "$tmp/c.out" >&2
			bad "${opts:-write-back}: round $r"
			break
		fi
		r=$((r + 1))
	done
	[ "$r" -le "$ROUNDS" ] ||
		ok "${opts:-write-back}: $ROUNDS rounds of kill -9 right after close: nothing closed lost, nothing written after a close published"
	kvfsd_stop || bad "kvfsd exits 0 at SIGTERM"
done

# a chain namespace: a block closed, then the kill at once
rm -rf "$POOL" "$POOL.d"
rm -rf "$STATE"
kvfsd_start "slot_size=512K,slots=256"
mkdir "$MNT/ch"
"$PY" - "$MNT/ch" "$DPID" <<'PYEOF' || bad "chain: the write before the kill"
import os, signal, sys
d, pid = sys.argv[1], int(sys.argv[2])
fd = os.open(os.path.join(d, "ab" * 32), os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b"chain block " * 10000)
os.close(fd)
os.kill(pid, signal.SIGKILL)
PYEOF
reap
kvfsd_start ""
if [ "$(cat "$MNT/ch/$(printf 'ab%.0s' $(seq 32))" 2>/dev/null | wc -c)" = 120000 ]; then
	ok "chain: a block closed right before the kill survived it"
else
	bad "chain: a block closed right before the kill is lost"
fi
kvfsd_stop || bad "kvfsd exits 0 at SIGTERM"
exit "$fail"

#!/bin/sh
# fuse_passthrough.sh - kvfsd -o passthrough (kvfsd(8)): as root, the
# kernel reads files bigger than a slot straight from their spill files,
# so no READ for them reaches kvfsd (libfuse's debug log, -d), while
# readers, an mmap, a rewrite under an open reader and a rename of an
# open file behave as on the copy path; .kvfs/stats says so.  A kvfsd
# without CAP_SYS_ADMIN (in a user namespace) falls back to the copy
# path with one line in its log and serves the same files.  SKIP
# (77) where the kernel has no passthrough (Linux < 6.9) or we are not
# root.
set -eu

T=fuse_passthrough
. "${top_srcdir:-.}/tests/fuse_lib.sh"
PY=${PYTHON3:-python3}
command -v "$PY" >/dev/null 2>&1 || skip "python3 is missing"
[ "$(id -u)" = 0 ] || skip "needs root (CAP_SYS_ADMIN) for passthrough"
SCRIPT=$top_srcdir/tests/fuse_passthrough.py
SLOT=262144
O="slot_size=256K,slots=64,passthrough"
fuse_begin

KVFSD_ARGS=-d KVFSD_LAYOUT=open kvfsd_start "$O"
grep -q "no passthrough: the kernel does not offer it" "$tmp/kvfsd.log" &&
	skip "the kernel offers no FUSE passthrough (Linux >= 6.9)"
mkdir "$MNT/e"
"$PY" "$SCRIPT" "$MNT/e" $SLOT >"$tmp/py.out" 2>&1 || {
	cat "$tmp/py.out" >&2
	bad "root: the reads"
}
sed '$d' "$tmp/py.out"
ino=$(sed -n 's/^INO //p' "$tmp/py.out")
reads=$(grep -c "opcode: READ (15), nodeid: $ino," "$tmp/kvfsd.log" || true)
[ -n "$ino" ] && [ "$reads" = 0 ] &&
	ok "root: no READ of the big file reached kvfsd (inode $ino)" ||
	bad "root: $reads READ requests of inode $ino reached kvfsd"
grep -q 'opcode: READ (15)' "$tmp/kvfsd.log" &&
	ok "root: the small file still reads through kvfsd" ||
	bad "root: no READ at all in the log: is -d logging?"
"$PY" - "$MNT/.kvfs/stats" <<'PYEOF' || bad "root: .kvfs/stats"
import json, sys
io = json.load(open(sys.argv[1]))["io"]
assert io["passthrough"] is True and io["writeback"] is False, io
assert io["passthrough_opens"] >= 6, io
print("ok   root: .kvfs/stats: %s" % json.dumps(io))
PYEOF
kvfsd_stop || bad "kvfsd exits 0 at SIGTERM"

# ---- without CAP_SYS_ADMIN: the copy path -----------------------------------
# kvfsd in a user namespace of its own (and a mount namespace, where FUSE
# may mount): root there, with no CAP_SYS_ADMIN where the backing ioctl
# looks for it.  The readers run in the same namespaces, which vanish
# with the last of their processes, the mount with them.
U=$tmp/u
UPOOL=/dev/shm/kvfs-test-$T-$$-u.pool
trap 'rc=$?; set +e; rm -rf "$UPOOL" "$UPOOL.d"; (exit $rc); fuse_cleanup' EXIT
mkdir -p "$U/mnt"
if ! command -v unshare >/dev/null 2>&1 ||
	! unshare -Urm true 2>/dev/null; then
	echo "# the part without CAP_SYS_ADMIN is skipped: no user namespace"
else
	timeout -s KILL 120 unshare -Urm sh -c '
		"$1" -f -o "state=$2/state,pool=$3,layout=open,$4" "$2/mnt" \
			>"$2/log" 2>&1 &
		d=$!
		n=0
		until grep -q " $2/mnt fuse" /proc/mounts || [ $n -ge 100 ]; do
			sleep 0.1
			n=$((n + 1))
		done
		rc=1
		if mkdir "$2/mnt/e" &&
			"$5" "$6" "$2/mnt/e" "$7" >"$2/out" 2>&1; then
			grep -o "\"io\":{[^}]*}" "$2/mnt/.kvfs/stats" >"$2/io"
			rc=0
		fi
		kill -TERM $d
		wait $d
		exit $rc' sh "$KVFSD" "$U" "$UPOOL" "$O" "$PY" "$SCRIPT" $SLOT &&
		ok "no CAP_SYS_ADMIN: the same reads, on the copy path" || {
		cat "$U/out" "$U/log" >&2
		bad "no CAP_SYS_ADMIN: the reads"
	}
	grep -q "passthrough refused" "$U/log" &&
		ok "no CAP_SYS_ADMIN: one line says why: $(grep -m 1 -o 'passthrough refused.*' "$U/log")" ||
		bad "no CAP_SYS_ADMIN: no line in the log says passthrough was refused"
	grep -q '"passthrough":false' "$U/io" 2>/dev/null &&
		ok "no CAP_SYS_ADMIN: .kvfs/stats says the copy path" ||
		bad "no CAP_SYS_ADMIN: .kvfs/stats: $(cat "$U/io" 2>/dev/null)"
fi
exit "$fail"

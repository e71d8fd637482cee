#!/bin/sh
# kvfsd's start and its refusals: a start that fails (bad option, bad
# value, a pool its file system cannot hold, a regular file or a kvfs as
# mountpoint) exits non-zero with one clear line and leaves no state
# directory, pool or socket; .kvfs/nodes shows this node by its id and
# .kvfs/stats its replication; the status reply names the pool and its
# size; --discard removes pool and state, never while they are in use;
# mount.kvfs -f mounts nothing and a missing kvfsd is one line, exit 1.
set -eu

T=fuse_start
. "${top_srcdir:-.}/tests/fuse_lib.sh"
fuse_begin
KVCTL=$top_builddir/src/kvctl/kvctl

# refused NAME WANT_RC GREP ARGS... : kvfsd -f ARGS fails with WANT_RC,
# says GREP, and leaves neither $STATE nor $POOL (LEFT1, LEFT2 instead)
refused() {
	name=$1 want=$2 msg=$3
	shift 3
	rc=0
	timeout 20 "$KVFSD" -f "$@" >"$tmp/r.out" 2>&1 || rc=$?
	if [ "$rc" != "$want" ]; then
		bad "$name: exit $rc, want $want: $(cat "$tmp/r.out")"
	elif ! grep -q -- "$msg" "$tmp/r.out"; then
		bad "$name: no '$msg' in: $(cat "$tmp/r.out")"
	elif [ -e "${LEFT1:-$STATE}" ] || [ -e "${LEFT2:-$POOL}" ]; then
		bad "$name: left $(ls -d "${LEFT1:-$STATE}" "${LEFT2:-$POOL}" \
			2>/dev/null)"
	else
		ok "$name: exit $want, '$msg', nothing left"
	fi
}
o="state=$STATE,pool=$POOL"
refused "unknown option -x" 2 "kvfsd: unknown option" -o "$o" -x "$MNT"
refused "-o slot=5" 2 "slot=5" -o "$o,slot=5" "$MNT"
refused "-o slots=12Q" 2 "kvfsd: -o slots: '12Q'" -o "$o,slots=12Q" "$MNT"
refused "absurd slots" 1 "exceeds" -o "$o,slots=100000000" "$MNT"
refused "--listen without --cluster" 2 "need --cluster" \
	-o "$o" --listen 127.0.0.1:0 "$MNT"
: >"$tmp/file"
refused "regular file as mountpoint" 1 "not a directory" \
	-o "$o,slots=4" "$tmp/file"

# ---- a mount: nodes, stats, status ----------------------------------------
kvfsd_start "slot_size=64K,slots=16"
LEFT1=$tmp/state2 LEFT2=$POOL-2
refused "a second kvfsd on the mount" 1 "mounted there already" \
	-o "state=$LEFT1,pool=$LEFT2,slots=4" "$MNT"
rm -rf "$LEFT1" "$LEFT2"
LEFT1= LEFT2=
"$FE" mkdir "$MNT/ns" >/dev/null
expect OK "a block" "$FE" put "$MNT/ns/$(blk 1)" 1000
if [ -n "$PYTHON3" ]; then
	"$KVCTL" -m "$MNT" status -j >"$tmp/status" 2>&1 || true
	if "$PYTHON3" - "$MNT/.kvfs/nodes" "$MNT/.kvfs/stats" "$tmp/status" \
		"$DPID" "$POOL" <<'PY'
import json, sys
n = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[2]))
st = json.load(open(sys.argv[3]))
me = n["nodes"]
assert len(me) == 1 and me[0]["self"] is True, me
assert me[0]["id"] == "0" and me[0]["pid"] == int(sys.argv[4]), me
r = s["replication"]
assert r == {"replicas": 1, "live_nodes": 1, "queued": 0, "pushing": 0,
             "pushed": 0, "gave_up": 0}, r
d = st["daemon"]
assert d["pool"] == sys.argv[5], d
assert d["pool_bytes"] == 4096 + 16 * 65536, d
assert d["node_id"] == "0", d
PY
	then
		ok "nodes by id, stats' replication, status' pool and size"
	else
		bad "nodes/stats/status: $(cat "$MNT/.kvfs/nodes" \
			"$MNT/.kvfs/stats" "$tmp/status")"
	fi
else
	grep -q '"id":"0","self":true' "$MNT/.kvfs/nodes" &&
		grep -q '"replication":{"replicas":1,' "$MNT/.kvfs/stats" &&
		ok "nodes by id, stats' replication (grep)" ||
		bad "nodes/stats: $(cat "$MNT/.kvfs/nodes" "$MNT/.kvfs/stats")"
fi

# ---- --discard ------------------------------------------------------------
mkdir "$tmp/other"
rc=0
"$KVFSD" --discard -o "$o" "$MNT" >"$tmp/d.out" 2>&1 || rc=$?
[ $rc = 1 ] && grep -q "mounted there" "$tmp/d.out" && [ -e "$POOL" ] &&
	ok "--discard refused on the mount" ||
	bad "--discard on the mount: exit $rc: $(cat "$tmp/d.out")"
rc=0
"$KVFSD" --discard -o "$o" "$tmp/other" >"$tmp/d.out" 2>&1 || rc=$?
[ $rc = 1 ] && grep -q "in use" "$tmp/d.out" && [ -e "$POOL" ] &&
	[ -d "$STATE/index" ] && ok "--discard refused while the pool is used" ||
	bad "--discard of a used pool: exit $rc: $(cat "$tmp/d.out")"
kvfsd_stop && ok "SIGTERM: exit 0" || bad "SIGTERM: exit status"
rc=0
"$KVFSD" --discard -o "$o" "$MNT" >"$tmp/d.out" 2>&1 || rc=$?
[ $rc = 0 ] && [ ! -e "$POOL" ] && [ ! -e "$STATE" ] &&
	ok "--discard removed pool and state" ||
	bad "--discard: exit $rc, $(ls -d "$POOL" "$STATE" 2>/dev/null): \
$(cat "$tmp/d.out")"

# ---- mount.kvfs -----------------------------------------------------------
MK=$top_srcdir/fuse/mount.kvfs
rc=0
KVFSD=$KVFSD sh "$MK" kvfs "$MNT" -f -o "$o,slots=4" >"$tmp/m.out" 2>&1 ||
	rc=$?
[ $rc = 0 ] && ! is_mounted "$MNT" && [ ! -e "$POOL" ] &&
	ok "mount.kvfs -f: nothing mounted" ||
	bad "mount.kvfs -f: exit $rc, mounted? $(grep " $MNT " /proc/mounts)"
rc=0
KVFSD=$KVFSD sh "$MK" kvfs "$MNT" -fv -o "$o,slots=4" >"$tmp/m.out" 2>&1 ||
	rc=$?
[ $rc = 0 ] && ! is_mounted "$MNT" && ok "mount.kvfs -fv: nothing mounted" ||
	bad "mount.kvfs -fv: exit $rc"
# a copy alone in its directory: mount.kvfs looks for kvfsd beside itself
# first, and an in-tree build has fuse/kvfsd beside fuse/mount.kvfs
mkdir "$tmp/empty" "$tmp/sbin"
cp "$MK" "$tmp/sbin/mount.kvfs"
rc=0
env -u KVFSD PATH="$tmp/empty" /bin/sh "$tmp/sbin/mount.kvfs" kvfs "$MNT" \
	-o "$o" >"$tmp/m.out" 2>&1 || rc=$?
[ $rc = 1 ] && [ "$(wc -l <"$tmp/m.out")" = 1 ] &&
	grep -q "^mount.kvfs: kvfsd not found" "$tmp/m.out" &&
	ok "mount.kvfs without kvfsd: one line, exit 1" ||
	bad "mount.kvfs without kvfsd: exit $rc: $(cat "$tmp/m.out")"
exit $fail

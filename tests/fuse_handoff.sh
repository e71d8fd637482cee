#!/bin/sh
# fuse_handoff.sh - the prefill-to-decode handoff on a real cluster: etcd,
# two kvfsd nodes (replicas 1, so replication alone leaves a node short
# of blocks) and a conductor on loopback.  A request is scheduled with
# its prefill on node 1 and its decode on node 2; its blocks are written
# on node 1, and with --handoff on they become local on node 2 without
# any open there (kvfsd's FETCH counters say the handoff pulled them);
# so do blocks already on node 1 when a request is scheduled.
# With --handoff off, the same on new blocks leaves node 2 short of them.
#
# SKIP (77) without etcd, FUSE, python3 or kvconductor.  The EXIT trap
# stops everything started here, unmounts and removes the pools and the
# temp dir, whatever happened; every wait is bounded.
set -eu

T=fuse_handoff
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
KVCTL=$top_builddir/src/kvctl/kvctl
KVC=$top_builddir/sched/kvconductor
PY=${PYTHON3:-python3}
NBLK=16

. "$top_srcdir/tests/fuse_lib.sh"
. "$top_srcdir/tests/etcd_lib.sh"
. "$top_srcdir/tests/conductor_lib.sh"

[ "${BUILD_CONDUCTOR:-yes}" != no ] && [ -x "$KVC" ] ||
	skip "kvconductor was not built"
command -v etcd >/dev/null 2>&1 || skip "etcd not installed (Debian: etcd-server)"
[ -c /dev/fuse ] || skip "/dev/fuse is missing"
command -v fusermount3 >/dev/null 2>&1 || skip "fusermount3 not found"
command -v "$PY" >/dev/null 2>&1 || skip "python3 not found"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/$T.XXXXXX")
PIDS=
KPID=
cleanup() {
	rc=$?
	set +e
	cluster_stop $KPID $PIDS
	rm -rf /dev/shm/kvfs-test-$T-$$-*.pool /dev/shm/kvfs-test-$T-$$-*.pool.d
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
		for l in "$tmp"/*.log "$tmp"/*.err; do
			[ -f "$l" ] || continue
			echo "--- $l" >&2
			tail -n 25 "$l" >&2
		done
	fi
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# converge TENTHS WHAT CMD...: CMD succeeds in time, or the test ends
converge() {
	t=$1
	what=$2
	shift 2
	wait_until "$t" "$@" && return 0
	bad "did not converge within $((t / 10)) s: $what"
	exit 1
}

ports=$(free_ports 5)
set -- $ports
ECLI=$1 EPEER=$2 PORT1=$3 PORT2=$4 EVPORT=$5

# etcd_lib.sh
etcd_start PIDS kvfs-test "$ECLI" "$EPEER" || {
	bad "did not converge within 15 s: etcd answers on 127.0.0.1:$ECLI"
	exit 1
}

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secret"
chmod 600 "$tmp/secret"

# api METHOD PATH [BODY]: the conductor's answer on stdout
api() {
	"$PY" - "$HTTP" "$@" <<'EOF'
import sys, urllib.request
port, method, path = sys.argv[1], sys.argv[2], sys.argv[3]
body = sys.argv[4].encode() if len(sys.argv) > 4 else None
req = urllib.request.Request("http://127.0.0.1:%s%s" % (port, path),
                             data=body, method=method,
                             headers={"Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=10) as f:
    sys.stdout.write(f.read().decode())
EOF
}
# stat EXPR: a Python expression over s, the conductor's /v1/stats
cstat() { api GET /v1/stats | "$PY" -c "import json,sys; s=json.load(sys.stdin); print($1)"; }
# conductor ON|OFF: (re)start it on the same event port, nodes 1 and 2
conductor() {
	if [ -n "$KPID" ]; then
		kill -TERM "$KPID" 2>/dev/null
		wait_until 50 gone "$KPID" || kill -KILL "$KPID" 2>/dev/null
		wait "$KPID" 2>/dev/null || true
	fi
	KPID=
	conductor_start KPID kvc --events "127.0.0.1:$EVPORT" \
		--handoff "$1" --secret-file "$tmp/secret" || {
		bad "did not converge within 10 s: kvconductor serves"
		exit 1
	}
	HTTP=$(conductor_port kvc)
	api POST /v1/instances \
		'{"prefill":[{"node":1}],"decode":[{"node":2}]}' >/dev/null
}

# node I: kvfsd node I, streaming to the conductor, waits for its mount
node() {
	i=$1
	eval port=\$PORT$i
	mkdir -p "$tmp/mnt$i"
	"$KVFSD" -f \
		-o "state=$tmp/state$i,pool=/dev/shm/kvfs-test-$T-$$-$i.pool,slot_size=64K,slots=128,layout=chain" \
		--cluster "etcd://127.0.0.1:$ECLI/t$$" --node-id "$i" \
		--listen "127.0.0.1:$port" --secret-file "$tmp/secret" \
		--replicas 1 --timeout-ms 5000 \
		--conductor "127.0.0.1:$EVPORT" \
		"$tmp/mnt$i" >>"$tmp/node$i.log" 2>&1 &
	PIDS="$! $PIDS"
	if ! wait_until 100 is_mounted "$tmp/mnt$i"; then
		if grep -Eq 'fuse: |fusermount' "$tmp/node$i.log"; then
			skip "mounting is not possible here: $(tail -n 1 "$tmp/node$i.log")"
		fi
		bad "node $i did not mount within 10 s"
		exit 1
	fi
}
kv() { i=$1; shift; "$KVCTL" -m "$tmp/mnt$i" "$@"; }
nnodes() { kv "$1" nodes -j | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["nodes"]))'; }
both_see() { [ "$(nnodes 1)" = 2 ] && [ "$(nnodes 2)" = 2 ]; }
# node I's .kvfs/stats handoff field F
hstat() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['handoff'][sys.argv[2]])" "$tmp/mnt$1/.kvfs/stats" "$2"; }
# the block names of run R: their first byte differs from run to run
name() { printf '%02x%02x%060x' "$1" "$2" "$2"; }
# local on node 2 without fetching (the control socket's stat), of run R
local2() {
	n=0
	k=1
	while [ $k -le $NBLK ]; do
		kv 2 stat "$NS" "$(name "$1" $k)" >/dev/null 2>&1 && n=$((n + 1))
		k=$((k + 1))
	done
	echo $n
}
all_local2() { [ "$(local2 "$1")" = $NBLK ]; }
# both nodes' streams are in: their RESET frames counted
streams_in() { [ "$(cstat "s['events']['frames'] >= 2")" = True ]; }
# schedule R: a request of run R's blocks; its prefill and decode nodes
schedule() {
	hs=
	k=1
	while [ $k -le $NBLK ]; do
		hs="$hs${hs:+,}\"$(name "$1" $k)\""
		k=$((k + 1))
	done
	api POST /v1/schedule "{\"namespace\":\"$NS\",\"hashes\":[$hs],\"input_length\":$((NBLK * 1024)),\"output_length\":8}" |
		"$PY" -c 'import json,sys; d=json.load(sys.stdin); print(d["id"], d["prefill_instance"], d["decode_instance"])'
}
# write R: run R's blocks on node 1
write() {
	k=1
	while [ $k -le $NBLK ]; do
		head -c $((4096 + k * 100)) /dev/urandom >"$tmp/mnt1/$NS/$(name "$1" $k)" ||
			{ bad "write of block $k on node 1"; exit 1; }
		k=$((k + 1))
	done
}
# node 1's replication queue is empty and the conductor indexed run R
settled() {
	"$PY" -c "
import json,sys
r=json.load(open(sys.argv[1]))['replication']
sys.exit(0 if r['queued']==0 and r['pushing']==0 else 1)" "$tmp/mnt1/.kvfs/stats" &&
	[ "$(cstat "s['blocks_indexed'] >= 2 * $NBLK")" = True ]
}

conductor on
node 1
node 2
converge 150 "both nodes see each other" both_see
converge 150 "both event streams reach the conductor" streams_in
ok "etcd, two kvfsd nodes and a conductor (handoff on)"
[ "$(hstat 2 enabled)" = True ] && ok "node 2 takes FETCH frames" ||
	bad "node 2's .kvfs/stats says the handoff is off"

NS=m
mkdir "$tmp/mnt1/$NS"
set -- $(schedule 1)
[ "$2 $3" = "0 0" ] && ok "request $1: prefill on node 1, decode on node 2" ||
	bad "schedule answered $*"
[ "$(cstat "s['handoff']['waiting_blocks']")" = $NBLK ] &&
	ok "the conductor waits for the request's $NBLK blocks" ||
	bad "handoff.waiting_blocks is $(cstat "s['handoff']['waiting_blocks']")"
write 1
if wait_until 300 all_local2 1; then
	ok "all $NBLK blocks written on node 1 are local on node 2, unopened"
else
	bad "only $(local2 1) of $NBLK blocks reached node 2"
fi
fetched=$(hstat 2 fetched)
[ "$fetched" -ge 1 ] &&
	ok "node 2's handoff pulled $fetched (the rest came by replication)" ||
	bad "node 2's handoff pulled nothing: $(cat "$tmp/mnt2/.kvfs/stats")"
# (a pull that ends meanwhile may add one: at least, not more than all)
"$PY" -c "
import re, sys
m = re.search(r'^kvfs_handoff_fetched_total (\d+)$',
              open(sys.argv[1]).read(), re.M)
sys.exit(0 if m and $fetched <= int(m.group(1)) <= $NBLK else 1)" \
	"$tmp/mnt2/.kvfs/metrics" &&
	ok "node 2's .kvfs/metrics counts them too" ||
	bad "node 2's .kvfs/metrics: $(grep handoff "$tmp/mnt2/.kvfs/metrics")"
# replication may bring a block before node 1's INSERT reaches the
# conductor: its counts are polled
all_sent() { [ "$(cstat "s['handoff']['fetch_blocks']")" = $NBLK ]; }
wait_until 100 all_sent && ok "the conductor sent FETCH for $NBLK blocks" ||
	bad "the conductor sent FETCH for $(cstat "s['handoff']['fetch_blocks']") blocks"
[ "$(cstat "s['handoff']['waiting_blocks']")" = 0 ] &&
	ok "a request whose blocks all went is forgotten" ||
	bad "handoff.waiting_blocks is $(cstat "s['handoff']['waiting_blocks']")"
"$PY" -c "import urllib.request,sys
t=urllib.request.urlopen('http://127.0.0.1:%s/metrics'%sys.argv[1],timeout=10).read().decode()
sys.exit(0 if 'kvconductor_handoff_fetch_blocks_total $NBLK' in t else 1)" "$HTTP" &&
	ok "/metrics counts the FETCH blocks" || bad "/metrics lacks the FETCH count"

# ---- blocks already on node 1 when the request comes seal no INSERT:
# the conductor sends their FETCH at the schedule, from its index
write 3
converge 300 "node 1's replication settled, run 3 indexed" settled
sent=$(cstat "s['handoff']['fetch_blocks']")
set -- $(schedule 3)
[ "$2 $3" = "0 0" ] || bad "schedule answered $*"
[ "$(cstat "s['handoff']['waiting_blocks']")" = 0 ] &&
	ok "a request cached on node 1 waits for no INSERT" ||
	bad "handoff.waiting_blocks is $(cstat "s['handoff']['waiting_blocks']")"
if wait_until 300 all_local2 3; then
	ok "all $NBLK blocks cached on node 1 before the schedule are local on node 2"
else
	bad "only $(local2 3) of $NBLK cached blocks reached node 2"
fi
more_sent() { [ "$(cstat "s['handoff']['fetch_blocks'] > $sent")" = True ]; }
wait_until 100 more_sent && ok "the conductor sent their FETCH at the schedule" ||
	bad "the conductor sent no FETCH for the cached blocks"

# ---- the same with --handoff off: replication alone leaves node 2 short
conductor off
converge 150 "both event streams reach the new conductor" streams_in
[ "$(cstat "s['handoff']['enabled']")" = False ] &&
	ok "a conductor with --handoff off" || bad "--handoff off is not off"
NS=n
mkdir "$tmp/mnt1/$NS"
fetched=$(hstat 2 fetched)
set -- $(schedule 2)
[ "$2 $3" = "0 0" ] || bad "schedule answered $*"
write 2
converge 300 "node 1's replication settled, run 2 indexed" settled
n=$(local2 2)
[ "$n" -lt $NBLK ] &&
	ok "without the handoff node 2 holds only $n of $NBLK (replication)" ||
	bad "without the handoff node 2 holds all $NBLK blocks"
[ "$(hstat 2 fetched)" = "$fetched" ] && ok "node 2's handoff pulled nothing more" ||
	bad "node 2's handoff pulled $(hstat 2 fetched) (was $fetched)"
[ "$(cstat "s['handoff']['fetch_blocks']")" = 0 ] &&
	ok "the conductor sent no FETCH" || bad "the conductor sent FETCH frames"
exit "$fail"

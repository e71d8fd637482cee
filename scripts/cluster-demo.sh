#!/bin/sh
# cluster-demo.sh - the Mooncake flow on one machine, end to end: etcd,
# three kvfsd nodes (0 and 1 run the prefill instances, 2 the decode
# instance; one replica each, so blocks live where they were written and
# move only when asked), the conductor, and emulated prefill and decode
# workers (scripts/cluster_demo.py, Python's standard library) serving a
# trace from `kvconductor gen-trace` for real: the conductor routes, the
# prefill worker reuses its cached prefix through kvfs (a local block or
# a remote fetch), sleeps for the cost model's prefill time of the rest
# and writes the new blocks; the handoff moves them to the decode node;
# the decode worker reads them there and sleeps for its decode steps.
#
# When `kvconductor serve` has --election and kvfsd takes --conductor
# etcd:NAME, two conductors campaign, the nodes follow the leader
# through etcd, and the leader is killed with SIGKILL when half the
# trace has arrived; otherwise one conductor serves (and it says so).
#
# Printed: measured TTFT and TBT percentiles, hit rate, local and remote
# block reads of the prefill and of the decode, the handoff's work, the
# failover time, and beside them what `kvconductor replay` predicts for
# the same trace on the same instances.
#
#   scripts/cluster-demo.sh [BUILD_DIR]      (default build/plain)
#
# Environment: DEMO_REQUESTS (default 60) and DEMO_RATE (arrivals a
# second, default 1) size the trace; DEMO_CONDUCTORS 1 forces a single
# conductor; DEMO_HANDOFF off turns the handoff off; DEMO_JSON names a
# file for the measured results.  Everything started is stopped and
# removed at the end, whatever happens.  Exit 0 when the run completed
# requests, 1 otherwise.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build/plain}
case $build in /*) ;; *) build=$(pwd)/$build ;; esac
KVFSD=$build/fuse/kvfsd
KVC=$build/sched/kvconductor
PY=${PYTHON3:-python3}
REQUESTS=${DEMO_REQUESTS:-60}
RATE=${DEMO_RATE:-1}
HANDOFF=${DEMO_HANDOFF:-on}
BLOCK_KB=64
SLOTS=4096

die() { echo "cluster-demo: $*" >&2; exit 1; }
for b in "$KVFSD" "$KVC"; do [ -x "$b" ] || die "$b not built"; done
command -v etcd >/dev/null 2>&1 || die "needs etcd (Debian: etcd-server)"
command -v "$PY" >/dev/null 2>&1 || die "needs python3"
[ -c /dev/fuse ] || die "needs /dev/fuse"

# two conductors when both halves of leader election are there
NCOND=1
if [ "${DEMO_CONDUCTORS:-2}" != 1 ] &&
	"$KVC" serve --help | grep -q -- '--election' &&
	"$KVFSD" --help 2>&1 | grep -q -- '--conductor etcd:'; then
	NCOND=2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cluster-demo.XXXXXX")
PIDS=
KPIDS=
# wait_until, gone; etcd_start; conductor_start
. "$top/tests/lib.sh"
. "$top/tests/etcd_lib.sh"
. "$top/tests/conductor_lib.sh"
cleanup() {
	rc=$?
	set +e
	cluster_stop $KPIDS $PIDS
	rm -rf /dev/shm/kvfs-cluster-demo-$$-*.pool /dev/shm/kvfs-cluster-demo-$$-*.pool.d
	if [ "$rc" != 0 ]; then
		for l in "$tmp"/*.log "$tmp"/*.err; do
			[ -s "$l" ] || continue
			echo "--- $l" >&2
			tail -n 8 "$l" >&2
		done
	fi
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

set -- $(free_ports 6)
ECLI=$1 EPEER=$2 PORT0=$3 PORT1=$4 PORT2=$5 EVPORT=$6

echo "== etcd on 127.0.0.1:$ECLI"
etcd_start PIDS kvfs-demo "$ECLI" "$EPEER" || die "etcd did not start"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secret"
chmod 600 "$tmp/secret"

# conductor I: prefill instances on nodes 0 and 1, decode on node 2
conductor() {
	if [ $NCOND = 2 ]; then
		ev=127.0.0.1:0
		el="--election etcd://127.0.0.1:$ECLI/demo"
	else
		ev=127.0.0.1:$EVPORT
		el=
	fi
	conductor_start KPIDS "kvc$1" --events "$ev" $el \
		--prefill 2 --decode 1 --handoff "$HANDOFF" \
		--secret-file "$tmp/secret" ||
		die "conductor $1 did not start"
	HTTPS="${HTTPS:+$HTTPS,}127.0.0.1:$(conductor_port "kvc$1")"
}
HTTPS=
conductor 1
[ $NCOND = 1 ] || conductor 2
echo "== $NCOND conductor(s) on $HTTPS, handoff $HANDOFF"
[ $NCOND = 2 ] ||
	echo "   (one conductor: this build has no leader election, or DEMO_CONDUCTORS=1)"

if [ $NCOND = 2 ]; then
	CONDUCTOR_OPT="--conductor etcd:demo"
else
	CONDUCTOR_OPT="--conductor 127.0.0.1:$EVPORT"
fi
for i in 0 1 2; do
	eval port=\$PORT$i
	mkdir -p "$tmp/mnt$i"
	"$KVFSD" -f \
		-o "state=$tmp/state$i,pool=/dev/shm/kvfs-cluster-demo-$$-$i.pool,slot_size=${BLOCK_KB}K,slots=$SLOTS,layout=chain" \
		--cluster "etcd://127.0.0.1:$ECLI/demo" --node-id "$i" \
		--listen "127.0.0.1:$port" --secret-file "$tmp/secret" \
		--replicas 1 $CONDUCTOR_OPT \
		"$tmp/mnt$i" >>"$tmp/node$i.log" 2>&1 &
	PIDS="$! $PIDS"
done
for i in 0 1 2; do
	wait_until 150 grep -q " $tmp/mnt$i fuse" /proc/mounts ||
		die "node $i did not mount"
done
echo "== kvfsd nodes 0, 1, 2 mounted"
# every node's stream is in on the leader (their RESETs counted)
streams_in() { "$PY" -c "
import json, sys, urllib.request
for a in sys.argv[1].split(','):
    try:
        s = json.load(urllib.request.urlopen('http://%s/v1/stats' % a, timeout=5))
    except OSError:
        continue
    if s.get('role', 'leader') == 'leader' and s['events']['frames'] >= 3:
        sys.exit(0)
sys.exit(1)" "$HTTPS" 2>/dev/null; }
wait_until 300 streams_in || die "the nodes' event streams did not reach the leader"
# the namespace on every node now: one made on node 0 alone reaches the
# others through etcd within a second or so, and the first prefill on
# node 1 may come sooner
for i in 0 1 2; do mkdir -p "$tmp/mnt$i/demo"; done

"$KVC" gen-trace --requests "$REQUESTS" --rate "$RATE" --seed 14 \
	--sys-prompts 4 --max-input 16384 --out-max 256 \
	--output "$tmp/trace.jsonl"
echo "== serving a $REQUESTS-request trace at $RATE/s (kvconductor gen-trace --seed 14)"
kill_opt=
pids_opt=
if [ $NCOND = 2 ]; then
	kill_opt=--kill
	pids_opt="--pids $(echo $KPIDS | tr ' ' ',')"
fi
"$PY" "$top/scripts/cluster_demo.py" --trace "$tmp/trace.jsonl" \
	--mounts "$tmp/mnt0,$tmp/mnt1,$tmp/mnt2" \
	--sockets "$tmp/state0/ctl.sock,$tmp/state1/ctl.sock,$tmp/state2/ctl.sock" \
	--conductors "$HTTPS" $pids_opt $kill_opt --block-kb $BLOCK_KB \
	>"$tmp/measured.json" || die "the workers failed"
"$KVC" replay --trace "$tmp/trace.jsonl" --prefill 2 --decode 1 \
	--cache-blocks $SLOTS --reject early --json >"$tmp/replay.json" ||
	die "kvconductor replay failed"
[ -z "${DEMO_JSON:-}" ] || cp "$tmp/measured.json" "$DEMO_JSON"

"$PY" - "$tmp/measured.json" "$tmp/replay.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
p = json.load(open(sys.argv[2]))["results"][0]
def ms(x):
    return "%8.1f ms" % (1e3 * x) if x is not None else "       -   "
def pct(a, b):
    return 100.0 * a / b if b else 0.0
print()
print("%-28s %14s %14s" % ("", "measured", "replay"))
print("%-28s %14d %14d" % ("requests", m["requests"], p["requests"]))
print("%-28s %14d %14d" % ("completed / served", m["completed"], p["served"]))
print("%-28s %14d %14d" % ("rejected (429)", m["rejected"], p["rejected"]))
print("%-28s %14d %14s" % ("failed (no conductor)", m["failed"], "-"))
print("%-28s %14d %14s" % ("worker errors", m["errors"], "-"))
for k in ("p50", "p90", "p99"):
    print("%-28s %14s %14s" % ("TTFT " + k, ms(m["ttft"][k]), ms(p["ttft_" + k])))
for k in ("p50", "p90", "p99"):
    print("%-28s %14s %14s" % ("TBT " + k, ms(m["tbt"][k]), ms(p["tbt_" + k])))
reused = m["reused_local"] + m["reused_remote"]
print("%-28s %13.1f%% %13.1f%%" % ("hit rate (blocks reused)",
      pct(reused, m["blocks"]), 100 * p["hit_rate"]))
print("%-28s %14d %14d" % ("prefill reads local", m["reused_local"], p["hit_local"]))
print("%-28s %14d %14d" % ("prefill reads remote", m["reused_remote"], p["hit_remote"]))
dec = m["decode_local"] + m["decode_remote"]
print("%-28s %13.1f%% %14s" % ("decode blocks local at start",
      pct(m["decode_local"], dec), "-"))
print("%-28s %14s %14s" % ("decode start delay p50", ms(m["decode_start"]["p50"]), "-"))
print("%-28s %14s %14s" % ("decode start delay p90", ms(m["decode_start"]["p90"]), "-"))
h = m.get("handoff") or {}
print("%-28s %14s %14s" % ("handoff FETCH blocks (leader)",
      h.get("fetch_blocks", "-") if h.get("enabled") else "off", "-"))
f = m.get("failover")
if f:
    t = f.get("first_schedule_s")
    print("%-28s %14s %14s" % ("failover: first schedule",
          "%.2f s" % t if t is not None else "never", "-"))
    print("%-28s %14s %14s" % ("index before / after",
          "%s / %s" % (f["index_before"], f.get("index_after", "?")), "-"))
print("%-28s %13.1f s %13.1f s" % ("wall time", m["wall_s"], p["span_s"]))
sys.exit(0 if m["completed"] > 0 else 1)
EOF

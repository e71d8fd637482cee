#!/bin/sh
# handoff-bench.sh - the prefill-to-decode handoff measured on a local
# cluster: etcd, two kvfsd nodes (replicas 1) and kvconductor serve, all
# on loopback.  Node 1 runs the prefill instance, node 2 the decode
# instance.  Each request is scheduled, its prefill writes its blocks on
# node 1 one at a time (sleeping PREFILL_MS per block for the compute),
# reports its prefill done, and its decode then opens and reads every
# block on node 2.  Printed, with --handoff on and then off: the
# fraction of the decode's block opens that were local when decode
# started, and the decode start delay (opening and reading the blocks),
# p50 / p90 / mean.
#
#   scripts/handoff-bench.sh [BUILD_DIR]     (default build/plain)
#
# Environment: REQUESTS (default 40), BLOCKS per request (8), BLOCK_KB
# (256), PREFILL_MS per block (20).  Everything started here is stopped
# and removed at the end, whatever happens.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build/plain}
case $build in /*) ;; *) build=$(pwd)/$build ;; esac
KVFSD=$build/fuse/kvfsd
KVC=$build/sched/kvconductor
KVCTL=$build/src/kvctl/kvctl
PY=${PYTHON3:-python3}
REQUESTS=${REQUESTS:-40}
BLOCKS=${BLOCKS:-8}
BLOCK_KB=${BLOCK_KB:-256}
PREFILL_MS=${PREFILL_MS:-20}

for b in "$KVFSD" "$KVC" "$KVCTL"; do
	[ -x "$b" ] || { echo "handoff-bench: $b not built" >&2; exit 1; }
done
command -v etcd >/dev/null 2>&1 || { echo "handoff-bench: needs etcd" >&2; exit 1; }
[ -c /dev/fuse ] || { echo "handoff-bench: needs /dev/fuse" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/handoff-bench.XXXXXX")
PIDS=
KPID=
# wait_until, gone; etcd_start; conductor_start
. "$top/tests/lib.sh"
. "$top/tests/etcd_lib.sh"
. "$top/tests/conductor_lib.sh"
cleanup() {
	rc=$?
	set +e
	cluster_stop $KPID $PIDS
	rm -rf /dev/shm/kvfs-handoff-bench-$$-*.pool /dev/shm/kvfs-handoff-bench-$$-*.pool.d
	[ "$rc" = 0 ] || tail -n 5 "$tmp"/*.log "$tmp"/*.err >&2 2>/dev/null
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
die() { echo "handoff-bench: $*" >&2; exit 1; }

set -- $(free_ports 5)
ECLI=$1 EPEER=$2 PORT1=$3 PORT2=$4 EVPORT=$5

etcd_start PIDS kvfs-bench "$ECLI" "$EPEER" || die "etcd did not start"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secret"
chmod 600 "$tmp/secret"

conductor() {
	if [ -n "$KPID" ]; then
		kill -TERM "$KPID"
		wait_until 50 gone "$KPID" || kill -KILL "$KPID"
		wait "$KPID" 2>/dev/null || true
	fi
	KPID=
	conductor_start KPID kvc --events "127.0.0.1:$EVPORT" \
		--handoff "$1" --secret-file "$tmp/secret" ||
		die "kvconductor did not start"
	HTTP=$(conductor_port kvc)
	"$PY" -c "
import urllib.request, sys
urllib.request.urlopen(urllib.request.Request(
    'http://127.0.0.1:$HTTP/v1/instances',
    data=b'{\"prefill\":[{\"node\":1}],\"decode\":[{\"node\":2}]}',
    method='POST'), timeout=10).read()"
}
node() {
	eval port=\$PORT$1
	mkdir -p "$tmp/mnt$1"
	"$KVFSD" -f \
		-o "state=$tmp/state$1,pool=/dev/shm/kvfs-handoff-bench-$$-$1.pool,slot_size=${BLOCK_KB}K,slots=$((REQUESTS * BLOCKS * 2 + 64)),layout=chain" \
		--cluster "etcd://127.0.0.1:$ECLI/hb$$" --node-id "$1" \
		--listen "127.0.0.1:$port" --secret-file "$tmp/secret" \
		--replicas 1 --conductor "127.0.0.1:$EVPORT" \
		"$tmp/mnt$1" >>"$tmp/node$1.log" 2>&1 &
	PIDS="$! $PIDS"
	wait_until 100 grep -q " $tmp/mnt$1 fuse" /proc/mounts || die "node $1 did not mount"
}
streams_in() { "$PY" -c "
import json, sys, urllib.request
s = json.load(urllib.request.urlopen('http://127.0.0.1:$HTTP/v1/stats', timeout=5))
sys.exit(0 if s['events']['frames'] >= 2 else 1)" 2>/dev/null; }

cat >"$tmp/run.py" <<'EOF'
# one mode's run: schedule, prefill on node 1, decode on node 2
import hashlib, json, os, statistics, subprocess, sys, time, urllib.request

http, mnt1, mnt2, kvctl, mode = sys.argv[1:6]
nreq, nblk, bkb, pms = (int(x) for x in sys.argv[6:10])
ns = "hb" + mode

def api(path, body=None):
    req = urllib.request.Request("http://127.0.0.1:%s%s" % (http, path),
                                 data=json.dumps(body).encode() if body else None,
                                 method="POST" if body else "GET")
    with urllib.request.urlopen(req, timeout=10) as f:
        return json.load(f)

def node_stats(mnt):
    with open(os.path.join(mnt, ".kvfs/stats")) as f:
        return json.load(f)

os.mkdir(os.path.join(mnt1, ns))
h0 = node_stats(mnt2)["handoff"]
payload = os.urandom(bkb * 1024 - 64)
local_frac, delays = [], []
for r in range(nreq):
    names = [hashlib.sha256(("%s-%d-%d" % (mode, r, k)).encode()).hexdigest()
             for k in range(nblk)]
    d = api("/v1/schedule", {"namespace": ns, "hashes": names,
                             "input_length": nblk * 512, "output_length": 16})
    for n in names:                      # the prefill: compute, then seal
        time.sleep(pms / 1000.0)
        with open(os.path.join(mnt1, ns, n), "wb") as f:
            f.write(payload)
    api("/v1/complete", {"id": d["id"], "phase": "prefill"})
    # decode starts: which of its blocks are local on node 2 right now
    ls = subprocess.run([kvctl, "-m", mnt2, "ls", ns], capture_output=True,
                        text=True).stdout.split()
    here = set(ls)
    local_frac.append(sum(n in here for n in names) / nblk)
    t0 = time.monotonic()
    for n in names:
        with open(os.path.join(mnt2, ns, n), "rb") as f:
            while f.read(1 << 20):
                pass
    delays.append(time.monotonic() - t0)
    api("/v1/complete", {"id": d["id"]})

q = sorted(delays)
s = api("/v1/stats")["handoff"]
h = {k: v - h0[k] for k, v in node_stats(mnt2)["handoff"].items()
     if isinstance(v, int) and not isinstance(v, bool)}
print("%-4s requests %d x %d blocks of %d KiB, prefill %d ms/block: "
      "decode opens local %.1f%%, decode start delay p50 %.1f ms, "
      "p90 %.1f ms, mean %.1f ms; conductor FETCH blocks %d, node 2 "
      "fetched %d, already local %d, dropped %d"
      % (mode, nreq, nblk, bkb, pms, 100 * statistics.mean(local_frac),
         1e3 * q[len(q) // 2], 1e3 * q[int(len(q) * 0.9)],
         1e3 * statistics.mean(delays), s["fetch_blocks"], h["fetched"],
         h["already"], h["dropped"]))
EOF

conductor on
node 1
node 2
wait_until 150 streams_in || die "event streams did not come up"
for mode in on off; do
	if [ $mode = off ]; then
		conductor off
		wait_until 150 streams_in || die "event streams did not come back"
	fi
	"$PY" "$tmp/run.py" "$HTTP" "$tmp/mnt1" "$tmp/mnt2" "$KVCTL" $mode \
		"$REQUESTS" "$BLOCKS" "$BLOCK_KB" "$PREFILL_MS"
done

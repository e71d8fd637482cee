#!/bin/sh
# Conductor failover, measured: a private etcd on loopback, two
# `kvconductor serve --election` (a leader and a standby), one kvfsd
# holding BLOCKS blocks that finds the leader through etcd, and a steady
# load of REQUESTS /v1/schedule calls at RATE a second, each sent to BOTH
# conductors, as a router that does not know the leader would.  After a
# third of them the leader is killed with -9.  Reported:
#
#   elected    kill -> the first 200 from the new leader
#   complete   kill -> the first 200 whose decision reuses every one of
#              the BLOCKS blocks (the new leader's index holds the whole
#              node again: the kvfsd's stream moved and resynced)
#   failed     requests that got no 200 from either conductor
#   twice      requests that got a 200 from both (must be 0: never two
#              leaders acting)
#
# Usage: scripts/failover-bench.sh [BUILD_DIR]   (default build/plain)
# Environment: REQUESTS (1500), RATE (100), BLOCKS (1000), TTL (the
# conductors' --election-ttl; default: theirs, 3 s), ETCD (etcd binary).
# Needs etcd (Debian: etcd-server), FUSE and python3.  Everything it
# starts or makes is stopped and removed by its trap, even on failure.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$top/build/plain}
case $bin in /*) ;; *) bin=$top/$bin ;; esac
KVC=$bin/sched/kvconductor
KVFSD=$bin/fuse/kvfsd
ETCD=${ETCD:-$(command -v etcd 2>/dev/null || true)}
REQUESTS=${REQUESTS:-1500}
RATE=${RATE:-100}
BLOCKS=${BLOCKS:-1000}
TTL=${TTL:-}

die() {
	echo "failover-bench: $*" >&2
	exit 1
}
[ -x "$KVC" ] && [ -x "$KVFSD" ] ||
	die "build first: scripts/build.sh ${1:-build/plain}"
[ -n "$ETCD" ] && [ -x "$ETCD" ] || die "no etcd (Debian: etcd-server)"
command -v python3 >/dev/null 2>&1 || die "no python3"
[ -c /dev/fuse ] || die "no /dev/fuse"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/failover-bench.XXXXXX")
pool=/dev/shm/kvfs-failover-bench-$$.pool
mnt=$tmp/mnt
pids=""
# wait_until; etcd_start; conductor_start
. "$top/tests/lib.sh"
. "$top/tests/etcd_lib.sh"
. "$top/tests/conductor_lib.sh"
cleanup() {
	set +e
	for p in $pids; do kill -KILL "$p" 2>/dev/null; done
	if grep -q " $mnt fuse" /proc/mounts 2>/dev/null; then
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt"
	fi
	wait 2>/dev/null
	rm -rf "$pool" "$pool.d"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
mkdir "$mnt"

# ---- etcd, with its default settings, on random ports (etcd_lib.sh) ------
etcd_up() { "$KVC" leader "etcd://$ETCD_EP/bench" 2>&1 | grep -q 'no leader'; }
etcd_start pids bench || die "etcd did not start: $(tail -n 3 "$tmp/etcd.log")"
cport=$ETCD_PORT
URL=etcd://$ETCD_EP/bench

# ---- two conductors (conductor_lib.sh) --------------------------------------
conductor() {
	conductor_start pids "$1" --events 127.0.0.1:0 --prefill 1 \
		--decode 1 --reject off --election "$URL" \
		${TTL:+--election-ttl "$TTL"} ||
		die "conductor $1 did not start: $(cat "$tmp/$1.err")"
	cpid=$CPID
}
leads() { "$KVC" leader "$URL" 2>/dev/null | grep -qx "http $1"; }
conductor a
apid=$cpid
A=$(sed -n 's/^listen //p' "$tmp/a.out")
wait_until 300 leads "$A" || die "conductor a does not lead"
conductor b
B=$(sed -n 's/^listen //p' "$tmp/b.out")

# ---- a kvfsd holding BLOCKS blocks, following the election -----------------
slots=$((BLOCKS + 64))
timeout -s TERM 600 "$KVFSD" -f \
	-o "state=$tmp/state,pool=$pool,layout=chain,slot_size=4K,slots=$slots" \
	--conductor "$URL" "$mnt" >"$tmp/kvfsd.log" 2>&1 &
pids="$pids $!"
wait_until 100 test -f "$mnt/.kvfs/stats" ||
	die "kvfsd did not mount: $(tail -n 3 "$tmp/kvfsd.log")"
mkdir "$mnt/m"
# names differ in their first 8 bytes, the conductor's key (sched.h)
python3 - "$mnt/m" "$BLOCKS" "$tmp/hashes" <<'EOF'
import os, sys
d, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
names = ["%016x%048x" % (i + 1, 0) for i in range(n)]
for name in names:
    with open(os.path.join(d, name), "wb") as f:
        f.write(os.urandom(4096))
with open(out, "w") as f:
    f.write("\n".join(names) + "\n")
EOF
indexed() {
	python3 -c '
import json, sys, urllib.request
s = json.load(urllib.request.urlopen("http://%s/v1/stats" % sys.argv[1],
                                     timeout=5))
sys.exit(0 if s["blocks_indexed"] == int(sys.argv[2]) else 1)' "$@" 2>/dev/null
}
wait_until 300 indexed "$A" "$BLOCKS" || die "the leader did not index the blocks"

echo "failover-bench: etcd $("$ETCD" --version | head -n 1 | sed 's/^etcd Version: //')" \
	"on 127.0.0.1:$cport, leader a $A, standby b $B," \
	"election TTL ${TTL:-3} s; kvfsd with $BLOCKS blocks;" \
	"$REQUESTS requests at $RATE/s to both, kill -9 of a after $((REQUESTS / 3))"

# ---- the load, and the kill -------------------------------------------------
python3 - "$A" "$B" "$REQUESTS" "$RATE" "$tmp/hashes" "$apid" <<'EOF'
import json, os, signal, sys, threading, time, urllib.error, urllib.request

a, b, n, rate, hfile, apid = sys.argv[1:7]
n, rate, apid = int(n), float(rate), int(apid)
hashes = open(hfile).read().split()
body = json.dumps({"hashes": hashes, "input_length": 512 * len(hashes) + 512,
                   "output_length": 16}).encode()

def post(addr):
    """(status, decision or None): 0 when nothing answered"""
    req = urllib.request.Request("http://%s/v1/schedule" % addr, data=body,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as f:
            return f.status, json.load(f)
    except urllib.error.HTTPError as e:
        return e.code, None
    except Exception:
        return 0, None

results = [None] * n
def one(i):
    t = time.monotonic()
    out = {}
    def go(addr):
        out[addr] = post(addr)
    th = [threading.Thread(target=go, args=(x,)) for x in (a, b)]
    for x in th:
        x.start()
    for x in th:
        x.join()
    results[i] = (t, out[a], out[b])

t0 = time.monotonic()
kill_at = n // 3
t_kill = None
workers = []
for i in range(n):
    due = t0 + i / rate
    now = time.monotonic()
    if due > now:
        time.sleep(due - now)
    if i == kill_at:
        os.kill(apid, signal.SIGKILL)
        t_kill = time.monotonic()
    w = threading.Thread(target=one, args=(i,))
    w.start()
    workers.append(w)
for w in workers:
    w.join()

failed = twice = 0
elected = complete = None
by_a = by_b = 0
for i, (t, ra, rb) in enumerate(results):
    ok_a, ok_b = ra[0] == 200, rb[0] == 200
    by_a += ok_a
    by_b += ok_b
    if ok_a and ok_b:
        twice += 1
    if not ok_a and not ok_b:
        failed += 1
    if i >= kill_at and ok_b:
        if elected is None:
            elected = t - t_kill
        if complete is None and rb[1]["reuse_blocks"] == len(hashes):
            complete = t - t_kill
fmt = lambda x: "none" if x is None else "%.2f s" % x
print("requests %d: scheduled by a %d, by b %d; failed %d; scheduled twice %d"
      % (n, by_a, by_b, failed, twice))
print("after kill -9 of the leader: new leader answers in %s, with a "
      "complete index (all %d blocks reused) in %s"
      % (fmt(elected), len(hashes), fmt(complete)))
print(json.dumps({"requests": n, "rate": rate, "blocks": len(hashes),
                  "failed": failed, "twice": twice,
                  "elected_s": elected, "complete_s": complete}))
sys.exit(0 if twice == 0 and complete is not None else 1)
EOF

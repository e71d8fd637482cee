#!/bin/sh
# cluster.sh - three kvfsd nodes and an etcd, all on loopback: remote
# reads, replication with fsync, kill -9 of the writer and repair, a wrong
# secret, garbage frames, and a peer that stops answering.
#
# SKIP (77) without etcd, FUSE or python3.  Everything started here is
# stopped by the EXIT trap, whatever happened; every wait is bounded.
set -eu

T=cluster
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
KVCTL=$top_builddir/src/kvctl/kvctl
PY=${PYTHON3:-python3}
NBLK=12

# ok, bad, skip, gone, is_mounted, wait_until, blk: tests/lib.sh and the
# single-node helpers; this test keeps its own processes, mounts and trap
. "$top_srcdir/tests/fuse_lib.sh"
. "$top_srcdir/tests/etcd_lib.sh"
. "$top_srcdir/tests/conductor_lib.sh"

# converge TENTHS WHAT CMD...: CMD succeeds within TENTHS tenths of a
# second, or the test fails at once saying WHAT did not happen (what
# follows would only fail for the same reason, less clearly)
converge() {
	t=$1
	what=$2
	shift 2
	wait_until "$t" "$@" && return 0
	bad "did not converge within $((t / 10)) s: $what"
	exit 1
}

command -v etcd >/dev/null 2>&1 || skip "etcd not installed (Debian: etcd-server)"
[ -c /dev/fuse ] || skip "/dev/fuse is missing"
command -v fusermount3 >/dev/null 2>&1 || skip "fusermount3 not found"
command -v "$PY" >/dev/null 2>&1 || skip "python3 not found"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/$T.XXXXXX")
PIDS=
cleanup() {
	rc=$?
	set +e
	cluster_stop $PIDS
	rm -rf /dev/shm/kvfs-test-$T-$$-*.pool /dev/shm/kvfs-test-$T-$$-*.pool.d
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
		for l in "$tmp"/*.log; do
			echo "--- $l" >&2
			tail -n 25 "$l" >&2
		done
	fi
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# free loopback ports, from the kernel
ports=$(free_ports 8)
set -- $ports
ECLI=$1 EPEER=$2
PORT1=$3 PORT2=$4 PORT3=$5 PORT4=$6 PORT5=$7 PORTC=$8
PORT6=0
CONDUCTOR_OPT=

# ---- etcd (etcd_lib.sh) ------------------------------------------------
etcd_start PIDS kvfs-test "$ECLI" "$EPEER" || {
	bad "did not converge within 15 s: etcd answers on 127.0.0.1:$ECLI"
	exit 1
}
ok "etcd on 127.0.0.1:$ECLI"

URL=etcd://127.0.0.1:$ECLI/t$$
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secret"
chmod 600 "$tmp/secret"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/wrong"
chmod 600 "$tmp/wrong"

# node I [SECRET [REPLICAS]]: start kvfsd node I, wait for its mount
node() {
	i=$1
	sec=${2:-$tmp/secret}
	rep=${3:-2}
	eval port=\$PORT$i
	# node 3 lists a dead etcd endpoint first: it must use the next
	url=$URL
	[ "$i" != 3 ] || url=etcd://127.0.0.1:1,127.0.0.1:$ECLI/t$$
	mkdir -p "$tmp/mnt$i"
	timeout -s TERM 300 "$KVFSD" -f \
		-o "state=$tmp/state$i,pool=/dev/shm/kvfs-test-$T-$$-$i.pool,slot_size=256K,slots=64,layout=${LAYOUT:-chain}" \
		--cluster "$url" --node-id "$i" --listen "127.0.0.1:$port" \
		--secret-file "$sec" --replicas "$rep" --timeout-ms 1000 \
		$CONDUCTOR_OPT \
		"$tmp/mnt$i" >>"$tmp/node$i.log" 2>&1 &
	eval TPID$i=$!
	eval tp=\$TPID$i
	if ! wait_until 100 is_mounted "$tmp/mnt$i"; then
		if grep -Eq 'fuse: |fusermount' "$tmp/node$i.log"; then
			skip "mounting is not possible here: $(tail -n 1 "$tmp/node$i.log")"
		fi
		bad "node $i did not mount within 10 s"
		exit 1
	fi
	d=$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' "$tmp/mnt$i/.kvfs/nodes")
	eval NPID$i=$d
	PIDS="$d $PIDS"
}
kv() { i=$1; shift; "$KVCTL" -m "$tmp/mnt$i" "$@"; }
nnodes() { kv "$1" nodes -j | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["nodes"]))'; }
sees() { [ "$(nnodes "$1")" = "$2" ]; }
# local copy on node I, without fetching: the control socket's stat
has() { kv "$1" stat ns "$2" >/dev/null 2>&1; }
# all_see N I...: each node I sees N live nodes
all_see() {
	want=$1
	shift
	for j in "$@"; do sees "$j" "$want" || return 1; done
}

node 1
node 2
node 3
if wait_until 100 all_see 3 1 2 3; then
	ok "three nodes see each other"
else
	bad "membership: node 1 sees $(nnodes 1), node 2 $(nnodes 2), node 3 $(nnodes 3)"
fi

# ---- writes on node 1, fsync'd, read on 2 and 3 ---------------------------
mkdir "$tmp/mnt1/ns"
k=1
while [ $k -le $NBLK ]; do
	head -c $((100000 + k * 517)) /dev/urandom >"$tmp/data$k"
	# fsync: returns once R=2 home nodes hold it (kvfs(7), DURABILITY)
	if ! "$PY" -c "
import os,sys
fd=os.open(sys.argv[2],os.O_WRONLY|os.O_CREAT|os.O_EXCL,0o644)
os.write(fd,open(sys.argv[1],'rb').read())
os.close(fd)
fd=os.open(sys.argv[2],os.O_RDONLY); os.fsync(fd); os.close(fd)" \
		"$tmp/data$k" "$tmp/mnt1/ns/$(blk $k)"; then
		bad "write + fsync of block $k on node 1"
	fi
	k=$((k + 1))
done
ok "$NBLK blocks written and fsync'd on node 1"

# every block on R=2 home nodes now: count copies without fetching
under=0
k=1
while [ $k -le $NBLK ]; do
	c=0
	for i in 1 2 3; do has $i "$(blk $k)" && c=$((c + 1)); done
	[ $c -ge 2 ] || under=$((under + 1))
	k=$((k + 1))
done
if [ $under = 0 ]; then ok "after fsync every block has >= 2 copies"
else bad "$under blocks have fewer than 2 copies after fsync"; fi

for i in 2 3; do
	if cmp -s "$tmp/data1" "$tmp/mnt$i/ns/$(blk 1)"; then
		ok "block written on node 1 reads byte-identical on node $i"
	else
		bad "block 1 on node $i differs or is missing"
	fi
done

# ---- an open namespace: SGLang's file backend on node 1, read on 2 and 3 --
kv 1 ns create -y open eng >/dev/null || bad "ns create -y open on node 1"
for k in 1 2 3; do
	f=$(blk $((k + 1000)))_meta-llama-Llama-3-8B_0_1.bin
	# exists -> skip; else a tmp name, os.replace, then fsync for R copies
	if ! "$PY" -c "
import os,sys
src,final=sys.argv[1],sys.argv[2]
tmp=final+'.tmp.%d.1.uuid' % os.getpid()
with open(tmp,'wb') as f: f.write(open(src,'rb').read())
os.replace(tmp,final)
fd=os.open(final,os.O_RDONLY); os.fsync(fd); os.close(fd)" \
		"$tmp/data$k" "$tmp/mnt1/eng/$f"; then
		bad "SGLang-style store of $f on node 1"
	fi
done
for i in 2 3; do
	n=0
	for k in 1 2 3; do
		f=$(blk $((k + 1000)))_meta-llama-Llama-3-8B_0_1.bin
		cmp -s "$tmp/data$k" "$tmp/mnt$i/eng/$f" && n=$((n + 1))
	done
	if [ $n = 3 ]; then
		ok "open-namespace files written on node 1 read on node $i"
	else bad "open namespace: $n of 3 files read on node $i"; fi
done
[ -z "$(ls "$tmp/mnt1/eng" | grep tmp)" ] && ok "no tmp name is left" ||
	bad "a tmp name is left in the open namespace"

# ---- kill -9 the writer: survivors serve everything, repair makes R=2 ------
kill -KILL "$NPID1"
wait "$TPID1" 2>/dev/null || true
fusermount3 -u -z "$tmp/mnt1" 2>/dev/null || true
if wait_until 150 all_see 2 2 3; then
	ok "node 1's lease expired: the survivors see 2 nodes"
else
	bad "after kill -9 of node 1: node 2 sees $(nnodes 2)"
fi
both() {
	k=1
	while [ $k -le $NBLK ]; do
		has 2 "$(blk $k)" && has 3 "$(blk $k)" || return 1
		k=$((k + 1))
	done
}
# repair runs without any read: nothing here fetches
if wait_until 150 both; then
	ok "repair: every block has 2 copies among the survivors"
else
	bad "repair did not restore 2 copies"
fi
missing=0
k=1
while [ $k -le $NBLK ]; do
	for i in 2 3; do
		cmp -s "$tmp/data$k" "$tmp/mnt$i/ns/$(blk $k)" || missing=$((missing + 1))
	done
	k=$((k + 1))
done
if [ $missing = 0 ]; then ok "every block reads byte-identical on nodes 2 and 3"
else bad "$missing block reads failed on the survivors"; fi

# ---- garbage and truncated frames: refused, the node keeps serving -------
"$PY" - "$PORT2" <<'EOF'
import os, socket, sys
port = int(sys.argv[1])
for payload in (b"", b"\0", os.urandom(7), os.urandom(40), b"KVFW" + os.urandom(60),
                b"GET / HTTP/1.0\r\n\r\n", b"\xff" * 4096):
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    try:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(3)
        try:
            while s.recv(4096):
                pass
        except (socket.timeout, ConnectionResetError):
            pass
    finally:
        s.close()
EOF
if kill -0 "$NPID2" 2>/dev/null && cmp -s "$tmp/data2" "$tmp/mnt3/ns/$(blk 2)" &&
	kv 2 nodes >/dev/null; then
	ok "garbage and truncated frames: node 2 still up and serving"
else
	bad "node 2 after garbage frames"
fi

# ---- a wrong secret: its record in etcd fails the MAC under ours, and
# ours under its: it is no member (kvfsd(8), ETCD SECURITY) ---------------
node 4 "$tmp/wrong"
sleep 1
converge 50 "node 4 (wrong secret) sees itself only" sees 4 1
converge 50 "nodes 2 and 3 do not count node 4" all_see 2 2 3
if cat "$tmp/mnt4/ns/$(blk 3)" >/dev/null 2>&1; then
	bad "node 4 (wrong secret) read a block"
else
	ok "node 4 with the wrong secret reads nothing"
fi
if has 4 "$(blk 3)"; then bad "node 4 holds a block"; else ok "and holds nothing"; fi
if grep -q 'ignoring the node record .*/nodes/4' "$tmp/node2.log" &&
	grep -q 'ignoring the node record .*/nodes/2' "$tmp/node4.log"; then
	ok "node 2 and node 4 logged each other's records as ignored"
else
	bad "no ignored record logged by nodes 2 and 4"
fi
kill -TERM "$NPID4"
wait "$TPID4" 2>/dev/null || true
converge 150 "node 4 left: nodes 2 and 3 see 2 nodes" all_see 2 2 3

# ---- a peer that stops answering: the reader fails within its timeout ------
# node 5 keeps its blocks (replicas 1); pick a block it is the first home of
node 5 "$tmp/secret" 1
converge 100 "node 5 joined: nodes 2, 3, 5 see 3 nodes" all_see 3 2 3 5
# MOUNT/.kvfs/nodes is the cluster view by node id, this node first
if "$PY" - "$tmp/mnt3/.kvfs/nodes" <<'EOF'
import json, sys
n = json.load(open(sys.argv[1]))["nodes"]
ids = [str(x["id"]) for x in n]
assert sorted(ids) == ["2", "3", "5"], ids
assert ids[0] == "3" and n[0].get("self") is True, n[0]
assert not any(x.get("self") for x in n[1:]), n
EOF
then
	ok "node 3's .kvfs/nodes lists nodes 2, 3 and 5 by id, itself first"
else
	bad "node 3's .kvfs/nodes: $(cat "$tmp/mnt3/.kvfs/nodes")"
fi
mkdir -p "$tmp/mnt5/ns"
name=$("$PY" - <<'EOF'
import hashlib
def w(node, ns, h):
    return int.from_bytes(hashlib.sha256(node.encode() + b"\0" + ns.encode() + b"\0" + bytes.fromhex(h)).digest()[:8], "big")
for k in range(1000, 2000):
    h = "%064x" % k
    if max(("2", "3", "5"), key=lambda n: (w(n, "ns", h), n)) == "5":
        print(h)
        break
EOF
)
head -c 50000 /dev/urandom >"$tmp/mnt5/ns/$name"
sleep 1
if has 2 "$name" || has 3 "$name"; then
	bad "node 5's block left it though replicas is 1"
fi
kill -STOP "$NPID5"
start=$(date +%s)
if timeout 20 cat "$tmp/mnt2/ns/$name" >/dev/null 2>&1; then
	bad "read of a block only a stopped node has succeeded"
else
	took=$(($(date +%s) - start))
	if [ "$took" -le 6 ]; then
		ok "fetch from a stopped peer fails within its timeout (${took}s)"
	else
		bad "fetch from a stopped peer took ${took}s"
	fi
fi
# a prefetch waiting on the stopped peer holds up no other client of the
# node: it runs off the control thread (three tries of ~1 s each)
kv 2 prefetch ns "$name" "$name" "$name" >/dev/null 2>&1 &
PFPID=$!
sleep 0.3
if timeout 5 "$KVCTL" -m "$tmp/mnt2" status >/dev/null 2>&1 &&
	kill -0 "$PFPID" 2>/dev/null; then
	ok "kvctl status answers while a prefetch waits on a stopped peer"
else
	bad "kvctl status waited for a prefetch (or the prefetch ended early)"
fi
wait "$PFPID" 2>/dev/null || true
kill -CONT "$NPID5"

# a prefetch on node 2 of node 5's block: it is node 2's own afterwards
# (node 5's lease may have run out while it was stopped: it joins again)
converge 100 "node 5, continued, is seen again by node 2" sees 2 3
if kv 2 prefetch ns "$name" >"$tmp/prefetch.out" 2>&1 && has 2 "$name"; then
	ok "kvctl prefetch brings node 5's block to node 2"
else
	bad "kvctl prefetch did not bring the block to node 2: $(cat "$tmp/prefetch.out")"
fi
# prefetch -j: one JSON line whose "ok" says whether every block was had,
# with each failure's error by name (a block nobody holds: ENOENT), exit 1
missing=$(printf '%064x' 48879)
prc=0
kv 2 prefetch -j ns "$name" "$missing" >"$tmp/pfj.out" 2>"$tmp/pfj.err" ||
	prc=$?
if [ "$prc" -eq 1 ] && "$PY" - "$tmp/pfj.out" "$name" "$missing" <<'EOF'
import json, sys
j = json.loads(open(sys.argv[1]).read())
blocks = {b["hash"]: b for b in j["blocks"]}
assert j["ok"] is False, j
assert blocks[sys.argv[2]]["ok"] is True, j
bad = blocks[sys.argv[3]]
assert bad["ok"] is False and isinstance(bad["error"], str), j
assert bad.get("errno_name") == "ENOENT", j
EOF
then
	ok "prefetch -j: ok false, the missing block's error named, exit 1"
else
	bad "prefetch -j (exit $prc): $(cat "$tmp/pfj.out" "$tmp/pfj.err")"
fi

# ---- every home member lost at once: a cached copy elsewhere restores it --
# nodes 7 and 8 keep one copy (replicas 1) like node 5.  The block's home
# among 2 3 5 7 8 is node 5; once 5 is gone it is node 8.  Node 7 caches
# it by reading it, then 5 is killed: node 7, which is no home member,
# must find that no home member holds it and push it to node 8.
PORT7=0 PORT8=0
node 7 "$tmp/secret" 1
node 8 "$tmp/secret" 1
converge 100 "nodes 7 and 8 joined: nodes 2, 3, 5, 7, 8 see 5 nodes" \
	all_see 5 2 3 5 7 8
lost=$("$PY" - <<'EOF'
import hashlib
def w(node, ns, h):
    return int.from_bytes(hashlib.sha256(node.encode() + b"\0" + ns.encode() + b"\0" + bytes.fromhex(h)).digest()[:8], "big")
top = lambda nodes, h: max(nodes, key=lambda n: (w(n, "ns", h), n))
for k in range(3000, 9000):
    h = "%064x" % k
    if top(("2", "3", "5", "7", "8"), h) == "5" and top(("2", "3", "7", "8"), h) == "8":
        print(h)
        break
EOF
)
head -c 40000 /dev/urandom >"$tmp/lost"
cp "$tmp/lost" "$tmp/mnt5/ns/$lost"
if cmp -s "$tmp/lost" "$tmp/mnt7/ns/$lost" && has 7 "$lost" && ! has 8 "$lost"; then
	ok "node 7 caches node 5's block by reading it; node 8 has none"
else
	bad "setup: node 7 did not cache node 5's block (or node 8 has it)"
fi
kill -KILL "$NPID5"
wait "$TPID5" 2>/dev/null || true
fusermount3 -u -z "$tmp/mnt5" 2>/dev/null || true
if wait_until 200 has 8 "$lost" && cmp -s "$tmp/lost" "$tmp/mnt8/ns/$lost"; then
	ok "home node 5 killed: node 7's cached copy is pushed to the new home, node 8"
else
	bad "the block of killed node 5 did not reach its new home node 8"
fi

# ---- block events to a conductor that takes authenticated streams only:
# node 6's stream authenticates with the cluster secret, and its new block
# is indexed (the conductor holds it to RESET first and to node 6)
KVC=$top_builddir/sched/kvconductor
if [ -x "$KVC" ]; then
	conductor_start PIDS kvc --events "127.0.0.1:$PORTC" \
		--prefill 7 --decode 1 --secret-file "$tmp/secret" ||
		bad "kvconductor did not start: $(cat "$tmp/kvc.err")"
	LPID=$CPID
	HTTPC=$(conductor_port kvc)
	CONDUCTOR_OPT="--conductor 127.0.0.1:$PORTC"
	node 6
	mkdir -p "$tmp/mnt6/ev"
	head -c 1000 /dev/urandom >"$tmp/mnt6/ev/$(blk 77)"
	indexed() {
		"$PY" - "$HTTPC" <<'EOF'
import json, sys, urllib.request
with urllib.request.urlopen("http://127.0.0.1:%s/v1/stats" % sys.argv[1],
                            timeout=5) as f:
    s = json.load(f)
ev = s["events"]
sys.exit(0 if s["blocks_indexed"] >= 1 and ev["auth_failures"] == 0 and
         ev["errors"] == 0 else 1)
EOF
	}
	if wait_until 100 indexed 2>/dev/null; then
		ok "conductor stream of node 6, authenticated: its new block is indexed"
	else
		bad "conductor stream from node 6: $(tail -n 3 "$tmp/kvc.err")"
	fi
	kill "$LPID" 2>/dev/null || true
else
	echo "SKIP part: kvconductor was not built" >&2
fi

exit $fail

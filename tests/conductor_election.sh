#!/bin/sh
# Conductor leader election through a private etcd on loopback: two
# `kvconductor serve --election` and one kvfsd that finds the leader
# through etcd (--conductor etcd://.../NAME).  One leads, the other stands
# by and answers /v1/schedule with 503 and the leader's address (body and
# X-Kvfs-Leader); `kvconductor leader` names the leader; the kvfsd's
# blocks reach the leader's index.  After kill -9 of the leader the
# standby leads within 30 s, the kvfsd's stream moves to it (RESET and
# resync) so its index holds the blocks again, and `kvconductor leader`
# names it.  A leader stopped with SIGTERM resigns: the other takes over.
# Instances set by POST /v1/instances pass to the next leader through a
# record in etcd signed with the cluster secret; an unsigned one does not.
# With the secret the leader's own record is signed, and an unsigned one
# names no leader.
# The conductors' lease is 6 s, not 3: a leader steps down when it cannot
# renew for TTL - 0.5 s, and this test runs beside others on 2 cores.
# SKIP (77) without etcd, FUSE or python3.  fuse_lib.sh's trap kills every
# process (etcd and the conductors are HELPERS) and unmounts.
set -eu

T=conductor_election
. "${top_srcdir:-.}/tests/fuse_lib.sh"
. "$top_srcdir/tests/etcd_lib.sh"
. "$top_srcdir/tests/conductor_lib.sh"
KVC=$top_builddir/sched/kvconductor
ETCD=${ETCD:-$(command -v etcd 2>/dev/null || true)}
[ "${BUILD_CONDUCTOR:-yes}" != no ] && [ -x "$KVC" ] ||
	skip "kvconductor was not built"
[ "${BUILD_DAEMON:-yes}" != no ] || skip "kvfsd was not built"
[ -n "$ETCD" ] && [ -x "$ETCD" ] || skip "no etcd (Debian: etcd-server)"
[ -n "$PYTHON3" ] || skip "no python3"
fuse_begin

die() {
	echo "FAIL $1" >&2
	for f in "$tmp"/*.err "$tmp"/etcd.log; do
		[ -f "$f" ] || continue
		echo "--- $f" >&2
		tail -n 15 "$f" >&2
	done
	exit 1
}

# ---- HTTP checks (each exits 0 or 1, never hangs: 10 s timeouts) -------
cat >"$tmp/q.py" <<'EOF'
import json, sys, urllib.error, urllib.request

def call(addr, path, body=None):
    req = urllib.request.Request(
        "http://%s%s" % (addr, path),
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as f:
            return f.status, f.headers, json.load(f)
    except urllib.error.HTTPError as e:
        return e.code, e.headers, json.load(e)

def sched(addr, hashes):
    return call(addr, "/v1/schedule", {"hashes": hashes,
                                       "input_length": 512 * len(hashes) + 512,
                                       "output_length": 16})

cmd, addr = sys.argv[1], sys.argv[2]
try:
    if cmd == "role":  # ROLE [LEADER_HTTP]
        _, _, s = call(addr, "/v1/stats")
        ok = s["role"] == sys.argv[3]
        if len(sys.argv) > 4:
            ok = ok and (s["leader"] or {}).get("http") == sys.argv[4]
    elif cmd == "indexed":  # N
        _, _, s = call(addr, "/v1/stats")
        ok = s["blocks_indexed"] == int(sys.argv[3])
    elif cmd == "standby":  # LEADER_HTTP: a schedule is 503 naming it
        st, h, b = sched(addr, ["%064x" % 1])
        ok = (st == 503 and b.get("leader") == sys.argv[3] and
              h.get("X-Kvfs-Leader") == sys.argv[3])
        if not ok:
            print(st, dict(h), b, file=sys.stderr)
    elif cmd == "instances":  # POST /v1/instances: 2 prefill, 1 decode
        st, _, b = call(addr, "/v1/instances",
                        {"prefill": [{"node": 0}, {"node": 1}],
                         "decode": [{"node": 8}]})
        ok = st == 200 and b == {"prefill": 2, "decode": 1}
        if not ok:
            print(st, b, file=sys.stderr)
    elif cmd == "isset":  # NP ND | none: the instances in /v1/stats
        _, _, s = call(addr, "/v1/stats")
        if sys.argv[3] == "none":
            ok = s["instances_set"] is False
        else:
            ok = (s["instances_set"] is True and
                  len(s["prefill"]) == int(sys.argv[3]) and
                  len(s["decode"]) == int(sys.argv[4]))
    elif cmd == "noleader":  # a standby that names no leader
        _, _, s = call(addr, "/v1/stats")
        ok = s["role"] == "standby" and s["leader"] is None
    elif cmd == "scheduled":  # a schedule is answered 200
        st, _, b = sched(addr, ["%064x" % 1])
        ok = st == 200
        if not ok:
            print(st, b, file=sys.stderr)
    elif cmd == "etcdput":  # KEY VALUE, through etcd's JSON gateway
        import base64
        enc = lambda s: base64.b64encode(s.encode()).decode()
        st, _, b = call(addr, "/v3/kv/put",
                        {"key": enc(sys.argv[3]), "value": enc(sys.argv[4])})
        ok = st == 200
    elif cmd == "found":  # N HASH...: scheduled, N blocks of it indexed
        st, _, b = sched(addr, sys.argv[4:])
        ok = (st == 200 and
              b["cached_blocks"] + b["transfer_blocks"] == int(sys.argv[3]))
    else:
        ok = False
except Exception as e:
    print(cmd, addr, e, file=sys.stderr)
    ok = False
sys.exit(0 if ok else 1)
EOF
q() { "$PYTHON3" "$tmp/q.py" "$@" 2>>"$tmp/q.err"; }

# ---- a private etcd (etcd_lib.sh), random ports ---------------------------
# up once it answers that nobody leads
etcd_up() { "$KVC" leader "etcd://$ETCD_EP/kvc-test" 2>&1 | grep -q 'no leader'; }
etcd_start HELPERS kvfs-test || die "etcd did not start"
etcd_pid=$ETCD_PID
URL=etcd://$ETCD_EP/kvc-test
ok "etcd on $ETCD_EP"

# conductor NAME: started in the background (conductor_lib.sh), its ports
# read from its "listen" and "events" lines; sets CPID
conductor() {
	conductor_start HELPERS "$1" --events 127.0.0.1:0 --prefill 1 \
		--decode 1 --election "$URL" --election-ttl 6 ||
		die "conductor $1 did not start"
}
http_of() { sed -n 's/^listen //p' "$tmp/$1.out"; }

# ---- one leads, one stands by -------------------------------------------
conductor a
APID=$CPID
A=$(http_of a)
wait_until 300 q role "$A" leader "$A" || die "a does not lead"
ok "the first conductor leads"
conductor b
BPID=$CPID
B=$(http_of b)
wait_until 300 q role "$B" standby "$A" ||
	die "b is not a standby that names a"
ok "the second stands by and names the leader in /v1/stats"
q role "$A" leader "$A" && ok "a still leads" || bad "a no longer leads"
q standby "$B" "$A" &&
	ok "the standby answers /v1/schedule with 503 and the leader" ||
	bad "the standby's /v1/schedule: $(tail -n 1 "$tmp/q.err")"
curl_metric() {
	"$PYTHON3" -c '
import sys, urllib.request
t = urllib.request.urlopen("http://%s/metrics" % sys.argv[1], timeout=10).read()
sys.exit(0 if ("\nkvconductor_leader %s\n" % sys.argv[2]).encode() in t else 1)' "$@"
}
curl_metric "$A" 1 && curl_metric "$B" 0 &&
	ok "/metrics: kvconductor_leader 1 and 0" || bad "/metrics role"
expect "http $A" "kvconductor leader names a" sh -c \
	"\"$KVC\" leader \"$URL\" | head -n 1"

# ---- a kvfsd that finds the leader through etcd -----------------------
KVFSD_ARGS="--conductor $URL" kvfsd_start "slot_size=64K,slots=16"
"$FE" mkdir "$MNT/m" >/dev/null
# the conductor keys a block by its hash's first 8 bytes (sched.h)
b1=$(printf '01%062x' 0)
b2=$(printf '02%062x' 0)
expect OK "block 1" "$FE" put "$MNT/m/$b1" 1000
expect OK "block 2" "$FE" put "$MNT/m/$b2" 2000
wait_until 300 q indexed "$A" 2 &&
	ok "the leader indexed the kvfsd's blocks" ||
	die "the leader did not index the blocks"
q indexed "$B" 0 && ok "the standby has no stream" ||
	bad "the standby has blocks"

# ---- kill -9 of the leader ------------------------------------------------
kill -KILL "$APID"
wait "$APID" 2>/dev/null || true
t0=$(date +%s)
wait_until 300 q role "$B" leader "$B" || die "b did not take over"
ok "the standby leads after kill -9 of the leader ($(($(date +%s) - t0)) s)"
wait_until 300 q indexed "$B" 2 ||
	die "the new leader did not get the blocks back"
q found "$B" 2 "$b1" "$b2" &&
	ok "the new leader schedules on the kvfsd's blocks (resync)" ||
	bad "the new leader's /v1/schedule does not see the blocks"
grep -q "conductor leader: events to" "$tmp/kvfsd.log" &&
	ok "kvfsd followed the election" || bad "no move in the kvfsd log"
expect "http $B" "kvconductor leader names the new leader" sh -c \
	"\"$KVC\" leader \"$URL\" | head -n 1"

# ---- a leader that cannot renew its lease stops acting ------------------
# etcd frozen: b's renewals go unanswered, so b must step down before its
# lease could end (TTL - 0.5 s after its last renewal), never act on it
kill -STOP "$etcd_pid"
t0=$(date +%s)
if wait_until 300 q role "$B" standby; then
	ok "with etcd frozen the leader steps down ($(($(date +%s) - t0)) s)"
	"$PYTHON3" - "$B" <<'EOF2' && ok "and answers /v1/schedule 503" ||
import json, sys, urllib.error, urllib.request
req = urllib.request.Request("http://%s/v1/schedule" % sys.argv[1],
    data=json.dumps({"block_keys": [1], "input_length": 1024,
                     "output_length": 1}).encode())
try:
    urllib.request.urlopen(req, timeout=10)
    sys.exit(1)
except urllib.error.HTTPError as e:
    sys.exit(0 if e.code == 503 else 1)
EOF2
		bad "a leader without a lease still schedules"
else
	bad "with etcd frozen the leader did not step down"
fi
kill -CONT "$etcd_pid"
wait_until 300 q role "$B" leader "$B" && ok "etcd back: b leads again" ||
	die "b does not lead again after etcd came back"

# ---- a leader stopped with SIGTERM resigns -----------------------------
conductor c
CPID_C=$CPID
C=$(http_of c)
wait_until 300 q role "$C" standby "$B" || die "c is not b's standby"
kill -TERM "$BPID"
wait_until 300 gone "$BPID" || die "b ignored SIGTERM"
wait_until 300 q role "$C" leader "$C" &&
	ok "after the leader's SIGTERM the standby leads" ||
	die "c did not take over from a resigning b"
wait_until 300 q indexed "$C" 2 && ok "and indexes the blocks" ||
	bad "c did not get the blocks"

# ---- instances set by POST /v1/instances outlive their leader ----------
# conductors without --prefill/--decode, in an election of their own and
# with the cluster secret: the leader keeps what POST /v1/instances set
# in etcd, signed, and the standby that takes over adopts it; a record
# that is not signed with the secret is not adopted
URL2=etcd://$ETCD_EP/kvc-inst
printf 'kvfs-test-secret-0123456789abcdef\n' >"$tmp/secret"
chmod 600 "$tmp/secret"
bare() {
	conductor_start HELPERS "$1" --events 127.0.0.1:0 \
		--election "$URL2" --election-ttl 6 \
		--secret-file "$tmp/secret" || die "conductor $1 did not start"
}
bare x
XPID=$CPID
X=$(http_of x)
wait_until 300 q role "$X" leader "$X" || die "x does not lead"
bare y
YPID=$CPID
Y=$(http_of y)
wait_until 300 q role "$Y" standby "$X" || die "y is not x's standby"
q isset "$X" none && ok "no instances yet" || bad "x has instances"
q instances "$X" && ok "POST /v1/instances on the leader" ||
	bad "POST /v1/instances: $(tail -n 1 "$tmp/q.err")"
kill -KILL "$XPID"
wait "$XPID" 2>/dev/null || true
wait_until 300 q role "$Y" leader "$Y" || die "y did not take over from x"
wait_until 100 q isset "$Y" 2 1 &&
	ok "the new leader adopted the instances POST set (2 + 1)" ||
	bad "the new leader has no instances"
q scheduled "$Y" && ok "and schedules" ||
	bad "the new leader's /v1/schedule: $(tail -n 1 "$tmp/q.err")"
bare z
ZPID=$CPID
Z=$(http_of z)
wait_until 300 q role "$Z" standby "$Y" || die "z is not y's standby"
q etcdput "$ETCD_EP" /kvfs/kvc-inst/conductor/instances \
	'{"prefill":[{"node":7}],"decode":[{"node":9}]}' ||
	die "could not write etcd"
kill -KILL "$YPID"
wait "$YPID" 2>/dev/null || true
wait_until 300 q role "$Z" leader "$Z" || die "z did not take over from y"
sleep 1 # the adoption runs within a second of the election
q isset "$Z" none &&
	ok "an unsigned instances record is not adopted" ||
	bad "z adopted instances nobody with the secret wrote"
grep -q 'instances kept in etcd .* are not signed' "$tmp/z.err" &&
	ok "and that is logged" || bad "no log of the refused record"

# ---- the leader's record is signed too ----------------------------------
# y named x above only through x's signed record; a record put in etcd by
# someone without the secret (here: over z's) names nobody to z
q etcdput "$ETCD_EP" /kvfs/kvc-inst/conductor/leader \
	'{"http":"127.0.0.1:1","events":"127.0.0.1:2"}' ||
	die "could not write etcd"
wait_until 300 q noleader "$Z" &&
	ok "an unsigned leader record names no leader" ||
	bad "z names the leader of an unsigned record"
grep -q "the leader's record is not signed" "$tmp/z.err" &&
	ok "and that is logged" || bad "no log of the unsigned leader record"
kvfsd_stop && ok "kvfsd: SIGTERM, exit 0" || bad "kvfsd: exit status"
kill -TERM "$CPID_C" 2>/dev/null || true
exit "$fail"

#!/bin/sh
# etcd.sh - what kvfsd trusts in etcd (kvfsd(8), ETCD SECURITY):
#
#   (a) records written straight into etcd by someone without the cluster
#       secret (no MAC, a wrong MAC, a node's record copied under another
#       id, a dead node's record put back under a fresh lease, a forged
#       namespace) are ignored and logged, and the nodes work on; a forged
#       namespace in the way of a real one is replaced
#   (b) etcd with user/password authentication (and tokens that expire
#       every 2 s): nodes join with --etcd-user/--etcd-password-file; a
#       wrong password, a password file others may read, no user: refused
#   (c) etcd over TLS with client certificates (a throwaway CA made here
#       with openssl): a node joins with etcds:// and --etcd-ca/-cert/-key;
#       one without a client certificate is refused
#
# SKIP (77) without etcd, curl, openssl, FUSE or python3.  Everything
# started here is stopped by the EXIT trap, whatever happened; every wait
# is bounded; everything listens on loopback, on ports the kernel picked.
set -eu

T=security_etcd
top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
KVCTL=$top_builddir/src/kvctl/kvctl
PY=${PYTHON3:-python3}

# ok, bad, skip, gone, is_mounted, wait_until, blk: tests/lib.sh and the
# single-node helpers; this test keeps its own processes, mounts and trap
. "$top_srcdir/tests/fuse_lib.sh"
. "$top_srcdir/tests/etcd_lib.sh"

command -v etcd >/dev/null 2>&1 || skip "etcd not installed (Debian: etcd-server)"
command -v curl >/dev/null 2>&1 || skip "curl not found"
command -v openssl >/dev/null 2>&1 || skip "openssl not found"
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
ports=$(free_ports 12)
set -- $ports
ECLI=$1 EPEER=$2 SCLI=$3 SPEER=$4
PORT1=$5 PORT2=$6 PORT3=$7 PORT4=$8 PORT5=$9
shift 9
PORT6=$1 PORT7=$2

# converge TENTHS WHAT CMD...: CMD succeeds in time, or the test stops
converge() {
	t=$1
	what=$2
	shift 2
	wait_until "$t" "$@" && return 0
	bad "did not converge within $((t / 10)) s: $what"
	exit 1
}

NAME=t$$
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/secret"
chmod 600 "$tmp/secret"

# ---- etcd's JSON gateway, by hand ------------------------------------------
b64() { printf '%s' "$1" | base64 | tr -d '\n'; }
# gw PATH JSON [curl options]: POST to the plain etcd, the reply on stdout
gw() {
	p=$1
	b=$2
	shift 2
	curl -sS --noproxy '*' --max-time 5 "$@" -X POST -d "$b" \
		"${GW:-http://127.0.0.1:$ECLI}$p"
}
# put KEY VALUE [LEASE]: straight into etcd, as an attacker would
put() {
	l=
	[ -z "${3:-}" ] || l=",\"lease\":\"$3\""
	gw /v3/kv/put "{\"key\":\"$(b64 "$1")\",\"value\":\"$(b64 "$2")\"$l}" >/dev/null
}
# field F of the first kv of KEY's range ("value" decoded), "" if none
kvget() {
	gw /v3/kv/range "{\"key\":\"$(b64 "$1")\"}" ${3:-} | "$PY" -c '
import base64,json,sys
kvs=json.load(sys.stdin).get("kvs") or [{}]
v=kvs[0].get(sys.argv[1],"")
print(base64.b64decode(v).decode() if sys.argv[1] in ("value","key") else v)' "$2"
}

# start_etcd NAME CLIENT PEER SCHEME [ARGS...]: data $tmp/NAME, log
# $tmp/NAME.log (etcd_lib.sh), its pid in PIDS
start_etcd() {
	etcd_run "$tmp/$1" "$@"
	PIDS="$ETCD_PID $PIDS"
}

# node I URL [OPTS...]: start kvfsd node I, wait for its mount
node() {
	i=$1
	u=$2
	shift 2
	eval port=\$PORT$i
	mkdir -p "$tmp/mnt$i"
	timeout -s TERM 300 "$KVFSD" -f \
		-o "state=$tmp/state$i,pool=/dev/shm/kvfs-test-$T-$$-$i.pool,slot_size=256K,slots=64,layout=chain" \
		--cluster "$u" --node-id "$i" --listen "127.0.0.1:$port" \
		--secret-file "$tmp/secret" --timeout-ms 1000 "$@" \
		"$tmp/mnt$i" >>"$tmp/node$i.log" 2>&1 &
	PIDS="$! $PIDS"
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
# stop_node I: SIGTERM, gone and unmounted within 10 s
stop_node() {
	sn=$1
	eval p=\$NPID$sn
	kill -TERM "$p"
	wait_until 100 gone "$p" || bad "node $sn did not stop within 10 s"
	wait_until 50 eval '! is_mounted "$tmp/mnt$sn"' ||
		bad "node $sn left its mount behind"
}
# refused I WORDS URL [OPTS...]: node I does not start, and its log says
# WORDS (a grep -E pattern) within 15 s
refused() {
	i=$1
	w=$2
	u=$3
	shift 3
	mkdir -p "$tmp/mnt$i"
	rc=0
	timeout -s TERM 15 "$KVFSD" -f \
		-o "state=$tmp/state$i,pool=/dev/shm/kvfs-test-$T-$$-$i.pool,slot_size=256K,slots=64" \
		--cluster "$u" --node-id "$i" --listen "127.0.0.1:0" \
		--secret-file "$tmp/secret" "$@" "$tmp/mnt$i" \
		>"$tmp/refused$i.log" 2>&1 || rc=$?
	if is_mounted "$tmp/mnt$i"; then
		fusermount3 -u -z "$tmp/mnt$i" 2>/dev/null || true
		return 1
	fi
	[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -Eq "$w" "$tmp/refused$i.log"
}
kv() { i=$1; shift; "$KVCTL" -m "$tmp/mnt$i" "$@"; }
nnodes() { kv "$1" nodes -j | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["nodes"]))'; }
sees() { [ "$(nnodes "$1")" = "$2" ]; }
etcd_up() { curl -sS --noproxy '*' --max-time 1 "$@" >/dev/null 2>&1; }
# a sealed record: BODY " mac=" 64 lowercase hex
signed() { printf '%s' "$1" | grep -Eq "$2 mac=[0-9a-f]{64}\$"; }
logged() { grep -c "$2" "$tmp/node$1.log" || true; }

# ---- usage: TLS options need etcds:// ----------------------------------
rc=0
# a pool of the test's own (the trap removes it): were the start not
# refused, nothing would be left under kvfsd's default name
"$KVFSD" -o "state=$tmp/u,pool=/dev/shm/kvfs-test-$T-$$-u.pool" \
	--cluster "etcd://127.0.0.1:$ECLI/x" --node-id u --listen 127.0.0.1:0 \
	--secret-file "$tmp/secret" --etcd-ca "$tmp/none.pem" "$tmp" \
	>"$tmp/usage.out" 2>&1 || rc=$?
if [ $rc = 2 ] && grep -q "etcds://" "$tmp/usage.out"; then
	ok "--etcd-ca with etcd:// is a usage error"
else
	bad "--etcd-ca with etcd://: rc $rc, $(cat "$tmp/usage.out")"
fi

# ============ (a) records without the secret =============================
start_etcd plain "$ECLI" "$EPEER" http --auth-token-ttl 2
converge 150 "etcd answers on 127.0.0.1:$ECLI" etcd_up "http://127.0.0.1:$ECLI/health"
ok "etcd on 127.0.0.1:$ECLI"
URL=etcd://127.0.0.1:$ECLI/$NAME
P=/kvfs/$NAME

node 1 "$URL"
node 2 "$URL"
converge 100 "nodes 1 and 2 see each other" eval 'sees 1 2 && sees 2 2'
ok "two nodes see each other"

v1=$(kvget "$P/nodes/1" value)
lease1=$(kvget "$P/nodes/1" lease)
if signed "$v1" '^\{.*\}'; then
	ok "a node record ends in its MAC"
else
	bad "node 1's record has no MAC: '$v1'"
fi

# forged nodes: no MAC, a wrong MAC, node 1's record under another id
# (with node 1's own lease, so that it lives as long as node 1)
body='{"id":"evil","addr":"127.0.0.1:9","transports":"tcp","slot_size":262144,"nslots":64}'
put "$P/nodes/evil" "$body"
put "$P/nodes/evil2" "$body mac=$(printf '%064d' 0)"
put "$P/nodes/evil3" "$v1" "$lease1"
# a forged namespace, and one in the way of a namespace node 1 makes
put "$P/ns/forged" "7 open"
put "$P/ns/pre" "7"
# the watch fires at once; wait past a resync (5 s) anyway
sleep 6
if sees 1 2 && sees 2 2; then
	ok "forged node records are ignored (no MAC, wrong MAC, copied)"
else
	bad "forged node records: node 1 sees $(nnodes 1), node 2 $(nnodes 2)"
fi
n=$(logged 1 "ignoring the node record $P/nodes/evil")
if [ "$n" -ge 1 ] && [ "$n" -le 3 ]; then
	ok "node 1 logs the forged records, rate-limited ($n lines in 6 s)"
else
	bad "node 1 logged the forged records $n times"
fi
n=$(kv 1 nodes -j | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["bad_records"])')
if [ "$n" -ge 3 ]; then
	ok "kvctl nodes counts the refused records ($n)"
else
	bad "kvctl nodes counts $n refused records, not 3 or more"
fi

# the nodes work: a block fsync'd on 1 (R=2: both must hold it; a forged
# home node would make the fsync fail) reads back on 2
mkdir "$tmp/mnt1/ns"
head -c 100000 /dev/urandom >"$tmp/data1"
if "$PY" -c "
import os,sys
fd=os.open(sys.argv[2],os.O_WRONLY|os.O_CREAT|os.O_EXCL,0o644)
os.write(fd,open(sys.argv[1],'rb').read())
os.close(fd)
fd=os.open(sys.argv[2],os.O_RDONLY); os.fsync(fd); os.close(fd)" \
	"$tmp/data1" "$tmp/mnt1/ns/$(blk 1)" &&
	cmp -s "$tmp/data1" "$tmp/mnt2/ns/$(blk 1)"; then
	ok "with forged records around, a block fsync'd on 1 reads on 2"
else
	bad "write + fsync on 1, read on 2"
fi

# a forged namespace does not exist; one in the way is replaced
if [ -e "$tmp/mnt2/forged" ]; then
	bad "a forged namespace record made a namespace"
else
	ok "a forged namespace record is ignored"
fi
wait_until 50 eval '[ "$(logged 2 "ignoring the namespace record $P/ns/forged")" -ge 1 ]' ||
	bad "node 2 did not log the forged namespace"
mkdir "$tmp/mnt1/pre"
pre_signed() { signed "$(kvget "$P/ns/pre" value)" '^512'; }
if wait_until 150 pre_signed; then
	ok "a forged record in the way of a namespace is replaced"
else
	bad "namespace pre in etcd: '$(kvget "$P/ns/pre" value)'"
fi
if wait_until 50 eval '[ -d "$tmp/mnt2/pre" ]'; then
	ok "the replaced namespace is found on node 2"
else
	bad "namespace pre is not found on node 2"
fi

# a dead node's record put back under a fresh lease: not the same life
v2=$(kvget "$P/nodes/2" value)
stop_node 2
lease=$(gw /v3/lease/grant '{"TTL":"60"}' | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["ID"])')
put "$P/nodes/2" "$v2" "$lease"
sleep 1
if wait_until 80 sees 1 1 && ! wait_until 20 eval '! sees 1 1'; then
	ok "a dead node's record replayed under a new lease is ignored"
else
	bad "replayed record of node 2: node 1 sees $(nnodes 1)"
fi
stop_node 1

# ============ (b) user and password =========================================
# root (etcd wants it before auth enable) and kvfs, who may touch /kvfs/
for r in '/v3/auth/user/add {"name":"root","password":"rootpw"}' \
	'/v3/auth/role/add {"name":"root"}' \
	'/v3/auth/user/grant {"user":"root","role":"root"}' \
	'/v3/auth/user/add {"name":"kvfs","password":"kvfs pw"}' \
	'/v3/auth/role/add {"name":"kvfs"}' \
	"/v3/auth/role/grant {\"name\":\"kvfs\",\"perm\":{\"permType\":\"READWRITE\",\"key\":\"$(b64 /kvfs/)\",\"range_end\":\"$(b64 /kvfs0)\"}}" \
	'/v3/auth/user/grant {"user":"kvfs","role":"kvfs"}' \
	'/v3/auth/enable {}'; do
	out=$(gw "${r%% *}" "${r#* }") || true
	case $out in
	*error*) bad "etcd ${r%% *}: $out" ;;
	esac
done
printf 'kvfs pw\n' >"$tmp/pw"
chmod 600 "$tmp/pw"
printf 'not it\n' >"$tmp/wrongpw"
chmod 600 "$tmp/wrongpw"
cp "$tmp/pw" "$tmp/openpw"
chmod 644 "$tmp/openpw"
if gw /v3/kv/range "{\"key\":\"$(b64 "$P/nodes/1")\"}" | grep -q error; then
	ok "etcd auth is on: a request without a token is refused"
else
	bad "etcd auth: a request without a token got through"
fi

AUTH="--etcd-user kvfs --etcd-password-file $tmp/pw"
node 3 "$URL" $AUTH
node 4 "$URL" $AUTH
converge 100 "nodes 3 and 4 see each other through etcd auth" eval 'sees 3 2 && sees 4 2'
ok "two nodes join an etcd with authentication"
# tokens expire every 2 s (--auth-token-ttl): keepalive, watch and the
# namespace calls must authenticate again
sleep 5
if sees 3 2 && sees 4 2 && ! grep -q "keepalive failed" "$tmp/node3.log" "$tmp/node4.log"; then
	ok "membership survives expired tokens"
else
	bad "after token expiry: node 3 sees $(nnodes 3), node 4 $(nnodes 4)"
fi
mkdir "$tmp/mnt3/authns"
sleep 3
if wait_until 100 eval '[ -d "$tmp/mnt4/authns" ]'; then
	ok "a namespace published through etcd auth is found on the other node"
else
	bad "namespace authns is not found on node 4"
fi
if refused 6 "authentication failed" "$URL" --etcd-user kvfs \
	--etcd-password-file "$tmp/wrongpw"; then
	ok "a wrong etcd password is refused"
else
	bad "wrong etcd password: $(tail -n 3 "$tmp/refused6.log")"
fi
if refused 6 "readable by group or others" "$URL" --etcd-user kvfs \
	--etcd-password-file "$tmp/openpw"; then
	ok "a password file others may read is refused"
else
	bad "password file mode 0644: $(tail -n 3 "$tmp/refused6.log")"
fi
if refused 6 "cannot join" "$URL"; then
	ok "a node without etcd credentials is refused"
else
	bad "no etcd user: $(tail -n 3 "$tmp/refused6.log")"
fi
stop_node 3
stop_node 4

# ============ (c) TLS with client certificates ==============================
ossl() { openssl "$@" >>"$tmp/openssl.log" 2>&1; }
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
(
	cd "$tmp"
	ossl req -x509 $ec -keyout ca.key -out ca.pem -days 1 -subj /CN=kvfs-test-ca &&
	ossl req $ec -keyout server.key -out server.csr -subj /CN=127.0.0.1 &&
	# the gateway dials etcd's gRPC with the server's own certificate:
	# it must be good for clientAuth too
	printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >server.ext &&
	ossl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
		-out server.pem -days 1 -extfile server.ext &&
	ossl req $ec -keyout client.key -out client.csr -subj /CN=kvfs &&
	printf 'extendedKeyUsage=clientAuth\n' >client.ext &&
	ossl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
		-out client.pem -days 1 -extfile client.ext &&
	chmod 600 ca.key server.key client.key
) || { bad "openssl could not make the test certificates"; exit 1; }
start_etcd tls "$SCLI" "$SPEER" https --cert-file "$tmp/server.pem" \
	--key-file "$tmp/server.key" --trusted-ca-file "$tmp/ca.pem" \
	--client-cert-auth
TLS="--cacert $tmp/ca.pem --cert $tmp/client.pem --key $tmp/client.key"
converge 150 "etcd answers over TLS on 127.0.0.1:$SCLI" etcd_up $TLS "https://127.0.0.1:$SCLI/health"
if etcd_up --cacert "$tmp/ca.pem" "https://127.0.0.1:$SCLI/v3/kv/range" -X POST -d '{"key":"eA=="}'; then
	bad "the TLS etcd answers a client without a certificate"
fi
ok "etcd over TLS with client certificates on 127.0.0.1:$SCLI"
SURL=etcds://127.0.0.1:$SCLI/$NAME
node 5 "$SURL" --etcd-ca "$tmp/ca.pem" --etcd-cert "$tmp/client.pem" \
	--etcd-key "$tmp/client.key"
node 7 "$SURL" --etcd-ca "$tmp/ca.pem" --etcd-cert "$tmp/client.pem" \
	--etcd-key "$tmp/client.key"
converge 100 "nodes 5 and 7 see each other over TLS" eval 'sees 5 2 && sees 7 2'
ok "two nodes join over TLS with a client certificate"
if signed "$(GW=https://127.0.0.1:$SCLI kvget "$P/nodes/5" value "$TLS")" '^\{.*\}'; then
	ok "the record of a node over TLS carries its MAC"
else
	bad "node 5's record over TLS: '$(GW=https://127.0.0.1:$SCLI kvget "$P/nodes/5" value "$TLS")'"
fi
if refused 6 "cannot join" "$SURL" --etcd-ca "$tmp/ca.pem"; then
	ok "a node without a client certificate is refused"
else
	bad "no client certificate: $(tail -n 3 "$tmp/refused6.log")"
fi
if refused 6 "cannot join" "$SURL" --etcd-cert "$tmp/client.pem" \
	--etcd-key "$tmp/client.key"; then
	ok "a node that does not trust etcd's CA is refused"
else
	bad "unknown CA: $(tail -n 3 "$tmp/refused6.log")"
fi
stop_node 5
stop_node 7

exit $fail

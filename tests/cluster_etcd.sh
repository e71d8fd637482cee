#!/bin/sh
# Cluster membership against a private etcd on loopback (random ports, a
# temp data dir): two members see each other, a duplicate id is refused,
# namespaces publish and resolve, a member killed with -9 disappears after
# its 2 s TTL while the other sees the epoch move, a stopped member whose
# lease expired registers again, leave removes at once, bad urls and ids
# are refused, and with etcd gone join says why and leave does not hang.
# SKIP (77) without etcd.  The trap kills every process and removes the
# temp dir whatever happens; every wait is bounded.
set -eu

T=cluster_etcd
# ok, bad, skip, wait_until; etcd_start, etcd_stop
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/etcd_lib.sh"
MEMBER=$top_builddir/tests/helpers/cluster_member
ETCD=${ETCD:-$(command -v etcd 2>/dev/null || true)}

if [ ! -x "$MEMBER" ]; then
	bad "$MEMBER not built"
	exit 1
fi
if [ -z "$ETCD" ] || [ ! -x "$ETCD" ]; then
	skip "no etcd (Debian: etcd-server)"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cluster_etcd.XXXXXX")
pids=""
etcd_pid=""
cleanup() {
	for p in $pids $etcd_pid; do kill -KILL "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

die() {
	bad "$1"
	for f in "$tmp"/*.out "$tmp"/*.err; do
		[ -f "$f" ] || continue
		echo "--- $f" >&2
		tail -n 20 "$f" >&2
	done
	exit 1
}

now_ms() { date +%s%3N; }

# wait_for FILE REGEX SECONDS: 0 once a line of FILE matches
wait_for() { wait_until $(($3 * 10)) grep -qs -- "$2" "$1"; }

# reap PID SECONDS: its exit status in $rc once it exits (killed when it
# does not, rc 124); it leaves the trap's list
reap() {
	i=0
	while [ $i -lt $(($2 * 20)) ] && kill -0 "$1" 2>/dev/null; do
		sleep 0.05
		i=$((i + 1))
	done
	rc=124
	if kill -0 "$1" 2>/dev/null; then
		kill -KILL "$1" 2>/dev/null || true
		wait "$1" 2>/dev/null || true
	else
		rc=0
		wait "$1" 2>/dev/null || rc=$?
	fi
	pids=$(echo " $pids " | sed "s/ $1 / /")
}

# epoch of the last line of FILE matching REGEX ("WHAT EPOCH IDS")
epoch_of() { grep -- "$2" "$1" | tail -n 1 | cut -d' ' -f2; }

# ---- a private etcd (etcd_lib.sh), random ports -------------------------
# it answers once a member can join (and leave: EOF on stdin)
etcd_up() {
	"$MEMBER" "etcd://$ETCD_EP/kvfs-test" ping 2 </dev/null >/dev/null 2>&1
}
etcd_start etcd_pid kvfs-test || die "etcd did not start: $(tail -n 3 "$tmp/etcd.log")"
cport=$ETCD_PORT
URL=etcd://$ETCD_EP/kvfs-test
ok "etcd $("$ETCD" --version 2>/dev/null | head -n 1 | sed 's/^etcd //') on 127.0.0.1:$cport"

# start NAME ID TTL FD: a member reading commands from fd FD of this shell
start() {
	rm -f "$tmp/$1.in"
	mkfifo "$tmp/$1.in"
	"$MEMBER" "$URL" "$2" "$3" <"$tmp/$1.in" >"$tmp/$1.out" \
		2>"$tmp/$1.err" &
	pid=$!
	pids="$pids $pid"
	eval "exec $4>\"\$tmp/\$1.in\""
}
# send FD LINE
send() { eval "printf '%s\n' \"\$2\" >&$1"; }

# ---- two members ------------------------------------------------------
start a a 2 3
pid_a=$pid
start b b 2 4
pid_b=$pid
wait_for "$tmp/a.out" ' a,b$' 5 || die "a does not see a and b"
wait_for "$tmp/b.out" ' a,b$' 5 || die "b does not see a and b"
ok "two members join, each sees both"
send 3 nodes
wait_for "$tmp/a.out" '^nodes [0-9]* a,b$' 5 && ok "nodes lists both, sorted" ||
	bad "nodes: $(grep '^nodes' "$tmp/a.out")"

# ---- a duplicate id ----------------------------------------------------
rc=0
"$MEMBER" "$URL" a 2 </dev/null >"$tmp/dup.out" 2>"$tmp/dup.err" || rc=$?
if [ $rc = 2 ] && grep -q '^join failed: EEXIST$' "$tmp/dup.out" &&
	grep -q "node id 'a' is already live" "$tmp/dup.err"; then
	ok "a duplicate live id is refused with EEXIST"
else
	bad "duplicate id: rc $rc, $(cat "$tmp/dup.out" "$tmp/dup.err")"
fi

# ---- namespaces ----------------------------------------------------------
send 3 "publish llama3-8b 16"
wait_for "$tmp/a.out" '^publish 0$' 5 || bad "publish a new namespace"
send 4 "find llama3-8b"
wait_for "$tmp/b.out" '^find 16$' 5 || bad "b finds a's namespace"
send 4 "publish llama3-8b 16"
wait_for "$tmp/b.out" '^publish 0$' 5 || bad "publish the same again"
send 4 "publish llama3-8b 32"
wait_for "$tmp/b.out" '^publish EEXIST$' 5 || bad "publish other block_tokens"
send 4 "find nope"
wait_for "$tmp/b.out" '^find ENOENT$' 5 || bad "find an unknown namespace"
[ $fail = 0 ] && ok "namespaces: publish is idempotent, find resolves"

# ---- several endpoints: one that does not answer is passed over --------
# nothing listens on port 1: the first endpoint refuses every request,
# and joining, ranging and watching go through the second
u0=$URL
URL="etcd://127.0.0.1:1,127.0.0.1:$cport/kvfs-test"
start c c 2 5
URL=$u0
if wait_for "$tmp/c.out" '^joined [0-9]* a,b,c$' 5; then
	ok "a member whose first etcd endpoint is dead joins through the next"
else
	bad "two endpoints, the first dead: $(cat "$tmp/c.out" "$tmp/c.err")"
fi
start d d 2 6
if wait_for "$tmp/c.out" '^change [0-9]* a,b,c,d$' 5; then
	ok "and its watch, through the same endpoint, sees a new member"
else
	bad "watch past a dead endpoint: $(tail -n 3 "$tmp/c.out" "$tmp/c.err")"
fi
send 5 quit
send 6 quit
exec 5>&- 6>&-
wait_for "$tmp/a.out" '^change [0-9]* a,b$' 5 ||
	die "c and d did not leave"

# ---- kill -9: gone after the TTL ------------------------------------------
e0=$(epoch_of "$tmp/a.out" ' a,b$')
t0=$(now_ms)
kill -KILL "$pid_b"
reap "$pid_b" 5
exec 4>&-
wait_for "$tmp/a.out" '^change [0-9]* a$' 8 || die "b never disappeared"
dt=$(($(now_ms) - t0))
e1=$(epoch_of "$tmp/a.out" '^change [0-9]* a$')
# the last keepalive was at most ttl/3 before the kill: >= 1.3 s left
if [ $dt -ge 1000 ] && [ $dt -le 6000 ] && [ "$e1" -gt "$e0" ]; then
	ok "a killed member disappears after its TTL (${dt} ms, epoch $e0 -> $e1)"
else
	bad "killed member: gone after $dt ms, epoch $e0 -> $e1"
fi

# ---- its id is free again; leave removes at once ----------------------------
start b2 b 10 4
pid_b2=$pid
wait_for "$tmp/b2.out" '^joined [0-9]* a,b$' 5 || die "b cannot join again"
wait_for "$tmp/a.out" '^change [0-9]* a,b$' 5 || die "a does not see b again"
n_before=$(grep -c '^change [0-9]* a$' "$tmp/a.out")
t0=$(now_ms)
send 4 quit
i=0
while [ $i -lt 100 ] &&
	[ "$(grep -c '^change [0-9]* a$' "$tmp/a.out")" = "$n_before" ]; do
	sleep 0.05
	i=$((i + 1))
done
dt=$(($(now_ms) - t0))
reap "$pid_b2" 3
exec 4>&-
if [ "$(grep -c '^change [0-9]* a$' "$tmp/a.out")" != "$n_before" ] &&
	[ $dt -lt 2000 ] && [ $rc = 0 ] && grep -q '^left b$' "$tmp/b2.out"; then
	ok "leave removes the node at once (${dt} ms, TTL 10 s), exit 0"
else
	bad "leave: $dt ms, rc $rc"
fi

# ---- a lease lost while stopped: registered again ---------------------------
start c c 10 5
wait_for "$tmp/c.out" ' a,c$' 5 || die "c does not see a and c"
kill -STOP "$pid_a"
wait_for "$tmp/c.out" '^change [0-9]* c$' 8 || {
	kill -CONT "$pid_a"
	die "a's lease did not expire while it was stopped"
}
kill -CONT "$pid_a"
if wait_for "$tmp/c.out" '^change [0-9]* a,c$' 8 &&
	wait_for "$tmp/a.err" 'registering again' 2 &&
	wait_for "$tmp/a.err" 'registered again' 5; then
	ok "a member whose lease expired registers again"
else
	bad "re-registration: $(tail -n 3 "$tmp/a.err")"
fi

# ---- urls and ids ----------------------------------------------------------
for u in etcd://127.0.0.1/x http://127.0.0.1:$cport/x "etcd://127.0.0.1:$cport/" \
	"etcd://127.0.0.1:$cport/a/b" etcd://127.0.0.1:0/x; do
	rc=0
	"$MEMBER" "$u" z 2 </dev/null >"$tmp/url.out" 2>"$tmp/url.err" || rc=$?
	if [ $rc != 2 ] || ! grep -q '^join failed: EINVAL$' "$tmp/url.out" ||
		! grep -q 'bad cluster url' "$tmp/url.err"; then
		bad "url $u: rc $rc, $(cat "$tmp/url.out" "$tmp/url.err")"
	fi
done
rc=0
"$MEMBER" "$URL" 'no spaces' 2 </dev/null >"$tmp/id.out" 2>"$tmp/id.err" || rc=$?
[ $rc = 2 ] && grep -q 'bad node id' "$tmp/id.err" || bad "bad id: rc $rc"
[ $fail = 0 ] && ok "bad urls and ids are refused with EINVAL and a reason"

# ---- etcd gone ----------------------------------------------------------------
etcd_stop KILL
rc=0
t0=$(now_ms)
"$MEMBER" "$URL" z 2 </dev/null >"$tmp/gone.out" 2>"$tmp/gone.err" || rc=$?
dt=$(($(now_ms) - t0))
if [ $rc = 2 ] && grep -q '^join failed: ECONNREFUSED$' "$tmp/gone.out" &&
	grep -q "cannot reach etcd at http://127.0.0.1:$cport: Connection refused" \
		"$tmp/gone.err" && [ $dt -lt 2000 ]; then
	ok "no etcd: join fails at once, saying why ($(cat "$tmp/gone.err"))"
else
	bad "no etcd: rc $rc after $dt ms: $(cat "$tmp/gone.out" "$tmp/gone.err")"
fi
wait_for "$tmp/a.err" 'keepalive failed' 5 || bad "a did not notice etcd is gone"
t0=$(now_ms)
send 3 quit
reap "$pid_a" 5
dt=$(($(now_ms) - t0))
if [ $rc = 0 ] && [ $dt -lt 3000 ]; then
	ok "leave with etcd gone returns promptly (${dt} ms)"
else
	bad "leave with etcd gone: rc $rc after $dt ms"
fi
exec 3>&- 5>&-

[ $fail = 0 ] || die "see above"
exit 0

#!/bin/sh
# kvconductor serve subscribed to vLLM-style KV event publishers
# (tests/kvev_pub.py: PUB + ROUTER replay sockets on 127.0.0.1, vLLM's
# documented format): one engine registered by --kv-events (tagged-array
# events, bytes hashes), one by POST /v1/kv-events (map events, signed
# and unsigned integer hashes); BlockStored/BlockRemoved/AllBlocksCleared
# seen in /v1/schedule's decisions, a gap filled by a replay, garbage
# counted and skipped, a publisher that restarts (reset, then resynced by
# replay), the counters in /v1/stats and /metrics; and --kv-events'
# usage errors.  SKIP (77) without the feature (libzmq, msgpack-c) or
# without python3's zmq and msgpack modules.
set -eu
T=sched_kvevents
. "${top_srcdir:-.}/tests/lib.sh"

KVC=$top_builddir/sched/kvconductor

if [ ! -x "$KVC" ]; then
	echo "sched_kvevents: $KVC not built" >&2
	exit 1
fi
"$KVC" --version | grep -q 'kv-events' ||
	skip "kvconductor built without KV events (libzmq, msgpack-c)"
# Debian's python3-zmq and python3-msgpack are the system python3's: try
# it too when another python3 comes first
PY=""
for py in "${PYTHON3:-}" python3 /usr/bin/python3; do
	if [ -n "$py" ] && "$py" -c 'import zmq, msgpack' 2>/dev/null; then
		PY=$py
		break
	fi
done
[ -n "$PY" ] ||
	skip "no python3 with zmq and msgpack (Debian: python3-zmq python3-msgpack)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sched_kvevents.XXXXXX")
pypid=""
cleanup() {
	[ -n "$pypid" ] && kill -TERM "$pypid" 2>/dev/null
	# the daemon kvev_pub.py started, should it have been killed first
	if [ -f "$tmp/kvc.pid" ]; then
		kp=$(cat "$tmp/kvc.pid")
		kill -TERM "$kp" 2>/dev/null || true
		wait_until 30 gone "$kp" || kill -KILL "$kp" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# usage errors: one line, exit 2, before anything is started
for spec in 'tcp://127.0.0.1:1' 'http://x,node=0' \
	'tcp://127.0.0.1:1,node=0,colour=red' 'tcp://127.0.0.1:1,node=300' \
	'tcp://127.0.0.1:1,node=0,block-size=0'; do
	rc=0
	timeout 20 "$KVC" serve --listen 127.0.0.1:0 --kv-events "$spec" \
		>"$tmp/u.out" 2>"$tmp/u.err" || rc=$?
	if [ $rc = 2 ] && grep -q -- '--kv-events' "$tmp/u.err"; then
		ok "--kv-events $spec: usage error"
	else
		bad "--kv-events $spec: exit $rc: $(cat "$tmp/u.err")"
	fi
done

for nets in '' '10.0.0.0/33' '10.0.0.0/8,' 'localhost' '1.2.3'; do
	rc=0
	timeout 20 "$KVC" serve --listen 127.0.0.1:0 --kv-events-allow \
		"$nets" >"$tmp/u.out" 2>"$tmp/u.err" || rc=$?
	if [ $rc = 2 ] && grep -q -- '--kv-events-allow' "$tmp/u.err"; then
		ok "--kv-events-allow '$nets': usage error"
	else
		bad "--kv-events-allow '$nets': exit $rc: $(cat "$tmp/u.err")"
	fi
done

timeout 120 "$PY" "${top_srcdir:-.}/tests/kvev_pub.py" "$KVC" "$tmp" &
pypid=$!
rc=0
wait "$pypid" || rc=$?
pypid=""
[ $rc = 0 ] || bad "the KV events scenario: $rc failures (exit $rc)"
exit "$fail"

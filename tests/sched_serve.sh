#!/bin/sh
# kvconductor serve, on loopback with ports the kernel picks: every
# endpoint through python3's urllib, block events fed over the events port
# (frames built here, CRC-32C included) and seen in the next decision, a
# bad frame closing its stream, a stream that ends dropping its node's
# blocks (but not those of the node's newer stream), the decision's
# fields naming instance indexes and node ids apart, a config written by
# `kvconductor fit` keeping early rejection on, 400/404/405/409/413/429/
# 503, and SIGTERM stopping the daemon with exit 0.  Every daemon runs
# under timeout and is killed by the trap whatever happens.
set -eu
T=sched_serve
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/conductor_lib.sh"

KVC=$top_builddir/sched/kvconductor
PY=${PYTHON3:-python3}

if [ ! -x "$KVC" ]; then
	echo "sched_serve: $KVC not built" >&2
	exit 1
fi
command -v "$PY" >/dev/null 2>&1 || skip "no python3"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sched_serve.XXXXXX")
pids=""
cleanup() {
	# TERM first: timeout(1) passes it on to its kvconductor, which a
	# SIGKILLed timeout would leave running
	for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
	for p in $pids; do wait_until 30 gone "$p" || kill -KILL "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# start NAME ARGS...: a daemon under timeout 30 in the background
# (conductor_lib.sh); its pid in $pid, its "listen"/"events" lines in
# $tmp/NAME.out
KVC_TIMEOUT=30
start() {
	conductor_start pids "$@" || {
		echo "FAIL $1 did not start: $(cat "$tmp/$1.err")" >&2
		exit 1
	}
	pid=$CPID
}
port() { conductor_port "$@"; }

# stop PID NAME: SIGTERM, then its exit status must be 0 (timeout 30
# bounds the wait)
stop() {
	kill -TERM "$1"
	rc=0
	wait "$1" || rc=$?
	if [ $rc = 0 ]; then
		ok "$2: SIGTERM, exit 0"
	else
		bad "$2: SIGTERM, exit $rc"
	fi
}

cat >"$tmp/t.py" <<'EOF'
import json, socket, struct, sys, time, urllib.request, urllib.error

fails = 0
def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what)
    fails += 0 if cond else 1

def http(port, method, path, body=None, raw=None):
    data = raw if raw is not None else (
        json.dumps(body).encode() if body is not None else None)
    r = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path),
                               data=data, method=method)
    try:
        with urllib.request.urlopen(r, timeout=5) as f:
            return f.status, f.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()

def js(port, method, path, body=None, raw=None):
    st, text = http(port, method, path, body, raw)
    try:
        return st, json.loads(text)
    except ValueError:
        return st, None

def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF

def frame(node, seq, ns, recs):
    ns = ns.encode()
    f = b"KVEV" + struct.pack("<BBHQIB3x", 1, 0, node, seq, len(recs),
                              len(ns)) + ns
    for op, h in recs:
        f += bytes([op]) + h
    return f + struct.pack("<I", crc32c(f))

def wait_for(port, cond):
    for _ in range(50):
        st, s = js(port, "GET", "/v1/stats")
        if st == 200 and cond(s):
            return s
        time.sleep(0.1)
    return s

def main_daemon(port, evport):
    block = 512
    hashes = [bytes([i + 1]) * 32 for i in range(4)]
    hexes = [h.hex() for h in hashes]
    req = {"namespace": "m", "hashes": hexes,
           "input_length": 4 * block + 100, "output_length": 16}

    st, d = js(port, "POST", "/v1/schedule", {"namespace": "m",
               "block_keys": [1, 2], "input_length": 2000,
               "output_length": 8})
    check(st == 200 and d["id"] > 0 and "est_ttft_s" in d and
          "est_tbt_s" in d, "schedule (block_keys) accepted: %s" % d)
    first = d["id"]

    # node 1 (prefill instance 1) announces the four blocks
    check(crc32c(b"123456789") == 0xE3069283, "crc32c check value")
    s = socket.create_connection(("127.0.0.1", evport), timeout=5)
    s.sendall(frame(1, 0, "m", [(3, bytes(32))]) +
              frame(1, 1, "m", [(1, h) for h in hashes]))
    st_ = wait_for(port, lambda x: x["blocks_indexed"] >= 4)
    check(st_["blocks_indexed"] == 4 and st_["events"]["records"] == 5,
          "events indexed: %s" % st_["events"])
    st, d = js(port, "POST", "/v1/schedule", req)
    check(st == 200 and
          ((d["prefill_instance"] == 1 and d["cached_blocks"] == 4 and
            d["src_node_id"] is None) or
           (d["transfer_blocks"] == 4 and d["src_node_id"] == 1)),
          "schedule finds the announced blocks: %s" % d)
    check(set(d) == {"id", "prefill_instance", "decode_instance",
                     "cached_blocks", "transfer_blocks", "reuse_blocks",
                     "src_node_id", "est_queue_s", "est_ttft_s",
                     "est_tbt_s"}, "decision fields: %s" % sorted(d))

    # a bad frame (CRC broken) ends its stream: the daemon closes it
    b = socket.create_connection(("127.0.0.1", evport), timeout=5)
    bad = bytearray(frame(0, 0, "m", [(1, hashes[0])]))
    bad[-1] ^= 0xFF
    b.sendall(bytes(bad))
    try:
        closed = b.recv(1) == b""
    except (ConnectionResetError, socket.timeout):
        closed = True
    b.close()
    st_ = wait_for(port, lambda x: x["events"]["errors"] >= 1)
    check(closed and st_["events"]["errors"] == 1 and
          st_["blocks_indexed"] == 4,
          "a bad first frame closes its stream, forgetting nothing")

    st, c = js(port, "POST", "/v1/complete", {"id": d["id"],
                                              "phase": "prefill"})
    check(st == 200, "complete prefill")
    st, c = js(port, "POST", "/v1/complete", {"id": d["id"],
                                              "phase": "prefill"})
    check(st == 409, "prefill reported twice: 409")
    st, c = js(port, "POST", "/v1/complete", {"id": d["id"],
                                              "phase": "decode"})
    check(st == 200, "complete decode")
    st, c = js(port, "POST", "/v1/complete", {"id": d["id"]})
    check(st == 404, "complete of an unknown id: 404")
    st, c = js(port, "POST", "/v1/complete", {"id": first})
    check(st == 200, "complete (cancel) in prefill")

    st, s_ = js(port, "GET", "/v1/stats")
    check(st == 200 and s_["requests"] == 2 and s_["accepted"] == 2 and
          s_["rejected"] == {"ttft": 0, "tbt": 0} and s_["live"] == 0 and
          len(s_["prefill"]) == 2 and len(s_["decode"]) == 2 and
          "queue_s" in s_["prefill"][0], "stats: %s" % s_)
    st, m = http(port, "GET", "/metrics")
    check(st == 200 and "# TYPE kvconductor_requests_total counter" in m and
          "kvconductor_requests_total 2\n" in m and
          'kvconductor_rejected_total{reason="ttft"} 0' in m and
          "kvconductor_blocks_indexed 4\n" in m and
          "# HELP kvconductor_decode_batch" in m, "metrics")

    for raw, what in [(b"{bad", "bad JSON"), (b"[1]", "not an object"),
                      (b'{"hashes":[]} x', "trailing bytes"),
                      (b'{"block_keys":[18446744073709551616],'
                       b'"input_length":9999,"output_length":1}',
                       "a key past 64 bits"),
                      (b'{"namespace":"a\\u0000b","block_keys":[1],'
                       b'"input_length":9999,"output_length":1}',
                       "a namespace with a NUL"),
                      (b'{"namespace":"a\xff\xfeb","block_keys":[1],'
                       b'"input_length":9999,"output_length":1}',
                       "a namespace of invalid UTF-8"),
                      (b'{"namespace":"\xed\xa0\x80","block_keys":[1],'
                       b'"input_length":9999,"output_length":1}',
                       "a namespace of a UTF-8 surrogate")]:
        st, e = js(port, "POST", "/v1/schedule", raw=raw)
        check(st == 400 and "error" in e, "400 on %s" % what)
    for body, what in [
        ({"hashes": ["xyz"], "input_length": 600, "output_length": 1},
         "a bad hash"),
        ({"hashes": hexes, "input_length": 10, "output_length": 1},
         "input_length below the blocks"),
        ({"hashes": hexes, "block_keys": [1], "input_length": 9999,
          "output_length": 1}, "hashes and block_keys"),
        ({"block_keys": [-1], "input_length": 9999, "output_length": 1},
         "a negative key"),
        ({"block_keys": [], "input_length": 100, "output_length": 0},
         "output_length 0"),
        ({"block_keys": [], "input_length": "1", "output_length": 1},
         "a string length"),
        ({"namespace": ".x", "block_keys": [], "input_length": 1,
          "output_length": 1}, "a bad namespace")]:
        st, e = js(port, "POST", "/v1/schedule", body)
        check(st == 400 and "error" in e, "400 on %s" % what)
    st, e = js(port, "POST", "/v1/complete", {"id": 1, "phase": "x"})
    check(st == 400, "400 on a bad phase")
    st, e = js(port, "POST", "/v1/schedule", raw=b" " * 5000)
    check(st == 413 and "error" in e, "413 on a body over --max-body")
    st, e = js(port, "POST", "/v1/schedule",
               raw=iter([b" " * 3000, b" " * 3000]))
    check(st == 413, "413 on a chunked body over --max-body")
    st, e = js(port, "GET", "/v1/nothing")
    check(st == 404 and "error" in e, "404 on an unknown path")
    st, e = js(port, "GET", "/v1/schedule")
    check(st == 405 and "error" in e, "405 on GET /v1/schedule")
    st, e = js(port, "POST", "/metrics", {})
    check(st == 405, "405 on POST /metrics")
    st, e = js(port, "POST", "/v1/instances",
               {"prefill": [{"node": 0}], "decode": [{"node": 1}]})
    check(st == 409, "instances set at start: POST /v1/instances 409")

    # node 1 reconnects before its old stream s is seen to end: the new
    # stream s2 resyncs (RESET, two blocks); s ending then must not wipe
    # them, and s2 ending drops them
    s2 = socket.create_connection(("127.0.0.1", evport), timeout=5)
    s2.sendall(frame(1, 0, "m", [(3, bytes(32))] +
                     [(1, h) for h in hashes[:2]]))
    wait_for(port, lambda x: x["events"]["records"] >= 8)
    s.close()
    # a frame on a later connection, once applied, means the event loop
    # has seen s's end, which reached it first
    s3 = socket.create_connection(("127.0.0.1", evport), timeout=5)
    s3.sendall(frame(0, 0, "m", [(3, bytes(32))]))
    st_ = wait_for(port, lambda x: x["events"]["records"] >= 9)
    check(st_["events"]["records"] == 9 and st_["blocks_indexed"] == 2,
          "an old stream ending keeps the node's new stream's blocks: %s"
          % st_["events"])
    s2.close()
    st_ = wait_for(port, lambda x: x["blocks_indexed"] == 0)
    check(st_["blocks_indexed"] == 0 and st_["events"]["errors"] == 1,
          "a stream the node closes: its node's blocks dropped")
    s3.close()

    # a stream that breaks a rule after a good start (seq out of order):
    # closed, and its node's blocks forgotten until it resyncs
    r = socket.create_connection(("127.0.0.1", evport), timeout=5)
    r.sendall(frame(1, 0, "m", [(3, bytes(32))] +
                    [(1, h) for h in hashes]) +
              frame(1, 0, "m", [(1, hashes[0])]))
    try:
        closed = r.recv(1) == b""
    except (ConnectionResetError, socket.timeout):
        closed = True
    r.close()
    st_ = wait_for(port, lambda x: x["events"]["errors"] >= 2 and
                   x["blocks_indexed"] == 0)
    check(closed and st_["events"]["errors"] == 2 and
          st_["blocks_indexed"] == 0,
          "a stream out of order: closed, its node's blocks dropped")

def late_daemon(port, evport):
    body = {"block_keys": [], "input_length": 100000, "output_length": 4}
    st, e = js(port, "POST", "/v1/schedule", body)
    check(st == 503, "schedule before instances: 503")
    # no instances, no index: an event stream is closed, applying nothing
    r = socket.create_connection(("127.0.0.1", evport), timeout=5)
    r.sendall(frame(0, 0, "m", [(3, bytes(32))]))
    try:
        closed = r.recv(1) == b""
    except (ConnectionResetError, socket.timeout):
        closed = True
    r.close()
    check(closed, "events before instances: stream closed")
    st, e = js(port, "POST", "/v1/instances", {"prefill": [{"node": 5}]})
    check(st == 400, "instances without decode: 400")
    st, e = js(port, "POST", "/v1/instances",
               {"prefill": [{"node": 0}, {"node": 1}],
                "decode": [{"node": 2}]})
    check(st == 200 and e == {"prefill": 2, "decode": 1},
          "POST /v1/instances")
    st, e = js(port, "POST", "/v1/instances",
               {"prefill": [{"node": 0}], "decode": [{"node": 2}]})
    check(st == 409, "POST /v1/instances again: 409")
    st, e = js(port, "POST", "/v1/schedule", body)
    check(st == 429 and e.get("reason") == "ttft" and "error" in e,
          "429 when the fitted config's TTFT SLO cannot be met: %s" % e)
    st, s_ = js(port, "GET", "/v1/stats")
    check(s_["rejected"]["ttft"] == 1 and s_["accepted"] == 0 and
          s_["prefill"][1]["node"] == 1, "stats count the rejection")

def ids_daemon(port, evport):
    # instance indexes and node ids apart: prefill instances 0 and 1 on
    # nodes 7 and 4, decode instance 0 on node 9
    st, e = js(port, "POST", "/v1/instances",
               {"prefill": [{"node": 7}, {"node": 4}],
                "decode": [{"node": 9}]})
    check(st == 200, "POST /v1/instances on nodes 7, 4 and 9")
    hashes = [bytes([i + 0x40]) * 32 for i in range(4)]
    s = socket.create_connection(("127.0.0.1", evport), timeout=5)
    s.sendall(frame(4, 0, "m", [(3, bytes(32))] + [(1, h) for h in hashes]))
    wait_for(port, lambda x: x["blocks_indexed"] >= 4)
    # a long prompt: its prefill keeps instance 1 busy for seconds
    body = {"hashes": [h.hex() for h in hashes],
            "input_length": 4 * 512 + 60000, "output_length": 4}
    st, d = js(port, "POST", "/v1/schedule", body)
    check(st == 200 and d["prefill_instance"] == 1 and
          d["decode_instance"] == 0 and d["cached_blocks"] == 4 and
          d["src_node_id"] is None,
          "node 4's blocks: prefill_instance 1, decode_instance 0: %s" % d)
    # the same prompt again, instance 1 now busy: instance 0 fetches the
    # prefix from node 4 (milliseconds) rather than wait there
    st, d = js(port, "POST", "/v1/schedule", body)
    check(st == 200 and d["prefill_instance"] == 0 and
          d["transfer_blocks"] == 4 and d["src_node_id"] == 4,
          "a fetch names its source by node id: %s" % d)
    s.close()

if sys.argv[1] == "main":
    main_daemon(int(sys.argv[2]), int(sys.argv[3]))
elif sys.argv[1] == "ids":
    ids_daemon(int(sys.argv[2]), int(sys.argv[3]))
else:
    late_daemon(int(sys.argv[2]), int(sys.argv[3]))
sys.exit(1 if fails else 0)
EOF

start main --events 127.0.0.1:0 --prefill 2 --decode 2 --max-body 4096
main_pid=$pid
"$PY" "$tmp/t.py" main "$(port main listen)" "$(port main events)" ||
	fail=1
stop "$main_pid" main

start ids --events 127.0.0.1:0
ids_pid=$pid
"$PY" "$tmp/t.py" ids "$(port ids listen)" "$(port ids events)" || fail=1
stop "$ids_pid" ids

# the documented flow: fit, then serve --config.  The fitted config must
# keep the daemon's early rejection (it once wrote "reject = off"), so
# with a TTFT SLO no prefill meets the late daemon answers 429.
printf 'tokens,cached,seconds\n1024,0,0.1\n2048,0,0.3\n4096,512,0.9\n' \
	>"$tmp/p.csv"
echo 'slo_ttft = 0.000001' >"$tmp/base.conf"
if ! "$KVC" fit "$tmp/p.csv" --config "$tmp/base.conf" \
	--output "$tmp/fit.conf" >/dev/null 2>"$tmp/fit.err"; then
	bad "fit: $(cat "$tmp/fit.err")"
fi
start late --events 127.0.0.1:0 --config "$tmp/fit.conf"
late_pid=$pid
"$PY" "$tmp/t.py" late "$(port late listen)" "$(port late events)" || fail=1
stop "$late_pid" late

exit "$fail"

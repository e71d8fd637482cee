#!/bin/sh
# conductor.sh - kvconductor serve's defences, on loopback with ports
# the kernel picks:
#   - --token-file: 401 with WWW-Authenticate without the token or with
#     a wrong one (before anything is scheduled), 200 with it, /metrics
#     open; a token file others may read, an empty one, a directory and a
#     missing file refused at start;
#   - 300 clients dribbling header lines do not lock a normal client out,
#     and a dribbler is cut after --http-timeout; --http-per-ip refuses
#     the connection too many from one address, not others;
#   - 64 idle sockets on the event port do not keep a real stream out,
#     and are closed after --events-hello-timeout; a stream whose first
#     frame is not a RESET is closed and applies nothing; a started
#     stream is closed after --events-idle-timeout of silence unless it
#     sends keepalives (empty frames);
#   - a request never completed expires after --request-ttl, counted in
#     /v1/stats, its id then 404.
# Every daemon is started directly (no wrapper) and killed by the trap,
# TERM then KILL, whatever happens; every client loop is bounded.
set -eu
T=security_conductor
. "${top_srcdir:-.}/tests/lib.sh"
. "$top_srcdir/tests/conductor_lib.sh"

KVC=${KVC:-$top_builddir/sched/kvconductor}
PY=${PYTHON3:-python3}

if [ ! -x "$KVC" ]; then
	echo "$T: $KVC not built" >&2
	exit 1
fi
command -v "$PY" >/dev/null 2>&1 || skip "no python3"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/$T.XXXXXX")
pids=""
cleanup() {
	for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
	for p in $pids; do
		wait_until 50 gone "$p" || kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# start NAME ARGS...: a daemon in the background (conductor_lib.sh), its
# pid in $pid, its "listen"/"events" lines in $tmp/NAME.out
start() {
	conductor_start pids "$@" || {
		bad "$1 did not start: $(cat "$tmp/$1.err")"
		exit 1
	}
	pid=$CPID
}
port() { conductor_port "$@"; }

# refused PATH WHY: serve --token-file PATH exits 1 at once, naming WHY
refused() {
	rc=0
	"$KVC" serve --listen 127.0.0.1:0 --token-file "$1" \
		>"$tmp/refused.out" 2>"$tmp/refused.err" &
	rpid=$!
	pids="$pids $rpid"
	wait_until 50 gone "$rpid" || kill -KILL "$rpid" 2>/dev/null || true
	wait "$rpid" || rc=$?
	if [ $rc = 1 ] && grep -q -- "$2" "$tmp/refused.err" &&
		! grep -q '^listen' "$tmp/refused.out"; then
		ok "token file refused: $2"
	else
		bad "token file $1: want exit 1 and '$2', got exit $rc: $(cat "$tmp/refused.err")"
	fi
}

printf 'sekrit-token\n' >"$tmp/token"
chmod 600 "$tmp/token"
printf 'sekrit-token\n' >"$tmp/open-token"
chmod 644 "$tmp/open-token"
: >"$tmp/empty-token"
chmod 600 "$tmp/empty-token"
mkdir "$tmp/dir-token"
chmod 700 "$tmp/dir-token"
refused "$tmp/open-token" "mode 0644"
refused "$tmp/empty-token" "empty token"
refused "$tmp/dir-token" "not a regular file"
refused "$tmp/no-such-token" "No such file"

cat >"$tmp/t.py" <<'EOF'
import json, socket, struct, sys, threading, time
import urllib.request, urllib.error

fails = 0
def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    fails += 0 if cond else 1

TOKEN = "sekrit-token"

def http(port, method, path, body=None, token=TOKEN, timeout=5):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path),
                               data=data, method=method)
    if token is not None:
        r.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(r, timeout=timeout) as f:
            return f.status, dict(f.headers), f.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()

def js(port, method, path, body=None, token=TOKEN):
    st, _, text = http(port, method, path, body, token)
    try:
        return st, json.loads(text)
    except ValueError:
        return st, None

def stats(port):
    return js(port, "GET", "/v1/stats")[1]

def wait_for(port, cond, tenths=50):
    s = None
    for _ in range(tenths):
        s = stats(port)
        if s and cond(s):
            return s
        time.sleep(0.1)
    return s

def closed_within(s, secs):
    """the peer closed s (EOF or reset) within secs"""
    s.settimeout(secs)
    try:
        while s.recv(4096):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False

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

RESET = (3, bytes(32))

# ---- the bearer token ---------------------------------------------------

def t_token(port, evport):
    for tok, what in ((None, "no token"), ("wrong", "a wrong token"),
                      ("sekrit-tokem", "a wrong token of the same length"),
                      ("", "an empty token")):
        st, hdr, _ = http(port, "GET", "/v1/stats", token=tok)
        www = hdr.get("WWW-Authenticate", "")
        check(st == 401 and www.startswith("Bearer"),
              "GET /v1/stats with %s: %d, WWW-Authenticate '%s'" %
              (what, st, www))
    body = {"block_keys": [1], "input_length": 2000, "output_length": 4}
    st, _, _ = http(port, "POST", "/v1/schedule", body, token=None)
    check(st == 401, "POST /v1/schedule without a token: %d" % st)
    st, _, _ = http(port, "POST", "/v1/instances",
                    {"prefill": [{"node": 0}], "decode": [{"node": 1}]},
                    token="wrong")
    check(st == 401, "POST /v1/instances with a wrong token: %d" % st)
    st, s = js(port, "GET", "/v1/stats")
    check(st == 200 and s["requests"] == 0 and
          s["http"]["unauthorized"] == 6,
          "with the token: 200, nothing scheduled, 6 refusals counted: "
          "%s" % (s and s["http"]))
    st, _, text = http(port, "GET", "/metrics", token=None)
    check(st == 200 and "kvconductor_http_unauthorized_total 6" in text,
          "GET /metrics stays open: %d" % st)
    # the scheme is case-insensitive (RFC 6750)
    r = urllib.request.Request("http://127.0.0.1:%d/v1/stats" % port)
    r.add_header("Authorization", "bearer " + TOKEN)
    with urllib.request.urlopen(r, timeout=5) as f:
        check(f.status == 200, "'bearer' scheme in lower case: 200")

# ---- request expiry (--request-ttl 1) ------------------------------------

def t_expire(port, evport):
    st, d = js(port, "POST", "/v1/schedule",
               {"block_keys": [11, 12], "input_length": 2000,
                "output_length": 8})
    check(st == 200 and d["id"] > 0, "schedule: %d %s" % (st, d))
    s = stats(port)
    check(s["live"] == 1 and s["expired"] == 0,
          "live 1 before the ttl: live %d expired %d" %
          (s["live"], s["expired"]))
    s = wait_for(port, lambda x: x["expired"] >= 1, 60)
    check(s["expired"] == 1 and s["live"] == 0 and
          s["prefill"][0]["queue_s"] == 0,
          "never completed: expired, queue freed: live %d expired %d "
          "queue %s" % (s["live"], s["expired"], s["prefill"][0]["queue_s"]))
    st, _ = js(port, "POST", "/v1/complete", {"id": d["id"]})
    check(st == 404, "its id then 404: %d" % st)

# ---- slow HTTP clients ----------------------------------------------------

def dribble(socks, ready, stop, port, src):
    """connect len(socks) clients that send a header line every 0.5 s"""
    for i in range(len(socks)):
        if stop.is_set():
            break
        try:
            s = socket.socket()
            s.bind((src, 0))
            s.settimeout(5)
            s.connect(("127.0.0.1", port))
            s.send(b"GET /v1/stats HTTP/1.1\r\nHost: x\r\n")
            socks[i] = s
        except OSError:
            pass
    ready.set()
    while not stop.wait(0.5):
        for i, s in enumerate(socks):
            if s is None:
                continue
            try:
                s.send(b"X-Slow: %d\r\n" % i)
            except OSError:
                socks[i] = None

def t_slow(port, evport):
    socks = [None] * 300
    ready, stop = threading.Event(), threading.Event()
    th = threading.Thread(target=dribble, args=(socks, ready, stop, port,
                                                "127.0.0.1"))
    th.start()
    try:
        ready.wait(60)  # all 300 connected, or refused
        time.sleep(0.5)
        st, took = 0, time.time()
        for _ in range(10):
            try:
                st = http(port, "GET", "/v1/stats", timeout=2)[0]
                if st == 200:
                    break
            except OSError:
                time.sleep(0.2)
        took = time.time() - took
        check(ready.is_set() and st == 200 and took < 3,
              "300 dribbling clients: a normal client served in %.1f s" %
              took)
    finally:
        stop.set()
        th.join()
    for s in socks:
        if s:
            s.close()
    s = stats(port)
    check(s["http"]["evicted"] > 0,
          "connections past --http-max-conns evicted: %s" % s["http"])
    # one dribbler alone, under every cap: cut by --http-timeout 2
    c = socket.create_connection(("127.0.0.1", port), timeout=5)
    c.send(b"GET /v1/stats HTTP/1.1\r\n")
    t0, cut = time.time(), False
    while time.time() - t0 < 6:
        time.sleep(0.5)
        try:
            c.send(b"X-Slow: 1\r\n")
        except OSError:
            cut = True
            break
        c.settimeout(0.01)
        try:
            if c.recv(4096) == b"":
                cut = True
                break
        except socket.timeout:
            pass
        except OSError:
            cut = True
            break
    c.close()
    took = time.time() - t0
    check(cut and took < 4,
          "a client dribbling a header line every 0.5 s is cut in %.1f s"
          % took)
    s = stats(port)
    check(s["http"]["timeouts"] >= 1,
          "cut by the request deadline: %s" % s["http"])

def t_per_ip(port, evport):
    try:
        probe = socket.socket()
        probe.bind(("127.0.0.2", 0))
        probe.close()
    except OSError:
        print("skip per-ip: cannot bind 127.0.0.2")
        return
    socks = []
    for _ in range(4):
        s = socket.socket()
        s.bind(("127.0.0.2", 0))
        s.connect(("127.0.0.1", port))
        socks.append(s)
    fifth = socket.socket()
    fifth.bind(("127.0.0.2", 0))
    fifth.connect(("127.0.0.1", port))
    check(closed_within(fifth, 2),
          "--http-per-ip 4: a fifth connection from 127.0.0.2 refused")
    st = http(port, "GET", "/v1/stats")[0]
    check(st == 200, "127.0.0.1 still served: %d" % st)
    for s in socks + [fifth]:
        s.close()

# ---- event streams --------------------------------------------------------

def t_events(port, evport):
    h = [bytes([0x40 + i]) * 32 for i in range(2)]
    # every slot taken by sockets that send nothing
    idle = [socket.create_connection(("127.0.0.1", evport), timeout=5)
            for _ in range(64)]
    real = socket.create_connection(("127.0.0.1", evport), timeout=5)
    real.sendall(frame(1, 0, "m", [RESET] + [(1, x) for x in h]))
    # from now on it keeps alive with empty frames, as kvfsd does
    stop = threading.Event()
    def keepalive():
        seq = 1
        while not stop.wait(0.5):
            real.sendall(frame(1, seq, "-", []))
            seq += 1
    th = threading.Thread(target=keepalive)
    th.start()
    t0 = time.time()
    s = wait_for(port, lambda x: x["blocks_indexed"] >= 2, 30)
    check(s["blocks_indexed"] == 2,
          "64 idle sockets: a real stream still indexed: %s" % s["events"])
    check(all(closed_within(i, 3) for i in idle[:8]),
          "idle sockets closed (evicted, or no RESET in time)")
    for i in idle:
        i.close()
    s = stats(port)
    check(s["events"]["evicted"] >= 1 and s["events"]["timeouts"] >= 1,
          "evictions and hello timeouts counted: %s" % s["events"])

    # a stream that claims blocks without its RESET
    bad = socket.create_connection(("127.0.0.1", evport), timeout=5)
    bad.sendall(frame(0, 0, "m", [(1, bytes([0x50]) * 32)]))
    check(closed_within(bad, 3), "a first frame without a RESET: closed")
    bad.close()
    s = stats(port)
    check(s["events"]["no_reset"] == 1 and s["blocks_indexed"] == 2,
          "counted, nothing applied: %s, %d blocks" %
          (s["events"], s["blocks_indexed"]))

    # the real stream, kept alive past --events-idle-timeout 2
    while time.time() - t0 < 4:
        time.sleep(0.2)
    stop.set()
    th.join()
    s = stats(port)
    check(s["blocks_indexed"] == 2 and s["events"]["frames"] >= 8,
          "keepalives hold a stream for 4 s: %s" % s["events"])
    # and silence closes it, forgetting its blocks
    check(closed_within(real, 5), "a silent stream closed")
    real.close()
    s = wait_for(port, lambda x: x["blocks_indexed"] == 0, 30)
    check(s["blocks_indexed"] == 0, "its blocks forgotten")

tests = {"token": t_token, "expire": t_expire, "slow": t_slow,
         "per-ip": t_per_ip, "events": t_events}
port, evport = int(sys.argv[2]), int(sys.argv[3] or 0)
for name in sys.argv[1].split(","):
    tests[name](port, evport)
sys.exit(1 if fails else 0)
EOF

start main --events 127.0.0.1:0 --prefill 1 --decode 1 \
	--token-file "$tmp/token" --request-ttl 1 \
	--http-timeout 2 --http-max-conns 64 --http-per-ip 1000 \
	--events-hello-timeout 1 --events-idle-timeout 2
"$PY" "$tmp/t.py" token,expire,slow,events "$(port main listen)" \
	"$(port main events)" || fail=1

start perip --token-file "$tmp/token" --http-per-ip 4
"$PY" "$tmp/t.py" per-ip "$(port perip listen)" "" || fail=1

if grep -q 'warning' "$tmp/main.err"; then
	bad "a loopback listener warned: $(cat "$tmp/main.err")"
else
	ok "no warning on a loopback listener with a token"
fi

exit "$fail"

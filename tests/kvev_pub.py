#!/usr/bin/env python3
"""kvev_pub.py - a vLLM-style KV event publisher, and the scenario that
tests/sched_kvevents.sh runs through a real `kvconductor serve --kv-events`.

The publisher follows vLLM's documented format (its KV events docs and the
kv_events_subscriber example; kvconductor(8) KV EVENTS): a PUB socket sends
[topic, seq as 8 bytes big-endian, msgpack batch [ts, [events], rank]],
and a ROUTER "replay" socket answers a request [id, "", start (8 bytes)]
with [id, "", seq, payload] (or [id, "", topic, seq, payload], the newer
form) for every batch kept from start on, then the end marker
[id, "", ("",) seq -1, ""].  Events are tagged arrays or maps, block hashes
bytes or 64-bit integers, as the scenario chooses per engine.

The PUB socket is an XPUB here: the same wire protocol to a SUB, and it
tells when the conductor's subscription arrived, so nothing published
before is lost to ZMQ's slow-joiner drop.

Usage: kvev_pub.py KVCONDUCTOR TMPDIR  (prints ok/FAIL lines; exit status
is the number of failures, capped at 100).  Standard library, python3-zmq
and python3-msgpack only.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import msgpack
import zmq

END_SEQ = (2**64 - 1).to_bytes(8, "big")
fails = 0


def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    fails += 0 if cond else 1


def until(cond, tenths=150):
    """cond() within tenths tenths of a second (bounded polling)"""
    for _ in range(tenths):
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    return cond()


# ---- the publisher ----------------------------------------------------------

class Publisher:
    def __init__(self, ctx, topic=b"", encoding="array", hashes="bytes",
                 replay_topic=False, pub_port=0, rep_port=0):
        self.topic = topic
        self.encoding = encoding
        self.hashes = hashes
        self.replay_topic = replay_topic
        self.seq = 0
        self.kept = []  # (seq, payload): vLLM's replay buffer
        self.lock = threading.Lock()
        self.pub = ctx.socket(zmq.XPUB)
        self.pub.setsockopt(zmq.LINGER, 0)
        self.rep = ctx.socket(zmq.ROUTER)
        self.rep.setsockopt(zmq.LINGER, 0)
        self.pub_port = self._bind(self.pub, pub_port)
        self.rep_port = self._bind(self.rep, rep_port)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._replay_loop, daemon=True)
        self.thread.start()

    @staticmethod
    def _bind(sock, port):
        if port:
            # a restarted publisher takes its old port back (bounded retry)
            for _ in range(50):
                try:
                    sock.bind("tcp://127.0.0.1:%d" % port)
                    return port
                except zmq.ZMQError:
                    time.sleep(0.1)
            raise RuntimeError("cannot bind port %d again" % port)
        return sock.bind_to_random_port("tcp://127.0.0.1")

    def wait_subscribed(self, timeout_s=15):
        """the subscriber's subscription message reached the XPUB"""
        if self.pub.poll(int(timeout_s * 1000)):
            return self.pub.recv()[:1] == b"\x01"
        return False

    def stored(self, hashes, block_size=16):
        tokens = list(range(block_size * len(hashes)))
        if self.encoding == "array":
            return ["BlockStored", hashes, None, tokens, block_size, None,
                    "GPU"]
        return {"type": "BlockStored", "block_hashes": hashes,
                "parent_block_hash": None, "token_ids": tokens,
                "block_size": block_size, "lora_id": None, "medium": "GPU"}

    def removed(self, hashes):
        if self.encoding == "array":
            return ["BlockRemoved", hashes, "GPU"]
        return {"type": "BlockRemoved", "block_hashes": hashes,
                "medium": "GPU"}

    def cleared(self):
        if self.encoding == "array":
            return ["AllBlocksCleared"]
        return {"type": "AllBlocksCleared"}

    def publish(self, events, live=True, payload=None, seq_frame=None):
        """one batch; live False: kept for replay only (a lost message)"""
        if payload is None:
            payload = msgpack.packb([time.time(), events, 0],
                                    use_bin_type=True)
        with self.lock:
            seq = self.seq
            self.seq += 1
            self.kept.append((seq, payload))
        if live:
            self.pub.send_multipart(
                [self.topic, seq_frame or seq.to_bytes(8, "big"), payload])
        return seq

    def _replay_loop(self):
        while not self.stop.is_set():
            if not self.rep.poll(100):
                continue
            frames = self.rep.recv_multipart()
            if len(frames) != 3 or frames[1] != b"" or len(frames[2]) != 8:
                continue
            ident, start = frames[0], int.from_bytes(frames[2], "big")
            with self.lock:
                kept = [k for k in self.kept if k[0] >= start]
            mid = [self.topic] if self.replay_topic else []
            for seq, payload in kept:
                self.rep.send_multipart(
                    [ident, b""] + mid + [seq.to_bytes(8, "big"), payload])
            self.rep.send_multipart(
                [ident, b""] + ([b""] if self.replay_topic else []) +
                [END_SEQ, b""])

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.pub.close(0)
        self.rep.close(0)


# ---- the conductor's HTTP API ----------------------------------------------

def http(port, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path),
                               data=data, method=method)
    try:
        with urllib.request.urlopen(r, timeout=10) as f:
            return f.status, f.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def js(port, method, path, body=None):
    st, text = http(port, method, path, body)
    try:
        return st, json.loads(text)
    except ValueError:
        return st, text


def engine(port, inst):
    st, s = js(port, "GET", "/v1/stats")
    if st != 200:
        return {}
    for e in s.get("kv_events", {}).get("engine", []):
        if e["instance"] == inst:
            return e
    return {}


def wait_blocks(port, inst, n):
    e = until(lambda: engine(port, inst).get("blocks") == n and
              engine(port, inst))
    return e or engine(port, inst)


BLOCK = 512  # the conductor's default block_tokens


def schedule(port, body_keys):
    """a decision for these keys; the request is completed at once so
    queues stay empty for the next one"""
    body = dict(body_keys)
    n = len(body.get("hashes", body.get("block_keys", [])))
    body.update({"input_length": max(n, 1) * BLOCK + 10,
                 "output_length": 4})
    st, d = js(port, "POST", "/v1/schedule", body)
    if st == 200:
        js(port, "POST", "/v1/complete", {"id": d["id"], "phase": "prefill"})
        js(port, "POST", "/v1/complete", {"id": d["id"]})
    return st, d


def found(d, inst, node, n):
    """the decision reuses n blocks held on node (instance inst's)"""
    return (d.get("reuse_blocks") == n and
            ((d.get("prefill_instance") == inst and
              d.get("cached_blocks") == n) or d.get("src_node_id") == node))


def ukey(h):
    return h % 2**64  # a signed hash's key: its two's complement


def bkey(h):
    """a bytes hash's key: what vLLM publishes for it as an integer with
    VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"""
    return int.from_bytes(h, "big") & (2**64 - 1)


# ---- the scenario -----------------------------------------------------------

def scenario(kvc, tmp):
    ctx = zmq.Context()
    # engine A: tagged arrays, 32-byte hashes, replay in the older form
    a = Publisher(ctx, encoding="array", hashes="bytes")
    # engine B: maps, integer hashes (signed ones too), topic "kv-events"
    b = Publisher(ctx, topic=b"kv-events", encoding="map", hashes="int")
    spec = ("tcp://127.0.0.1:%d,node=0,replay=tcp://127.0.0.1:%d,model=m,"
            "block-size=16,instance=engA" % (a.pub_port, a.rep_port))
    out = open(os.path.join(tmp, "kvc.out"), "w")
    err = open(os.path.join(tmp, "kvc.err"), "w")
    p = subprocess.Popen(["timeout", "90", kvc, "serve", "--listen",
                          "127.0.0.1:0", "--prefill", "2", "--decode", "1",
                          "--kv-events", spec], stdout=out, stderr=err)
    with open(os.path.join(tmp, "kvc.pid"), "w") as f:
        f.write("%d\n" % p.pid)
    port = None
    try:
        def listen_port():
            with open(os.path.join(tmp, "kvc.out")) as f:
                for line in f:
                    if line.startswith("listen 127.0.0.1:"):
                        return int(line.split(":")[1])
            return None
        port = until(listen_port, 100)
        check(port is not None, "kvconductor serve --kv-events started")
        if port is None:
            return
        run(ctx, a, b, port)
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        check(rc == 0, "SIGTERM: exit %s" % rc)
        if rc != 0:
            with open(os.path.join(tmp, "kvc.err")) as f:
                print(f.read())
        a.close()
        b.close()
        ctx.term()


def run(ctx, a, b, port):
    global fails
    ha = [bytes([i + 1]) * 32 for i in range(16)]
    hb = [7, 2**63 + 5, -3, 12345678901234, -(2**62), 99] + \
        list(range(1000, 1010))

    # registration over HTTP, and its refusals
    body = {"endpoint": "tcp://127.0.0.1:%d" % b.pub_port, "node": 1,
            "replay": "tcp://127.0.0.1:%d" % b.rep_port, "model": "m",
            "block_size": 16, "instance": "engB", "topic": "kv-events"}
    st, d = js(port, "POST", "/v1/kv-events", body)
    check(st == 200, "POST /v1/kv-events: %s %s" % (st, d))
    st, d = js(port, "POST", "/v1/kv-events", body)
    check(st == 409, "the same engine again: 409 (%s)" % st)
    for bad in ({"endpoint": "http://x", "node": 1},
                {"endpoint": "tcp://127.0.0.1:1"},
                {"endpoint": "tcp://127.0.0.1:1", "node": 999},
                {"endpoint": "tcp://127.0.0.1:1", "node": 1,
                 "instance": "a,b"}):
        st, d = js(port, "POST", "/v1/kv-events", bad)
        check(st == 400 and "error" in d, "refused: %s -> %s" % (bad, st))
    # the token's holder cannot make the conductor connect anywhere: only
    # to tcp:// addresses of --kv-events-allow (default loopback)
    for far in ({"endpoint": "tcp://10.1.2.3:5557", "node": 2},
                {"endpoint": "ipc:///tmp/kvfs-not-an-engine", "node": 2},
                {"endpoint": "tcp://localhost:5557", "node": 2},
                {"endpoint": "tcp://127.0.0.1:5557", "node": 2,
                 "replay": "tcp://192.0.2.1:5558"}):
        st, d = js(port, "POST", "/v1/kv-events", far)
        check(st == 403 and "not allowed" in d.get("error", ""),
              "outside --kv-events-allow: %s -> %s" % (far, st))

    check(a.wait_subscribed() and b.wait_subscribed(),
          "both publishers see the conductor subscribe")

    # BlockStored on both engines
    a.publish([a.stored(ha[0:4])])
    a.publish([a.stored(ha[4:8])])
    b.publish([b.stored(hb[0:6])])
    ea = wait_blocks(port, "engA", 8)
    eb = wait_blocks(port, "engB", 6)
    check(ea.get("blocks") == 8 and ea.get("last_seq") == 1,
          "engine A (arrays, bytes): 8 blocks: %s" % ea)
    check(eb.get("blocks") == 6 and eb.get("last_seq") == 0,
          "engine B (maps, ints): 6 blocks: %s" % eb)
    st, d = schedule(port, {"block_keys": [bkey(h) for h in ha[0:8]]})
    check(st == 200 and found(d, 0, 0, 8),
          "A's prefix found on node 0: %s" % d)
    st, d = schedule(port, {"block_keys": [ukey(h) for h in hb[0:6]]})
    check(st == 200 and found(d, 1, 1, 6),
          "B's prefix (signed and unsigned ints) found on node 1: %s" % d)

    # BlockRemoved
    a.publish([a.removed(ha[6:8])])
    ea = wait_blocks(port, "engA", 6)
    st, d = schedule(port, {"block_keys": [bkey(h) for h in ha[0:8]]})
    check(ea.get("blocks") == 6 and st == 200 and found(d, 0, 0, 6),
          "removed blocks leave the prefix: %s" % d)

    # a gap: seq 3 is lost on the wire, seq 4 arrives; the replay brings 3
    a.publish([a.stored(ha[8:10])], live=False)
    a.publish([a.stored(ha[10:12])])
    ea = wait_blocks(port, "engA", 10)
    check(ea.get("blocks") == 10 and ea.get("gaps") == 1 and
          ea.get("replays") == 1 and ea.get("lost") == 0 and
          ea.get("last_seq") == 4,
          "a gap is filled by a replay: %s" % ea)
    st, d = schedule(port, {"block_keys": [bkey(h) for h in ha[8:12]]})
    check(st == 200 and found(d, 0, 0, 4),
          "the replayed blocks are found: %s" % d)

    # garbage never stops the stream: a payload that is not msgpack, one
    # that is not a batch, a seq frame of 4 bytes, a block size other
    # than the registered one; the next good batch is applied
    a.publish(None, payload=b"\xc1 not msgpack")
    a.publish(None, payload=msgpack.packb({"no": "batch"}))
    a.publish(None, payload=msgpack.packb([1.0, [[b"BlockStored", 5]]]))
    a.publish([a.stored(ha[12:13], block_size=32)])
    a.pub.send_multipart([b"", b"\x00\x00\x00\x01", b"\x90"])
    a.publish([a.stored(ha[13:14])])
    ea = wait_blocks(port, "engA", 11)
    check(ea.get("blocks") == 11 and ea.get("decode_errors") == 4 and
          ea.get("block_size_mismatches") == 1 and ea.get("gaps") == 1,
          "garbage is counted and skipped: %s" % ea)

    # AllBlocksCleared drops B's blocks only
    b.publish([b.cleared()])
    eb = wait_blocks(port, "engB", 0)
    st, d = schedule(port, {"block_keys": [ukey(h) for h in hb[0:6]]})
    check(eb.get("blocks") == 0 and eb.get("cleared") == 1 and
          st == 200 and d.get("reuse_blocks") == 0,
          "AllBlocksCleared: B's blocks gone: %s" % d)
    check(engine(port, "engA").get("blocks") == 11, "A's blocks stay")
    b.publish([b.stored(hb[0:3])])
    eb = wait_blocks(port, "engB", 3)
    check(eb.get("blocks") == 3 and eb.get("last_seq") == 2,
          "B stores again: %s" % eb)

    # engine C shares node 0 with A: a block both hold stays on the node
    # when C drops it; one only C held goes
    c = Publisher(ctx, encoding="array", hashes="bytes")
    st, d = js(port, "POST", "/v1/kv-events",
               {"endpoint": "tcp://127.0.0.1:%d" % c.pub_port, "node": 0,
                "instance": "engC"})
    check(st == 200 and c.wait_subscribed(),
          "engine C (no replay socket) on A's node: %s" % st)
    c.publish([c.stored(ha[0:2] + ha[14:16])])
    ec = wait_blocks(port, "engC", 4)
    st, d = schedule(port, {"block_keys": [bkey(h) for h in ha[14:16]]})
    check(ec.get("blocks") == 4 and st == 200 and found(d, 0, 0, 2),
          "C's own blocks found on node 0: %s" % d)
    c.publish([c.cleared()])
    ec = wait_blocks(port, "engC", 0)
    st, d = schedule(port, {"block_keys": [bkey(h) for h in ha[0:6]]})
    check(ec.get("blocks") == 0 and st == 200 and found(d, 0, 0, 6),
          "C's clear keeps the blocks A holds on the node: %s" % d)
    st, d = schedule(port, {"block_keys": [bkey(h) for h in ha[14:16]]})
    check(st == 200 and d.get("reuse_blocks") == 0,
          "and drops those only C held: %s" % d)
    # a gap without a replay socket: C's blocks are forgotten (lost)
    c.publish([c.stored(ha[14:15])])
    wait_blocks(port, "engC", 1)
    c.publish([c.stored(ha[15:16])], live=False)
    c.publish([c.stored(ha[0:1])])
    ec = wait_blocks(port, "engC", 1)
    ec = until(lambda: engine(port, "engC").get("lost") == 1 and
               engine(port, "engC")) or engine(port, "engC")
    check(ec.get("gaps") == 1 and ec.get("lost") == 1 and
          ec.get("replays") == 0 and ec.get("blocks") == 1 and
          ec.get("last_seq") == 4,
          "a gap without replay: the engine's blocks reset: %s" % ec)
    st, d = schedule(port, {"block_keys": [bkey(h) for h in ha[0:6]]})
    check(st == 200 and found(d, 0, 0, 6),
          "A's blocks on the node stay through C's reset: %s" % d)
    c.close()

    # B restarts: a new publisher on the same ports, seq from 0, replay in
    # the newer form; its seq 0 is lost on the wire, seq 1 arrives (below
    # the last seq seen): its old blocks go, a replay from 0 brings seq 0
    pb, rb = b.pub_port, b.rep_port
    b.close()
    b = Publisher(ctx, topic=b"kv-events", encoding="map", hashes="int",
                  replay_topic=True, pub_port=pb, rep_port=rb)
    check(b.wait_subscribed(), "the conductor resubscribes to B")
    b.publish([b.stored(hb[10:12])], live=False)
    b.publish([b.stored(hb[12:14])])
    eb = wait_blocks(port, "engB", 4)
    check(eb.get("blocks") == 4 and eb.get("restarts") == 1 and
          eb.get("replays") == 1 and eb.get("last_seq") == 1,
          "a restarted publisher: reset, then resynced by replay: %s" % eb)
    st, d = schedule(port, {"block_keys": [ukey(h) for h in hb[0:3]]})
    check(st == 200 and d.get("reuse_blocks") == 0,
          "the old incarnation's blocks are gone: %s" % d)
    st, d = schedule(port, {"block_keys": [ukey(h) for h in hb[10:14]]})
    check(st == 200 and found(d, 1, 1, 4),
          "the new incarnation's blocks are found: %s" % d)

    # totals and /metrics
    st, s = js(port, "GET", "/v1/stats")
    kv = s.get("kv_events", {}) if st == 200 else {}
    check(kv.get("available") is True and kv.get("engines") == 3 and
          kv.get("gaps") == 2 and kv.get("replays") == 2 and
          kv.get("restarts") == 1 and kv.get("lost") == 1 and
          kv.get("decode_errors") == 4,
          "/v1/stats kv_events totals: %s" %
          {k: v for k, v in kv.items() if k != "engine"})
    st, text = http(port, "GET", "/metrics")
    check(st == 200 and
          'kvconductor_kv_event_gaps_total{instance="engA",node="0"} 1' in
          text and
          'kvconductor_kv_event_restarts_total{instance="engB",node="1"} 1'
          in text and
          'kvconductor_kv_event_blocks{instance="engB",node="1"} 4' in text,
          "/metrics has the engines' counters")
    b.close()


def main():
    if len(sys.argv) != 3:
        print("usage: kvev_pub.py KVCONDUCTOR TMPDIR", file=sys.stderr)
        return 2
    scenario(sys.argv[1], sys.argv[2])
    return min(fails, 100)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Emulated prefill and decode workers for scripts/cluster-demo.sh.

Python standard library only.  A Mooncake-format trace (kvconductor
gen-trace) is served for real against a running cluster: every request
asks the conductor (POST /v1/schedule), its prefill instance's worker
reuses the cached prefix through the mount of its node (the leading
blocks the node holds, counted over the control socket, then further
blocks opened through the mount, which fetches them from a peer), sleeps
for the cost model's prefill time of what it must compute, writes the
new blocks and reports its prefill done; the decode worker on the decode
instance's node then opens and reads every block and sleeps for its
decode steps.  One prefill at a time per prefill instance, in arrival
order; decodes run batched, a step lasting what the cost model says for
the batch.  With --kill, once half the trace has arrived, the leading
conductor is killed with SIGKILL and the workers move to the next one.

The cost model is kvconductor(8)'s default (COST MODEL): LLaMA3-70B on
8 A800s.  Times are real: --speed compresses the trace's arrivals only.
The result is one JSON object on standard output.
"""
import argparse
import hashlib
import json
import os
import queue
import signal
import socket
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request

# kvconductor(8), COST MODEL: the defaults
LAYERS, HIDDEN, FLOP_A, FLOP_B, FLOPS = 80, 8192, 4, 22, 1.25e15
PF_QUAD = LAYERS * FLOP_A * HIDDEN / FLOPS
PF_LIN = LAYERS * FLOP_B * HIDDEN * HIDDEN / FLOPS
DEC_BASE, DEC_PER_SEQ, DEC_PER_TOKEN = 0.009, 0.00014, 2e-8
BLOCK_TOKENS = 512


def prefill_s(n, c):
    return PF_QUAD * (n * n - c * c) + PF_LIN * (n - c)


def step_s(batch, ctx):
    return DEC_BASE + DEC_PER_SEQ * batch + DEC_PER_TOKEN * ctx


def name_of(hash_id):
    return hashlib.sha256(b"kvfs-demo %d" % hash_id).hexdigest()


class Ctl:
    """A kvfsd control socket (src/common/ctlproto.h), one request at a
    time."""

    def __init__(self, path):
        self.path, self.lock, self.f = path, threading.Lock(), None

    def call(self, line):
        with self.lock:
            for _ in range(2):
                try:
                    if self.f is None:
                        s = socket.socket(socket.AF_UNIX)
                        s.settimeout(30)
                        s.connect(self.path)
                        self.f = s.makefile("rwb")
                    self.f.write(line.encode() + b"\n")
                    self.f.flush()
                    return json.loads(self.f.readline())
                except (OSError, ValueError):
                    self.f = None
            return {"ok": False}


class Conductors:
    """The conductors' HTTP addresses; calls go to the one that leads,
    moving on when it answers 503 (a standby names the leader) or not at
    all."""

    def __init__(self, addrs):
        self.addrs, self.cur, self.lock = addrs, 0, threading.Lock()
        self.retried = 0

    def post(self, path, body, patience):
        deadline = time.monotonic() + patience
        data = json.dumps(body).encode()
        while True:
            with self.lock:
                addr = self.addrs[self.cur]
            try:
                req = urllib.request.Request("http://%s%s" % (addr, path),
                                             data=data, method="POST")
                with urllib.request.urlopen(req, timeout=5) as f:
                    return f.status, json.load(f)
            except urllib.error.HTTPError as e:
                try:
                    ans = json.load(e)
                except ValueError:
                    ans = {}
                if e.code != 503:
                    return e.code, ans
                self.move(addr, ans.get("leader"))
            except (OSError, ValueError):
                self.move(addr, None)
            self.retried += 1
            if time.monotonic() > deadline:
                return 0, {}
            time.sleep(0.1)

    def move(self, failed, leader):
        with self.lock:
            if self.addrs[self.cur] != failed:
                return
            if leader and leader in self.addrs:
                self.cur = self.addrs.index(leader)
            else:
                self.cur = (self.cur + 1) % len(self.addrs)

    def get(self, addr, path):
        with urllib.request.urlopen("http://%s%s" % (addr, path),
                                    timeout=5) as f:
            return json.load(f)


class Demo:
    def __init__(self, a):
        self.a = a
        self.mounts = a.mounts.split(",")
        self.ctl = [Ctl(p) for p in a.sockets.split(",")]
        self.cond = Conductors(a.conductors.split(","))
        self.pids = [int(p) for p in a.pids.split(",")] if a.pids else []
        self.payload = os.urandom(a.block_kb * 1024)
        self.lock = threading.Lock()
        self.r = {k: 0 for k in (
            "requests", "scheduled", "rejected", "failed", "errors",
            "completed",
            "blocks", "reused_local", "reused_remote", "written",
            "decode_local", "decode_remote", "decode_missing")}
        self.ttft, self.tbt, self.dstart = [], [], []
        self.batch, self.ctx = 0, 0   # the decode instance's, under lock
        self.decodes = []
        self.pq = None
        self.failover = None

    def count(self, **kw):
        with self.lock:
            for k, v in kw.items():
                self.r[k] += v

    # ---- prefill -------------------------------------------------------
    def prefill_worker(self, q):
        while True:
            item = q.get()
            if item is None:
                return
            try:
                self.prefill(*item)
            except Exception as e:     # a worker must not die silently
                print("cluster_demo: prefill: %r" % e, file=sys.stderr)
                self.count(errors=1)

    def prefill(self, req, dec, arrival):
        names, node = req["names"], dec["prefill_node"]
        mnt, ns = self.mounts[node], self.a.namespace
        ans = self.ctl[node].call("lookup %s %s" % (ns, " ".join(names)))
        local = ans.get("count", 0) if ans.get("ok") else 0
        remote = 0
        for n in names[local:]:
            try:
                with open(os.path.join(mnt, ns, n), "rb") as f:
                    while f.read(1 << 20):
                        pass
                remote += 1
            except FileNotFoundError:
                break
        reuse = local + remote
        cached = min(reuse * BLOCK_TOKENS, req["input_length"])
        time.sleep(prefill_s(req["input_length"], cached))
        written = 0
        for n in names[reuse:]:
            try:
                with open(os.path.join(mnt, ns, n), "xb") as f:
                    f.write(self.payload)
                written += 1
            except FileExistsError:
                pass                     # another request wrote it
        ttft = time.monotonic() - arrival
        self.count(blocks=len(names), reused_local=local,
                   reused_remote=remote, written=written)
        with self.lock:
            self.ttft.append(ttft)
        self.cond.post("/v1/complete", {"id": dec["id"], "phase": "prefill"},
                       5)
        t = threading.Thread(target=self.decode, args=(req, dec))
        t.start()
        with self.lock:
            self.decodes.append(t)

    # ---- decode --------------------------------------------------------
    def decode(self, req, dec):
        names, node = req["names"], dec["decode_node"]
        mnt, ns, ctl = self.mounts[node], self.a.namespace, self.ctl[node]
        local = sum(1 for n in names
                    if ctl.call("stat %s %s" % (ns, n)).get("ok"))
        t0 = time.monotonic()
        missing = 0
        for n in names:
            try:
                with open(os.path.join(mnt, ns, n), "rb") as f:
                    while f.read(1 << 20):
                        pass
            except OSError:
                missing += 1
        start_delay = time.monotonic() - t0
        ctx = req["input_length"] + req["output_length"] // 2
        with self.lock:
            self.dstart.append(start_delay)
            self.batch += 1
            self.ctx += ctx
        last, gaps = time.monotonic(), []
        for _ in range(req["output_length"]):
            with self.lock:
                b, c = self.batch, self.ctx
            time.sleep(step_s(b, c))
            now = time.monotonic()
            gaps.append(now - last)
            last = now
        with self.lock:
            self.batch -= 1
            self.ctx -= ctx
            # kvconductor(8): a request's TBT is the mean of its longest
            # 10% of intervals
            gaps.sort(reverse=True)
            k = max(1, -(-len(gaps) // 10))
            self.tbt.append(statistics.mean(gaps[:k]))
        self.count(decode_local=local, decode_remote=len(names) - local,
                   decode_missing=missing, completed=1)
        self.cond.post("/v1/complete", {"id": dec["id"]}, 5)

    # ---- the leader's death ---------------------------------------------
    def kill_leader(self):
        for addr, pid in zip(self.cond.addrs, self.pids):
            try:
                s = self.cond.get(addr, "/v1/stats")
            except (OSError, ValueError):
                continue
            if s.get("role", "leader") == "leader":
                before = s.get("blocks_indexed", 0)
                os.kill(pid, signal.SIGKILL)
                self.failover = {"killed": addr, "t_kill": time.monotonic(),
                                 "index_before": before}
                return

    # ---- the run ---------------------------------------------------------
    def run(self):
        reqs = []
        with open(self.a.trace) as f:
            for line in f:
                r = json.loads(line)
                # only full blocks have names (kvfs(7)): a trace's last
                # hash_id may cover a partial one
                full = r["input_length"] // BLOCK_TOKENS
                r["names"] = [name_of(h) for h in r["hash_ids"][:full]]
                reqs.append(r)
        queues = []
        workers = []
        for _ in range(self.a.prefill):
            q = queue.Queue()
            t = threading.Thread(target=self.prefill_worker, args=(q,))
            t.start()
            queues.append(q)
            workers.append(t)
        t_start = time.monotonic()
        kill_at = len(reqs) // 2 if self.a.kill else -1
        for i, r in enumerate(reqs):
            if i == kill_at:
                self.kill_leader()
            due = t_start + r["timestamp"] / 1000.0 / self.a.speed
            time.sleep(max(0.0, due - time.monotonic()))
            arrival = time.monotonic()
            self.count(requests=1)
            code, d = self.cond.post("/v1/schedule", {
                "namespace": self.a.namespace, "hashes": r["names"],
                "input_length": r["input_length"],
                "output_length": r["output_length"]}, 20)
            if code == 429:
                self.count(rejected=1)
                continue
            if code != 200:
                if not self.r["failed"]:
                    print("cluster_demo: /v1/schedule answered %d %s" %
                          (code, d), file=sys.stderr)
                self.count(failed=1)
                continue
            self.count(scheduled=1)
            if self.failover and "t_first" not in self.failover:
                self.failover["t_first"] = time.monotonic()
                self.failover["new"] = self.cond.addrs[self.cond.cur]
            d["prefill_node"] = self.a.prefill_nodes[d["prefill_instance"]]
            d["decode_node"] = self.a.decode_nodes[d["decode_instance"]]
            queues[d["prefill_instance"]].put((r, d, arrival))
        for q in queues:
            q.put(None)
        for t in workers:
            t.join()
        for t in list(self.decodes):
            t.join()
        return self.report(time.monotonic() - t_start)

    def report(self, wall):
        def pct(v, p):
            v = sorted(v)
            return v[min(len(v) - 1, int(len(v) * p))] if v else None
        out = dict(self.r)
        out["wall_s"] = wall
        out["retries"] = self.cond.retried
        for k, v in (("ttft", self.ttft), ("tbt", self.tbt),
                     ("decode_start", self.dstart)):
            out[k] = {"p50": pct(v, 0.5), "p90": pct(v, 0.9),
                      "p99": pct(v, 0.99),
                      "mean": statistics.mean(v) if v else None}
        if self.failover:
            f = self.failover
            out["failover"] = {"killed": f["killed"],
                               "new_leader": f.get("new"),
                               "first_schedule_s": f["t_first"] - f["t_kill"]
                               if "t_first" in f else None,
                               "index_before": f["index_before"]}
            try:
                s = self.cond.get(f.get("new") or self.cond.addrs[
                    self.cond.cur], "/v1/stats")
                out["failover"]["index_after"] = s.get("blocks_indexed")
            except (OSError, ValueError):
                pass
        try:
            s = self.cond.get(self.cond.addrs[self.cond.cur], "/v1/stats")
            out["handoff"] = s.get("handoff")
        except (OSError, ValueError):
            out["handoff"] = None
        return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--trace", required=True)
    p.add_argument("--mounts", required=True)
    p.add_argument("--sockets", required=True)
    p.add_argument("--conductors", required=True)
    p.add_argument("--pids", default="")
    p.add_argument("--namespace", default="demo")
    p.add_argument("--prefill", type=int, default=2)
    p.add_argument("--prefill-nodes", type=lambda s: [int(x) for x in
                                                     s.split(",")],
                   default=[0, 1])
    p.add_argument("--decode-nodes", type=lambda s: [int(x) for x in
                                                    s.split(",")],
                   default=[2])
    p.add_argument("--block-kb", type=int, default=64)
    p.add_argument("--speed", type=float, default=1.0)
    p.add_argument("--kill", action="store_true")
    a = p.parse_args()
    json.dump(Demo(a).run(), sys.stdout)
    print()


if __name__ == "__main__":
    main()

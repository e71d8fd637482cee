"""common.py - what the engine backend programs in tests/engines/ share.

Each program (sglang_file.py, lmcache_local_disk.py, ...) performs one
engine's file operations, in that engine's order and with its naming
scheme (docs: ENGINES.md in the shared notes), against a directory: a
kvfs mount in layout=open, or any plain directory.  This module holds the
rest: the payload every file carries, the worker processes, the options,
the verification and the summary line.

Payload.  Every file the programs write holds exactly one payload,
a function of the file's key (its final path relative to the backend's
directory), of the writer that made it and of its size:

  offset  size  field
  0       4     magic b"KVFE"
  4       4     writer id, u32 little-endian
  8       8     total size of the file in bytes, u64 little-endian
  16      16    BLAKE2b-128 of the key (UTF-8)
  32      ...   SHAKE-256 of (b"kvfs-engines", key digest, writer id),
                as many bytes as the size leaves

so a reader that knows only the file's name can tell a complete payload
of one writer from a partial file, a file under the wrong name, or a
mix of two writers' bytes (two writers racing on one key write
different bytes).

Outcomes.  ENOENT at any point (lookup, open, read of a file that went)
is a miss: kvfs evicts when its pool is full, and every engine treats a
missing file as a miss.  Wrong bytes, a partial file under a final name,
or any other error fail the program (exit 1) with one line that says
what and where.  A backend whose engine writes in place (O_TRUNC, or no
O_TRUNC at all, and no rename) can show a reader a file being written on
a POSIX file system: with --semantics posix those reads count as "torn"
and are allowed; on kvfs (found by auto, or --semantics kvfs) a file is
published whole at its last close, so they fail.

Bounds.  Every loop is bounded by --files, --iterations and --seconds.
"""

import argparse
import errno
import hashlib
import json
import os
import select
import signal
import struct
import sys
import threading
import time
import traceback

MAGIC = b"KVFE"
HDR = struct.Struct("<4sIQ16s")
HDR_LEN = HDR.size  # 32
MIN_SIZE = HDR_LEN + 32


class Failure(Exception):
    """A wrong result: the program fails with this message."""


class Torn(Exception):
    """A partial or mixed file: a failure unless the semantics allow it."""


def key_digest(key):
    return hashlib.blake2b(key.encode(), digest_size=16).digest()


_body_cache = {}


def payload(key, writer, size):
    """The bytes writer `writer` stores under `key`, `size` of them."""
    if size < MIN_SIZE:
        raise ValueError("size below %d" % MIN_SIZE)
    kd = key_digest(key)
    ck = (kd, writer, size)
    body = _body_cache.get(ck)
    if body is None:
        seed = b"kvfs-engines" + kd + struct.pack("<I", writer)
        body = hashlib.shake_256(seed).digest(size - HDR_LEN)
        if len(_body_cache) > 64:
            _body_cache.clear()
        _body_cache[ck] = body
    return HDR.pack(MAGIC, writer, size, kd) + body


def check(key, data, size=None):
    """None when data is one writer's whole payload for key (of `size`
    bytes when given), else what is wrong with it."""
    n = len(data)
    if n < HDR_LEN:
        return "%d bytes, shorter than the header" % n
    magic, writer, total, kd = HDR.unpack_from(data, 0)
    if magic != MAGIC:
        return "no payload header (magic %r)" % bytes(magic)
    if kd != key_digest(key):
        return "the payload of another key"
    if total != n:
        return "%d bytes of a %d-byte payload (writer %d)" % (n, total,
                                                             writer)
    if size is not None and total != size:
        return "%d bytes, expected %d" % (total, size)
    want = payload(key, writer, total)
    if want != data:
        mv = memoryview(data)
        off = next(i for i in range(n) if mv[i] != want[i])
        return ("bytes differ from writer %d's payload at offset %d "
                "(a mix of writers, or corrupt)" % (writer, off))
    return None


def is_miss(e):
    return isinstance(e, OSError) and e.errno == errno.ENOENT


# ---- options -------------------------------------------------------------

def parser(prog, doc, size=65536, files=32):
    p = argparse.ArgumentParser(prog=prog, description=doc)
    p.add_argument("dir", help="the backend's directory (made if absent)")
    p.add_argument("--files", type=int, default=files,
                   help="keys to store (default %(default)s)")
    p.add_argument("--size", type=int, default=size,
                   help="bytes per file (default %(default)s)")
    p.add_argument("--writers", type=int, default=2,
                   help="writer processes; every 4th key is stored by "
                        "all of them, racing (default %(default)s)")
    p.add_argument("--readers", type=int, default=2,
                   help="reader processes (default %(default)s)")
    p.add_argument("--iterations", type=int, default=3,
                   help="passes over the keys per reader "
                        "(default %(default)s)")
    p.add_argument("--seconds", type=float, default=60,
                   help="time bound of the whole run (default "
                        "%(default)s)")
    p.add_argument("--seed", type=int, default=1,
                   help="key seed: runs with one seed share keys")
    p.add_argument("--semantics", choices=("auto", "kvfs", "posix"),
                   default="auto",
                   help="kvfs: a file is published whole at its last "
                        "close, so any partial read fails; posix: reads "
                        "torn by in-place writers are counted; auto: "
                        "kvfs when DIR is on a kvfs mount")
    p.add_argument("--verify", action="store_true",
                   help="store and load nothing: read every file under "
                        "DIR and check it against its name's payload")
    return p


def finish_args(p, a):
    if a.files < 1 or a.files > 10 ** 6:
        p.error("--files must be 1..1000000")
    if a.size < MIN_SIZE or a.size > (1 << 30):
        p.error("--size must be %d..1 GiB" % MIN_SIZE)
    if a.writers < 1 or a.writers > 64 or a.readers < 0 or a.readers > 64:
        p.error("--writers 1..64, --readers 0..64")
    if a.iterations < 1 or a.iterations > 10 ** 6:
        p.error("--iterations must be 1..1000000")
    if not 0 < a.seconds <= 86400:
        p.error("--seconds must be in (0, 86400]")
    if a.semantics == "auto":
        a.semantics = "kvfs" if on_kvfs(a.dir) else "posix"
    a.deadline = time.monotonic() + a.seconds
    return a


def on_kvfs(path):
    """True when path is on a FUSE mount whose root holds .kvfs/stats."""
    path = os.path.realpath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    best, fstype = "", ""
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                parts = line.split()
                mnt = parts[4].replace("\\040", " ")
                fs = parts[parts.index("-") + 1]
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) \
                        and len(mnt) >= len(best):
                    best, fstype = mnt, fs
    except OSError:
        return False
    return fstype.startswith("fuse") and \
        os.path.exists(os.path.join(best, ".kvfs", "stats"))


# ---- keys -----------------------------------------------------------------

def shared(i):
    """Keys stored by every writer at once: the race."""
    return i % 4 == 0


def writer_keys(a, w):
    return [i for i in range(a.files)
            if shared(i) or i % a.writers == w]


def sha256_chain(seed, n, page_tokens=16):
    """n 64-hex keys, a SHA-256 chain over pages of u32le tokens, each
    page hashed after the previous page's raw digest (none for the
    first): kvfs's and SGLang's chain with no seed."""
    out, prev = [], b""
    for i in range(n):
        toks = [(seed * 1000003 + i * page_tokens + t) & 0xffffffff
                for t in range(page_tokens)]
        h = hashlib.sha256(prev + struct.pack("<%dI" % page_tokens, *toks))
        prev = h.digest()
        out.append(h.hexdigest())
    return out


# ---- stats -----------------------------------------------------------------

FIELDS = ("stored", "skipped", "loaded", "missed", "verified", "torn",
          "hits", "absent", "evicted")


class Stats(dict):
    def __init__(self):
        super().__init__((k, 0) for k in FIELDS)

    def add(self, other):
        for k, v in other.items():
            self[k] = self.get(k, 0) + v


class Ctx:
    """What a worker knows: options, its role, its counters."""

    def __init__(self, a, role, wid):
        self.a = a
        self.role = role
        self.wid = wid  # writer id (1-based) stored in the payload
        self.st = Stats()
        self.ppid = os.getpid()  # made before the fork: the parent

    def race(self):
        """Before a shared key: wait for every writer, so that they
        check, write and publish it at the same moment."""
        b = getattr(self.a, "barrier", None)
        if b is None or b.broken:
            return
        try:
            b.wait(timeout=max(0.1, min(5, self.a.deadline -
                                        time.monotonic())))
        except threading.BrokenBarrierError:
            pass  # a writer ended early: race no more

    def exists(self, path, test=os.path.exists):
        """An engine's existence check, counted as a hit or absent."""
        there = test(path)
        self.st["hits" if there else "absent"] += 1
        return there

    def expired(self):
        if self.role != "final" and os.getppid() != self.ppid:
            os._exit(1)  # the parent was killed: no orphan goes on
        return time.monotonic() >= self.a.deadline

    def torn(self, what):
        if self.a.semantics == "posix":
            self.st["torn"] += 1
            return
        raise Failure("partial or mixed file visible: %s" % what)

    def verify(self, key, data, where, torn_ok=False):
        """Count a load of key; data None: a miss."""
        if data is None:
            self.st["missed"] += 1
            return
        why = check(key, data, self.a.size)
        if why is None:
            self.st["loaded"] += 1
            self.st["verified"] += 1
            return
        if torn_ok:
            self.torn("%s: %s" % (where, why))
            return
        raise Failure("%s: %s" % (where, why))


# ---- workers --------------------------------------------------------------

def _child(fn, ctx, wfd):
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    rc, msg = 0, None
    try:
        fn(ctx)
    except Failure as e:
        rc, msg = 1, str(e)
    except OSError as e:
        rc, msg = 1, "%s: %s%s" % (
            errno.errorcode.get(e.errno, e.errno), e.strerror,
            " (%s)" % e.filename if e.filename else "")
    except Exception:
        rc, msg = 1, traceback.format_exc().strip().splitlines()[-1]
    try:
        os.write(wfd, json.dumps({"rc": rc, "msg": msg,
                                  "st": ctx.st}).encode())
    finally:
        os._exit(rc)


def run_workers(a, writer_fn, reader_fn):
    """W writers and R readers at once, in forked processes; their
    counters summed; the first failure raised."""
    procs = []
    if a.writers > 1:
        import multiprocessing
        # process-shared semaphores, inherited through fork
        a.barrier = multiprocessing.Barrier(a.writers)
    roles = [("writer", w, writer_fn) for w in range(a.writers)] + \
        [("reader", r, reader_fn) for r in range(a.readers)]
    for role, n, fn in roles:
        r, w = os.pipe()
        ctx = Ctx(a, role, n + 1)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            _child(fn, ctx, w)
        os.close(w)
        procs.append((pid, r, "%s %d" % (role, n)))
    total, errors = Stats(), []
    grace = a.deadline + 30
    for pid, r, name in procs:
        buf = b""
        while True:
            left = grace - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                errors.append("%s: still running past --seconds" % name)
                break
            rd, _, _ = select.select([r], [], [], min(left, 1.0))
            if not rd:
                continue
            chunk = os.read(r, 65536)
            if not chunk:
                break
            buf += chunk
        os.close(r)
        _, status = os.waitpid(pid, 0)
        try:
            res = json.loads(buf.decode())
        except ValueError:
            errors.append("%s: died (wait status %d)" % (name, status))
            continue
        total.add(res["st"])
        if res["rc"]:
            errors.append("%s: %s" % (name, res["msg"]))
    if errors:
        raise Failure("; ".join(errors))
    return total


# ---- a whole-tree verification ------------------------------------------

def verify_tree(a, root, classify, inplace=False):
    """Read every file under root: each final file (classify(relpath)
    == "final") must be its name's whole payload, whatever its size;
    "tmp" files are counted, "aux" ones checked by classify's owner,
    anything else fails.  Files that go while we look are misses.
    inplace: the engine writes in place, so with posix semantics two
    writers racing on one name may have left a mix (counted as torn)."""
    st = Stats()
    st["tmp"] = 0
    n = 0
    for dirpath, dirs, files in os.walk(root, onerror=_walk_err):
        dirs.sort()
        for name in sorted(files):
            n += 1
            if n > 10 ** 7 or time.monotonic() >= a.deadline:
                raise Failure("verify: past --seconds or 10^7 files")
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            kind = classify(rel)
            if kind == "tmp":
                st["tmp"] += 1
                continue
            if kind == "aux":
                continue
            if kind != "final":
                raise Failure("verify: %s is no name this backend makes"
                              % path)
            try:
                with open(path, "rb", buffering=0) as f:
                    data = f.read()
            except OSError as e:
                if is_miss(e):
                    st["missed"] += 1
                    continue
                raise
            why = check(rel, data)
            if why and inplace and a.semantics == "posix":
                st["torn"] += 1
                continue
            if why:
                raise Failure("verify: %s: %s" % (path, why))
            st["verified"] += 1
    return st


def _walk_err(e):
    if not is_miss(e):
        raise e


# ---- the program ------------------------------------------------------------

def summary(name, a, st, t0):
    extra = ""
    if st.get("torn"):
        extra = " (torn reads allowed: posix semantics)"
    line = ("%s: %s files stored, %d skipped, %d loaded, %d missed, "
            "%d verified, %d torn, %d evicted; exists %d hit %d absent; "
            "%s semantics, %.1fs%s" % (
                name, st["stored"], st["skipped"], st["loaded"],
                st["missed"], st["verified"], st["torn"], st["evicted"],
                st["hits"], st["absent"], a.semantics,
                time.monotonic() - t0, extra))
    print(line)


def main(name, a, setup, writer_fn, reader_fn, final_fn, classify,
         inplace=False):
    """The program: --verify, or setup + workers + a final load pass of
    every key + a verification of every file left under the directory.
    inplace: the engine overwrites files in place (see Ctx.torn)."""
    t0 = time.monotonic()
    try:
        os.makedirs(a.dir, exist_ok=True)
        if a.verify:
            st = verify_tree(a, a.dir, classify, inplace)
            print("%s: verify: %d files verified, %d missed, %d torn, "
                  "%d tmp files; %s semantics, %.1fs" % (
                      name, st["verified"], st["missed"], st["torn"],
                      st["tmp"], a.semantics, time.monotonic() - t0))
            return 0
        setup(a)
        st = run_workers(a, writer_fn, reader_fn)
        fin = Ctx(a, "final", 0)
        final_fn(fin)
        st.add(fin.st)
        vt = verify_tree(a, a.dir, classify, inplace)
        for k in ("verified", "missed", "torn"):
            st[k] += vt[k]
    except Failure as e:
        print("%s: FAIL %s" % (name, e), file=sys.stderr)
        return 1
    except OSError as e:
        print("%s: FAIL %s: %s" % (name, e.strerror,
                                   e.filename or "?"), file=sys.stderr)
        return 1
    summary(name, a, st, t0)
    return 0


# ---- I/O helpers the backends share ---------------------------------------

def aligned(n):
    """A page-aligned buffer of n bytes (anonymous mmap), as O_DIRECT
    callers use."""
    import mmap
    return mmap.mmap(-1, max(n, 1))


def write_all(fd, buf):
    """os.write until all of buf is written (a short write continues)."""
    mv = memoryview(buf)
    done, guard = 0, 0
    while done < len(mv):
        n = os.write(fd, mv[done:])
        if n <= 0:
            raise Failure("write returned %d" % n)
        done += n
        guard += 1
        if guard > 1 << 20:
            raise Failure("write: no progress")


def writer_loop(ctx, store_one):
    """A writer's one pass: its own keys and every shared one, in key
    order, so that writers meet on the shared ones at about the same
    time."""
    for i in writer_keys(ctx.a, ctx.wid - 1):
        if ctx.expired():
            break
        if shared(i):
            ctx.race()
        store_one(ctx, i)
    b = getattr(ctx.a, "barrier", None)
    if b is not None:
        b.abort()  # no writer waits for one that is done


def reader_loop(ctx, load_one, per_pass=None):
    """--iterations passes over every key, each reader starting at its
    own offset; per_pass(ctx) first in each pass (a batch exists)."""
    n = ctx.a.files
    for it in range(ctx.a.iterations):
        if per_pass:
            per_pass(ctx)
        for k in range(n):
            if ctx.expired():
                return
            load_one(ctx, (k + ctx.wid * 7919) % n)


def final_loop(ctx, load_one):
    """After the workers: every key loaded once more."""
    for i in range(ctx.a.files):
        if ctx.expired():
            raise Failure("final pass: past --seconds")
        load_one(ctx, i)

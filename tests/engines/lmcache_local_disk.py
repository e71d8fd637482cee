#!/usr/bin/env python3
"""LMCache LocalDiskBackend, its file operations in its order.

  start   statvfs(DIR): refuse to start when f_bavail * f_frsize is below
          the quota (--quota).
  names   <model, / -> ->@<world size>@<worker id>@<chunk hash hex>@<dtype>.pt
          flat in DIR; the chunk hash a signed 64-bit Python hash, so a
          name may hold "-".
  store   contains(key) -> skip; else open(path, "wb") + one write.
          --odirect, when size % f_bsize == 0: os.open(O_CREAT|O_WRONLY|
          O_DIRECT) (no O_TRUNC) and one write from a page-aligned buffer.
  load    open(path, "rb") + readinto; --odirect: O_RDONLY|O_DIRECT +
          readv into a page-aligned buffer.  FileNotFoundError: a miss.
  evict   os.remove of the least recently stored file beyond --capacity.

No rename: a file is written in place under its final name, so on a
POSIX directory a reader may see it part-written (counted as torn there).
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

NAME = "lmcache_local_disk"


def opts():
    p = common.parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--model", default="mistralai/Mistral-7B-Instruct-v0.2")
    p.add_argument("--world-size", type=int, default=1)
    p.add_argument("--worker-id", type=int, default=0)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--odirect", action="store_true",
                   help="O_DIRECT writes and reads, as LMCache's opt-in")
    p.add_argument("--quota", type=int, default=None,
                   help="bytes that must be free at start (default one "
                        "file)")
    p.add_argument("--capacity", type=int, default=0,
                   help="files a writer keeps before it evicts its "
                        "oldest (0: no eviction)")
    a = common.finish_args(p, p.parse_args())
    if a.quota is None:
        a.quota = a.size
    a.names = []
    for i in range(a.files):
        h = common.key_digest("%d/%d" % (a.seed, i))
        # a signed 64-bit hash, formatted as Python's hex: "-1f..." or "1f..."
        ch = struct.unpack("<q", h[:8])[0]
        a.names.append("%s@%d@%d@%x@%s.pt" % (
            a.model.replace("/", "-"), a.world_size, a.worker_id, ch,
            a.dtype))
    return a


def setup(a):
    sv = os.statvfs(a.dir)
    free = sv.f_bavail * sv.f_frsize
    if free < a.quota:
        raise common.Failure(
            "LMCache refuses to start: statvfs(%s) says %d bytes "
            "available (f_bavail %d x f_frsize %d), below its quota of %d"
            % (a.dir, free, sv.f_bavail, sv.f_frsize, a.quota))
    a.bsize = sv.f_bsize
    a.direct = a.odirect and a.size % sv.f_bsize == 0


def store(ctx, i):
    a = ctx.a
    r = a.names[i]
    path = os.path.join(a.dir, r)
    if ctx.exists(path):
        ctx.st["skipped"] += 1
        return
    data = common.payload(r, ctx.wid, a.size)
    if a.direct:
        buf = common.aligned(a.size)
        buf[:] = data
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o644)
        try:
            common.write_all(fd, buf)
        finally:
            os.close(fd)
            buf.close()
    else:
        with open(path, "wb") as f:
            f.write(data)
    ctx.st["stored"] += 1
    if a.capacity:
        mine = ctx.__dict__.setdefault("mine", [])
        mine.append(path)
        while len(mine) > a.capacity:
            try:
                os.remove(mine.pop(0))
                ctx.st["evicted"] += 1
            except FileNotFoundError:
                pass


def load(ctx, i):
    a = ctx.a
    r = a.names[i]
    path = os.path.join(a.dir, r)
    try:
        if a.direct:
            buf = common.aligned(a.size)
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            try:
                n = os.readv(fd, [buf])
            finally:
                os.close(fd)
            data = bytes(buf[:n])
            buf.close()
        else:
            data = bytearray(a.size)
            with open(path, "rb") as f:
                n = f.readinto(data)
            del data[n:]
    except FileNotFoundError:
        ctx.verify(r, None, path)
        return
    ctx.verify(r, data, path, torn_ok=True)


def classify(r):
    if os.sep not in r and r.endswith(".pt") and r.count("@") == 4:
        return "final"
    return "unknown"


def main():
    a = opts()
    return common.main(
        NAME, a, setup,
        lambda c: common.writer_loop(c, store),
        lambda c: common.reader_loop(c, load),
        lambda c: common.final_loop(c, load),
        classify, inplace=True)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""SGLang HiCache storage backend `file` (class HiCacheFile), its file
operations in its order.

  names   <64 hex key><suffix>.bin, flat in DIR; the key a SHA-256 chain
          over pages of u32le tokens; suffix _<model, / -> ->_<tp rank>_
          <tp size>.  --variant namespace: the same names inside
          DIR/namespace-<hash>/.
  store   exists(final) -> skip; else tmp <final>.tmp.<pid>.<tid>.<uuid>
          opened "wb" (O_WRONLY|O_CREAT|O_TRUNC) + buffered write (numpy
          tofile), os.replace(tmp, final).  Namespace variant: tmp opened
          O_WRONLY|O_CREAT|O_EXCL, os.writev of the payload in pieces,
          os.replace.
  load    open(final, "rb", buffering=0) + one readinto; a short read
          raises; FileNotFoundError is a miss.
  exists  batch_exists_v2: os.scandir of the whole directory per call.
  evict   (--evict) listdir, stat each, statvfs, os.remove the oldest.
"""
import os
import sys
import threading
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

NAME = "sglang_file"


def opts():
    p = common.parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--variant", choices=("flat", "namespace"),
                   default="flat")
    p.add_argument("--model", default="meta-llama/Llama-3.1-8B-Instruct")
    p.add_argument("--tp-rank", type=int, default=0)
    p.add_argument("--tp-size", type=int, default=1)
    p.add_argument("--evict", type=int, default=0, metavar="N",
                   help="writers keep at most N files: after each store "
                        "the evictor removes the oldest (0: never)")
    a = common.finish_args(p, p.parse_args())
    a.suffix = "_%s_%d_%d" % (a.model.replace("/", "-"), a.tp_rank,
                              a.tp_size)
    a.keys = common.sha256_chain(a.seed, a.files)
    a.sub = ""
    if a.variant == "namespace":
        ns = common.key_digest(a.model + a.suffix).hex()[:16]
        a.sub = "namespace-%s" % ns
    a.store_dir = os.path.join(a.dir, a.sub) if a.sub else a.dir
    return a


def rel(a, i):
    name = a.keys[i] + a.suffix + ".bin"
    return os.path.join(a.sub, name) if a.sub else name


def setup(a):
    os.makedirs(a.store_dir, exist_ok=True)


def write_tmp_flat(tmp, data):
    with open(tmp, "wb") as f:
        f.write(data)


def write_tmp_writev(tmp, data):
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        mv = memoryview(data)
        # header, then the tensor in pieces, as writev of the pages
        step = max(4096, len(mv) // 4)
        iov = [mv[:common.HDR_LEN]] + [mv[o:o + step] for o in
                                       range(common.HDR_LEN, len(mv), step)]
        done, guard = 0, 0
        while iov:
            n = os.writev(fd, iov)
            done += n
            guard += 1
            if n <= 0 or guard > 1 << 16:
                raise common.Failure("writev made no progress")
            while iov and n >= len(iov[0]):
                n -= len(iov[0])
                iov.pop(0)
            if iov and n:
                iov[0] = iov[0][n:]
    finally:
        os.close(fd)


def store(ctx, i):
    a = ctx.a
    r = rel(a, i)
    final = os.path.join(a.dir, r)
    if ctx.exists(final):
        ctx.st["skipped"] += 1
        return
    tmp = "%s.tmp.%d.%d.%s" % (final, os.getpid(), threading.get_ident(),
                               uuid.uuid4().hex)
    data = common.payload(r, ctx.wid, a.size)
    try:
        if a.variant == "namespace":
            write_tmp_writev(tmp, data)
        else:
            write_tmp_flat(tmp, data)
        os.replace(tmp, final)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    ctx.st["stored"] += 1
    if a.evict:
        evictor(ctx)


def evictor(ctx):
    """HiCacheFile's optional evictor: listdir, stat, statvfs, remove."""
    a = ctx.a
    names = [n for n in os.listdir(a.store_dir) if n.endswith(".bin")]
    os.statvfs(a.store_dir)
    if len(names) <= a.evict:
        return
    aged = []
    for n in names:
        try:
            aged.append((os.stat(os.path.join(a.store_dir, n)).st_mtime, n))
        except FileNotFoundError:
            pass
    aged.sort()
    for _, n in aged[:max(0, len(aged) - a.evict)]:
        try:
            os.remove(os.path.join(a.store_dir, n))
            ctx.st["evicted"] += 1
        except FileNotFoundError:
            pass


def batch_exists(ctx):
    """batch_exists_v2: one scandir of the whole directory."""
    a = ctx.a
    with os.scandir(a.store_dir) as it:
        present = {e.name for e in it}
    for i in range(a.files):
        if os.path.basename(rel(a, i)) in present:
            ctx.st["hits"] += 1
        else:
            ctx.st["absent"] += 1


def load(ctx, i):
    a = ctx.a
    r = rel(a, i)
    path = os.path.join(a.dir, r)
    buf = bytearray(a.size)
    try:
        with open(path, "rb", buffering=0) as f:
            n = f.readinto(buf)
    except FileNotFoundError:
        ctx.verify(r, None, path)
        return
    if n != a.size:
        raise common.Failure("%s: short read, %d of %d bytes" %
                             (path, n, a.size))
    ctx.verify(r, buf, path)


def classify(r):
    parts = r.split(os.sep)
    name = parts[-1]
    if len(parts) > 2 or (len(parts) == 2 and
                          not parts[0].startswith("namespace-")):
        return "unknown"
    if ".bin.tmp." in name:
        return "tmp"
    if name.endswith(".bin") and len(name) > 68:
        return "final"
    return "unknown"


def main():
    a = opts()
    return common.main(
        NAME, a, setup,
        lambda c: common.writer_loop(c, store),
        lambda c: common.reader_loop(c, load, batch_exists),
        lambda c: (batch_exists(c), common.final_loop(c, load)),
        classify)


if __name__ == "__main__":
    sys.exit(main())

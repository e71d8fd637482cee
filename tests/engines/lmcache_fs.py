#!/usr/bin/env python3
"""LMCache FS connector / MP-mode fs adapter, its file operations in its
order.

  start   os.scandir(DIR) to rebuild its index of *.data files.
  names   <model, / -> ->@0x<rank>@<group>@<64 hex>[@salt].data, flat in
          DIR.
  store   exists(final) -> skip; else a tmp file in DIR/tmp/ (--tmp-sibling:
          a <final>.<uuid>.tmp sibling) opened "wb", a 28-byte header
          written, then the data (two writes), os.replace(tmp, final).
  load    open(final, "rb") and readinto in a loop until the file is read;
          FileNotFoundError is a miss.
  evict   unlink of the oldest stored file beyond --capacity.

Here the 28 header bytes are the first 28 bytes of the payload, so that
the whole file can be checked.
"""
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

NAME = "lmcache_fs"
HEADER = 28
TMPDIR = "tmp"


def opts():
    p = common.parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--model", default="Qwen/Qwen3-8B")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--group", type=int, default=0)
    p.add_argument("--salt", default="s1",
                   help="salt of every 3rd name ('' for none)")
    p.add_argument("--tmp-sibling", action="store_true",
                   help="tmp files beside the final one, not in tmp/")
    p.add_argument("--capacity", type=int, default=0,
                   help="files a writer keeps before it unlinks its "
                        "oldest (0: no eviction)")
    a = common.finish_args(p, p.parse_args())
    keys = common.sha256_chain(a.seed + 7, a.files)
    a.names = []
    for i, k in enumerate(keys):
        salt = "@" + a.salt if a.salt and i % 3 == 2 else ""
        a.names.append("%s@%#x@%d@%s%s.data" % (
            a.model.replace("/", "-"), a.rank, a.group, k, salt))
    return a


def setup(a):
    os.makedirs(os.path.join(a.dir, TMPDIR), exist_ok=True)
    index = 0
    with os.scandir(a.dir) as it:
        for e in it:
            if e.name.endswith(".data") and e.is_file():
                index += 1
    a.startup_index = index


def store(ctx, i):
    a = ctx.a
    r = a.names[i]
    final = os.path.join(a.dir, r)
    if ctx.exists(final):
        ctx.st["skipped"] += 1
        return
    if a.tmp_sibling:
        tmp = "%s.%s.tmp" % (final, uuid.uuid4().hex)
    else:
        tmp = os.path.join(a.dir, TMPDIR, "%s.%s.tmp" % (r, uuid.uuid4().hex))
    data = memoryview(common.payload(r, ctx.wid, a.size))
    try:
        with open(tmp, "wb", buffering=0) as f:
            if f.write(data[:HEADER]) != HEADER:
                raise common.Failure("%s: short header write" % tmp)
            if f.write(data[HEADER:]) != len(data) - HEADER:
                raise common.Failure("%s: short data write" % tmp)
        os.replace(tmp, final)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    ctx.st["stored"] += 1
    if a.capacity:
        mine = ctx.__dict__.setdefault("mine", [])
        mine.append(final)
        while len(mine) > a.capacity:
            try:
                os.unlink(mine.pop(0))
                ctx.st["evicted"] += 1
            except FileNotFoundError:
                pass


def load(ctx, i):
    a = ctx.a
    r = a.names[i]
    path = os.path.join(a.dir, r)
    if not ctx.exists(path):
        ctx.verify(r, None, path)
        return
    buf = bytearray(a.size)
    mv = memoryview(buf)
    got = 0
    try:
        with open(path, "rb") as f:
            while got < a.size:  # bounded: each turn reads > 0 bytes
                n = f.readinto(mv[got:])
                if not n:
                    break
                got += n
    except FileNotFoundError:
        ctx.verify(r, None, path)
        return
    ctx.verify(r, buf[:got], path)


def classify(r):
    parts = r.split(os.sep)
    if len(parts) == 2 and parts[0] == TMPDIR and parts[1].endswith(".tmp"):
        return "tmp"
    if len(parts) != 1:
        return "unknown"
    if r.endswith(".tmp") and ".data." in r:
        return "tmp"
    return "final" if r.endswith(".data") and r.count("@") >= 3 \
        else "unknown"


def main():
    a = opts()
    return common.main(
        NAME, a, setup,
        lambda c: common.writer_loop(c, store),
        lambda c: common.reader_loop(c, load),
        lambda c: common.final_loop(c, load),
        classify)


if __name__ == "__main__":
    sys.exit(main())

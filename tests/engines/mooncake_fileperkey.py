#!/usr/bin/env python3
"""Mooncake Store SSD offload, FilePerKey mode, its file operations in its
order.

  layout  DIR/moon_<dir>/<a-p>/<a-p>/<sanitized key>: two levels named by
          the key's hash, one letter a..p (a nibble) each; the key with
          every character outside [A-Za-z0-9._-] made "_".
  store   makedirs, open O_WRONLY|O_CREAT|O_TRUNC, one write, fsync
          (--no-fsync: none); a key stored again is replaced.
  exists  os.path.exists per key before a load.
  load    open O_RDONLY|O_NOATIME (without it on EPERM), pread to the end.
  evict   unlink of the oldest stored key beyond --capacity.

Written in place under the final name: on a POSIX directory a reader or
a second writer can meet one part-written (torn there).
"""
import hashlib
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

NAME = "mooncake_fileperkey"
BAD = re.compile(r"[^A-Za-z0-9._-]")


def opts():
    p = common.parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--cluster", default="default",
                   help="the <dir> of moon_<dir>")
    p.add_argument("--no-fsync", action="store_true")
    p.add_argument("--capacity", type=int, default=0,
                   help="keys a writer keeps before it unlinks its "
                        "oldest (0: no eviction)")
    a = common.finish_args(p, p.parse_args())
    a.rels = []
    for i in range(a.files):
        key = "vllm/req:%d@tp0/layer_%d#kv" % (a.seed * 100000 + i, i % 7)
        h = hashlib.sha256(key.encode()).digest()[0]
        a.rels.append(os.path.join(
            "moon_" + a.cluster, chr(97 + (h >> 4)), chr(97 + (h & 15)),
            BAD.sub("_", key)))
    return a


def setup(a):
    os.makedirs(os.path.join(a.dir, "moon_" + a.cluster), exist_ok=True)


def store(ctx, i):
    a = ctx.a
    r = a.rels[i]
    path = os.path.join(a.dir, r)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = common.payload(r, ctx.wid, a.size)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        n = os.write(fd, data)
        if n != len(data):
            raise common.Failure("%s: one write wrote %d of %d bytes" %
                                 (path, n, len(data)))
        if not a.no_fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    ctx.st["stored"] += 1
    if a.capacity:
        mine = ctx.__dict__.setdefault("mine", [])
        mine.append(path)
        while len(mine) > a.capacity:
            try:
                os.unlink(mine.pop(0))
                ctx.st["evicted"] += 1
            except FileNotFoundError:
                pass


def open_ro(path):
    try:
        return os.open(path, os.O_RDONLY | os.O_NOATIME)
    except PermissionError:
        return os.open(path, os.O_RDONLY)


def load(ctx, i):
    a = ctx.a
    r = a.rels[i]
    path = os.path.join(a.dir, r)
    if not ctx.exists(path):
        ctx.verify(r, None, path)
        return
    parts = []
    try:
        fd = open_ro(path)
        try:
            off = 0
            while off <= a.size:  # bounded: reads until EOF, or one more
                b = os.pread(fd, a.size + 1 - off, off)
                if not b:
                    break
                parts.append(b)
                off += len(b)
        finally:
            os.close(fd)
    except FileNotFoundError:
        ctx.verify(r, None, path)
        return
    ctx.verify(r, b"".join(parts), path, torn_ok=True)


def classify(r):
    parts = r.split(os.sep)
    if len(parts) == 4 and parts[0].startswith("moon_") and \
            len(parts[1]) == 1 and len(parts[2]) == 1 and \
            not BAD.search(parts[3]):
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

#!/usr/bin/env python3
"""llama.cpp server slot save/restore (--slot-save-path), its file
operations in its order.

  names   any name the client gives, <= 255 bytes, no separator: here
          names with "@ % - _ . :", a leading "-", UTF-8, and 255-byte
          ones, flat in DIR.
  save    fopen(path, "wb") (O_CREAT|O_TRUNC) and many small fwrites
          through a 4 KiB stdio buffer; saving a name again replaces it
          (every writer saves every shared name, no exists check).
  restore fopen(path, "rb") + fread to the end; a missing file, or one
          shorter than its header says, is an error result (HTTP 400),
          not a crash: a miss, or (a short one) a partial file.

Saved in place under the final name: on a POSIX directory a reader or a
second writer can meet one part-written (torn there).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

NAME = "llamacpp_slots"
CHUNKS = (4, 4, 8, 12, 100, 1000, 3000, 7, 4096, 513)


def name(seed, i):
    kinds = (
        "-slot%d.bin",
        "slot_%d@model%%3A:q4_k_m.-.bin",
        "%d.kv",
        "prompt \u00e9t\u00e9 %d.bin",
        "long-%d-",
    )
    n = kinds[i % len(kinds)] % (seed * 100000 + i)
    if i % len(kinds) == 4:
        n += "x" * (255 - len(n.encode()))
    return n


def opts():
    p = common.parser(NAME, __doc__.splitlines()[0])
    a = common.finish_args(p, p.parse_args())
    a.names = [name(a.seed, i) for i in range(a.files)]
    return a


def setup(a):
    pass


def store(ctx, i):
    a = ctx.a
    r = a.names[i]
    data = memoryview(common.payload(r, ctx.wid, a.size))
    with open(os.path.join(a.dir, r), "wb", buffering=4096) as f:
        off, k = 0, 0
        while off < len(data):  # bounded: each turn writes >= 4 bytes
            step = CHUNKS[k % len(CHUNKS)]
            f.write(data[off:off + step])
            off += step
            k += 1
    ctx.st["stored"] += 1


def load(ctx, i):
    a = ctx.a
    r = a.names[i]
    path = os.path.join(a.dir, r)
    try:
        with open(path, "rb") as f:
            data = f.read(a.size + 1)
    except FileNotFoundError:
        ctx.verify(r, None, path)  # HTTP 400, "failed to open"
        return
    ctx.verify(r, data, path, torn_ok=True)


def classify(r):
    if os.sep in r or len(r.encode()) > 255:
        return "unknown"
    return "final"


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

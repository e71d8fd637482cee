#!/usr/bin/env python3
"""vLLM ExampleConnector (was SharedStorageConnector), its file operations
in its order.

  layout  DIR/<md5 of the prompt's tokens>/<layer name>.safetensors, one
          file per layer (--layers).
  hit     exists(DIR/<md5>): the whole prompt is a hit.
  store   makedirs, then per layer open(path, "wb") (O_CREAT|O_TRUNC) and
          buffered writes (safetensors: 8-byte length, header, tensor
          data), no rename.
  load    per layer: open, mmap read-only (safetensors safe_open), copy
          out, close.  A missing layer file is a miss.

Files are written in place under their final names: on a POSIX directory
a reader (or a second writer) can meet one part-written (torn there).
"""
import hashlib
import mmap
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

NAME = "vllm_example"


def opts():
    p = common.parser(NAME, __doc__.splitlines()[0], files=16)
    p.add_argument("--layers", type=int, default=4,
                   help="layer files per prompt (default %(default)s)")
    a = common.finish_args(p, p.parse_args())
    if not 1 <= a.layers <= 1000:
        p.error("--layers must be 1..1000")
    a.dirs = []
    for i in range(a.files):
        toks = [(a.seed * 7919 + i * 131 + t) & 0xffffffff
                for t in range(64)]
        a.dirs.append(hashlib.md5(struct.pack("<64I", *toks)).hexdigest())
    a.layer_names = ["model.layers.%d.self_attn.attn" % n
                     for n in range(a.layers)]
    return a


def rel(a, i, layer):
    return os.path.join(a.dirs[i], a.layer_names[layer] + ".safetensors")


def setup(a):
    pass


def store(ctx, i):
    a = ctx.a
    d = os.path.join(a.dir, a.dirs[i])
    if ctx.exists(d):
        ctx.st["skipped"] += 1
        return
    os.makedirs(d, exist_ok=True)
    for layer in range(a.layers):
        r = rel(a, i, layer)
        data = memoryview(common.payload(r, ctx.wid, a.size))
        with open(os.path.join(a.dir, r), "wb") as f:
            # safetensors: the header's length, the header, the tensors
            f.write(data[:8])
            f.write(data[8:common.HDR_LEN])
            for off in range(common.HDR_LEN, len(data), 1 << 20):
                f.write(data[off:off + (1 << 20)])
        ctx.st["stored"] += 1


def load(ctx, i):
    a = ctx.a
    if not ctx.exists(os.path.join(a.dir, a.dirs[i])):
        ctx.st["missed"] += a.layers
        return
    for layer in range(a.layers):
        r = rel(a, i, layer)
        path = os.path.join(a.dir, r)
        try:
            with open(path, "rb") as f:
                try:
                    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                except ValueError:  # an empty file cannot be mapped
                    ctx.verify(r, b"", path, torn_ok=True)
                    continue
                with m:
                    data = m[:]
        except FileNotFoundError:
            ctx.verify(r, None, path)
            continue
        ctx.verify(r, data, path, torn_ok=True)


def classify(r):
    parts = r.split(os.sep)
    if len(parts) == 2 and len(parts[0]) == 32 and \
            parts[1].endswith(".safetensors"):
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

#!/usr/bin/env python3
"""vLLM OffloadingConnector, file-system tier, its file operations in its
order.

  layout  DIR/<model>_<cfg digest>_r<rank>/<hex[0:3]>/<hex[3:5]>_g<group>/
          <block hash hex>.bin, and DIR/<model>_<cfg digest>_r<rank>/
          config.json written once.
  start   O_DIRECT probe: DIR/.o_direct_probe_<rand>.tmp opened
          O_CREAT|O_WRONLY|O_TRUNC|O_DIRECT, 4 KiB written from an aligned
          buffer, removed; on any failure, buffered I/O from then on.
  store   exists(final) -> skip; makedirs; <dir>/dest_<rand>.tmp opened
          O_CREAT|O_EXCL|O_WRONLY|O_TRUNC[|O_DIRECT], one write,
          os.replace(tmp, final).
  lookup  os.access(final, F_OK): one faccessat per key.
  load    O_RDONLY[|O_DIRECT] + one os.readv into an aligned buffer; on
          any error, a short read included, the file is removed (and the
          block recomputed).
"""
import json
import os
import secrets
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

NAME = "vllm_offload_fs"
PROBE = 4096


def opts():
    p = common.parser(NAME, __doc__.splitlines()[0])
    p.add_argument("--model", default="meta-llama/Llama-3.1-8B")
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--group", type=int, default=0)
    p.add_argument("--no-odirect", action="store_true",
                   help="skip the probe: buffered I/O")
    a = common.finish_args(p, p.parse_args())
    a.cfg = {"model": a.model, "block_size": 16, "dtype": "bfloat16",
             "num_layers": 32, "kv_heads": 8, "head_dim": 128}
    digest = common.key_digest(json.dumps(a.cfg, sort_keys=True)).hex()[:12]
    a.base = "%s_%s_r%d" % (a.model.replace("/", "_"), digest, a.rank)
    a.hashes = common.sha256_chain(a.seed + 11, a.files)
    return a


def rel(a, i):
    h = a.hashes[i]
    return os.path.join(a.base, h[0:3], "%s_g%d" % (h[3:5], a.group),
                        h + ".bin")


def probe(a):
    """vLLM's start-up probe; True when O_DIRECT works here."""
    if a.no_odirect:
        return False
    path = os.path.join(a.dir, ".o_direct_probe_%s.tmp" % secrets.token_hex(4))
    buf = common.aligned(PROBE)
    try:
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC |
                     os.O_DIRECT, 0o644)
        try:
            return os.write(fd, buf) == PROBE
        finally:
            os.close(fd)
    except OSError:
        return False
    finally:
        buf.close()
        try:
            os.remove(path)
        except OSError:
            pass


def setup(a):
    a.direct = probe(a)
    cfg = os.path.join(a.dir, a.base, "config.json")
    os.makedirs(os.path.dirname(cfg), exist_ok=True)
    if not os.path.exists(cfg):
        with open(cfg, "w") as f:
            json.dump(a.cfg, f)


def store(ctx, i):
    a = ctx.a
    r = rel(a, i)
    final = os.path.join(a.dir, r)
    if ctx.exists(final):
        ctx.st["skipped"] += 1
        return
    d = os.path.dirname(final)
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, "dest_%s.tmp" % secrets.token_hex(8))
    buf = common.aligned(a.size)
    buf[:] = common.payload(r, ctx.wid, a.size)
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_TRUNC
    if a.direct:
        flags |= os.O_DIRECT
    try:
        fd = os.open(tmp, flags, 0o644)
        try:
            n = os.write(fd, buf)
        finally:
            os.close(fd)
        if n != a.size:
            raise common.Failure("%s: one write wrote %d of %d bytes" %
                                 (tmp, n, a.size))
        os.replace(tmp, final)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    finally:
        buf.close()
    ctx.st["stored"] += 1


def load(ctx, i):
    a = ctx.a
    r = rel(a, i)
    path = os.path.join(a.dir, r)
    if not ctx.exists(path, lambda p: os.access(p, os.F_OK)):
        ctx.verify(r, None, path)
        return
    buf = common.aligned(a.size)
    try:
        fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if a.direct else 0))
        try:
            n = os.readv(fd, [buf])
        finally:
            os.close(fd)
        data = bytes(buf[:n])
    except FileNotFoundError:
        ctx.verify(r, None, path)
        return
    except OSError as e:
        # vLLM removes the file on any error and recomputes; here an error
        # other than ENOENT is a failure of the mount all the same
        _remove(path)
        raise common.Failure("%s: load: %s" % (path, e.strerror))
    finally:
        buf.close()
    if n != a.size or common.check(r, data, a.size):
        _remove(path)  # what vLLM does; verify() then fails the run
    ctx.verify(r, data, path)


def _remove(path):
    try:
        os.remove(path)
    except OSError:
        pass


def classify(r):
    parts = r.split(os.sep)
    name = parts[-1]
    if len(parts) == 1 and name.startswith(".o_direct_probe_"):
        return "tmp"
    if len(parts) == 2 and name == "config.json":
        return "aux"
    if len(parts) != 4:
        return "unknown"
    if name.startswith("dest_") and name.endswith(".tmp"):
        return "tmp"
    h = name[:-4]
    if name.endswith(".bin") and len(h) == 64 and parts[1] == h[0:3] and \
            parts[2].startswith(h[3:5] + "_g"):
        return "final"
    return "unknown"


def final(ctx):
    common.final_loop(ctx, load)
    cfg = os.path.join(ctx.a.dir, ctx.a.base, "config.json")
    with open(cfg) as f:
        if json.load(f) != ctx.a.cfg:
            raise common.Failure("%s: not the config written" % cfg)


def main():
    a = opts()
    return common.main(
        NAME, a, setup,
        lambda c: common.writer_loop(c, store),
        lambda c: common.reader_loop(c, load),
        final, classify)


if __name__ == "__main__":
    sys.exit(main())

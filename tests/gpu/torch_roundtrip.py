#!/usr/bin/env python3
"""A PyTorch tensor's bytes into kvfs from the device and back.

usage: torch_roundtrip.py TARGET [NS]

TARGET is a kvfs mount or a kvfsd control socket (kvfsd --no-mount), NS
an existing namespace (default "t").  Through the Python binding
(python/kvfs, libkvfs from $KVFS_LIB or the system), on the first CUDA
device:

  1. one tensor (768 x 1024 fp16, 1.5 MiB) -> copy_from_device -> a
     sealed block, whose bytes, mapped on the host, are the tensor's;
     copy_to_device into a second tensor: torch.equal to the first
  2. a batch of 8 tensors (2 MiB each, on a side stream) -> 8 blocks ->
     8 fresh tensors, each torch.equal to its source
  3. a block too large for the room given: EFBIG, nothing written

With $KVCTL (a kvctl), the checksum each block copied from the device
was sealed with (libkvfs computes it on the GPU) is checked against the
CRC-32C of its bytes, computed here.

Prints one "ok" line per check, "FAIL ..." and exit 1 on the first
failure, exit 77 when there is no CUDA device.
"""
import errno
import hashlib
import os
import stat
import subprocess
import sys

try:
    import torch
except ImportError:
    print("torch_roundtrip: SKIP: no PyTorch here")
    sys.exit(77)

import kvfs


def name(i):
    return hashlib.sha256(b"torch-roundtrip/%d/%d" % (os.getpid(), i)).digest()


def fail(msg):
    print("FAIL " + msg)
    sys.exit(1)


def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        t.append(c)
    return t


_TAB = _table()


def crc32c(data):
    c, t = 0xFFFFFFFF, _TAB
    for x in data:
        c = t[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def check_sealed(target, ns, h, data, what):
    """the checksum kvfsd sealed block h with, against data's CRC-32C"""
    kvctl = os.environ.get("KVCTL")
    if not kvctl:
        return
    opt = "-s" if stat.S_ISSOCK(os.stat(target).st_mode) else "-m"
    out = subprocess.run([kvctl, opt, target, "stat", ns, h.hex()],
                         capture_output=True, text=True, check=True).stdout
    sealed = [int(line.split()[1], 16) for line in out.splitlines()
              if line.startswith("checksum")]
    want = crc32c(data)
    if sealed != [want]:
        fail("%s: sealed with checksum %s, its bytes have %08x"
             % (what, ["%08x" % s for s in sealed], want))
    print("ok   %s: sealed with the CRC-32C of its bytes (%08x)"
          % (what, want))


def main():
    if len(sys.argv) < 2:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    target = sys.argv[1]
    ns = sys.argv[2] if len(sys.argv) > 2 else "t"
    if not torch.cuda.is_available():
        print("torch_roundtrip: SKIP: torch sees no CUDA device")
        return 77
    dev = torch.device("cuda", 0)
    print("torch %s on %s" % (torch.__version__, torch.cuda.get_device_name(0)))
    g = torch.Generator(device=dev)
    g.manual_seed(1234)

    with kvfs.connect(target) as k:
        k.gpu_register()

        # 1. one tensor there and back, checked on the host in between
        a = torch.randn(768, 1024, dtype=torch.float16, device=dev,
                        generator=g)
        nbytes = a.numel() * a.element_size()
        h = name(0)
        k.copy_from_device(ns, h, a.data_ptr(), nbytes).wait()
        host = a.cpu().contiguous().view(torch.uint8).numpy().tobytes()
        with k.map(ns, h) as blk:
            got = bytes(blk.data)
        if got != host:
            fail("the sealed block's bytes are not the tensor's "
                 "(%d bytes, %d expected)" % (len(got), len(host)))
        print("ok   device -> pool: %d bytes sealed, equal on the host"
              % nbytes)
        check_sealed(target, ns, h, host, "the tensor's block")
        b = torch.zeros_like(a)
        cp = k.copy_to_device(ns, h, b.data_ptr(), nbytes)
        cp.wait()
        torch.cuda.synchronize()
        if cp.lens[0] != nbytes or not torch.equal(a, b):
            fail("pool -> device: %d bytes, tensors equal: %s"
                 % (cp.lens[0], torch.equal(a, b)))
        print("ok   pool -> device: torch.equal to the source")

        # 2. a batch of 8 on a side stream
        s = torch.cuda.Stream(device=dev)
        with torch.cuda.stream(s):
            src = [torch.randn(1024, 1024, dtype=torch.float16, device=dev,
                               generator=g) for _ in range(8)]
        s.synchronize()
        size = src[0].numel() * src[0].element_size()
        hs = [name(10 + i) for i in range(8)]
        k.copy_from_device_batch(
            ns, [(hs[i], src[i].data_ptr(), size) for i in range(8)],
            stream=s.cuda_stream).wait()
        dst = [torch.empty_like(t) for t in src]
        cp = k.copy_to_device_batch(
            ns, [(hs[i], dst[i].data_ptr(), size) for i in range(8)],
            stream=s.cuda_stream)
        cp.wait()
        s.synchronize()
        bad = [i for i in range(8) if not torch.equal(src[i], dst[i])]
        if bad or cp.lens != [size] * 8:
            fail("batch of 8: tensors %s differ, sizes %s" % (bad, cp.lens))
        print("ok   a batch of 8 x %d bytes on a side stream, each "
              "torch.equal" % size)
        for i in (0, 7):
            check_sealed(target, ns, hs[i],
                         src[i].cpu().view(torch.uint8).numpy().tobytes(),
                         "batch block %d" % i)

        # 3. too little room: EFBIG, the tensor untouched
        small = torch.zeros(1024, dtype=torch.uint8, device=dev)
        try:
            k.copy_to_device(ns, h, small.data_ptr(), small.numel()).wait()
            fail("a 1.5 MiB block copied into 1 KiB of room")
        except OSError as e:
            if e.errno != errno.EFBIG:
                fail("too little room: %s, not EFBIG" % e)
        torch.cuda.synchronize()
        if int(small.count_nonzero()) != 0:
            fail("too little room: the device memory was written")
        print("ok   too little room: EFBIG, nothing written")
    return 0


if __name__ == "__main__":
    sys.exit(main())

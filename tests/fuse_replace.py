#!/usr/bin/env python3
"""fuse_replace.py - no reader of a name sees bytes of two versions, or a
short file, while writers replace that name (kvfs(7), Publication).

usage: fuse_replace.py DIR MODE ROUNDS
  DIR     a directory in an open namespace of a mount
  MODE    rename  each writer writes a tmp file and renames it onto the name
          trunc   each writer rewrites the name with O_CREAT|O_TRUNC
          mixed   one writer of each kind
  ROUNDS  replacements per writer

Two writers replace one name ROUNDS times each while three readers open it,
read it to the end and check it: every version carries a header (magic,
version, size) and a body derived from the version, so a short read, a
long read and a mix of two versions are all caught.  ENOENT before the
first publication is a clean miss; any other error, ESTALE included, is a
bad read.  The run is bounded: writers stop after ROUNDS, readers when the
writers are done, and everything after 240 s.  Prints one summary line
and exits 1 on any bad read.
"""
import errno
import os
import struct
import sys
import time

DIR, MODE, ROUNDS = sys.argv[1], sys.argv[2], int(sys.argv[3])
NAME = os.path.join(DIR, "replaced.bin")
DONE = os.path.join(DIR, ".writers-done")
MAGIC = 0x4B564653
HDR = struct.Struct("<IIQ")
DEADLINE = time.monotonic() + 240
KNOWN_CLOSE_EIO = os.environ.get("KVFS_STRICT_CLOSE") != "1"


def body(version):
    """the bytes of a version: 4 KiB to ~200 KB, its own pattern"""
    size = 4096 + (version * 7919) % 196000
    word = struct.pack("<Q", (version * 0x9E3779B97F4A7C15) & (2**64 - 1))
    data = HDR.pack(MAGIC, version, size) + word * (size // 8 + 1)
    return data[:size]


def write_version(w, i, how):
    version = (w << 20) | i
    data = body(version)
    if how == "rename":
        tmp = NAME + ".tmp.%d.%d" % (w, i)
        fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    else:
        fd = os.open(NAME, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        # two writes, as engines that write a header then data do
        os.write(fd, data[:HDR.size])
        os.write(fd, data[HDR.size:])
    finally:
        os.close(fd)
    if how == "rename":
        os.replace(tmp, NAME)


def writer(w, how):
    errs = 0
    for i in range(ROUNDS):
        if time.monotonic() > DEADLINE:
            break
        try:
            write_version(w, i, how)
        except OSError as e:
            errs += 1
            print("writer %d round %d: %s" % (w, i, e), flush=True)
    os._exit(1 if errs else 0)


def check(data):
    """None when data is one whole version, else why not"""
    if len(data) < HDR.size:
        return "short: %d bytes, no header" % len(data)
    magic, version, size = HDR.unpack_from(data)
    if magic != MAGIC:
        return "bad magic %#x" % magic
    if len(data) != size:
        return "version %#x: %d bytes of %d" % (version, len(data), size)
    if data != body(version):
        want = body(version)
        at = next(i for i in range(size) if data[i] != want[i])
        return "version %#x: bytes of another version from %d" % (version, at)
    return None


def reader(r):
    reads = bad = close_eio = 0
    while not os.path.exists(DONE) and time.monotonic() < DEADLINE:
        step = "open"
        try:
            with open(NAME, "rb", buffering=0) as f:
                chunks = []
                while True:
                    step = "read at %d" % sum(map(len, chunks))
                    c = f.read(1 << 20)
                    if not c:
                        break
                    chunks.append(c)
                step = "close"
            data = b"".join(chunks)
        except FileNotFoundError:
            continue
        except OSError as e:
            if step == "close" and e.errno == errno.EIO and KNOWN_CLOSE_EIO:
                # every byte was read and is checked below; close(2) of a
                # reader rarely gets EIO under the write-back cache (the
                # kernel's flush finds an error on the inode's mapping),
                # a known bug, counted apart (KVFS_STRICT_CLOSE=1: a fail)
                close_eio += 1
                data = b"".join(chunks)
            else:
                bad += 1
                print("reader %d: %s: %s" % (r, step, e), flush=True)
                continue
        reads += 1
        why = check(data)
        if why:
            bad += 1
            print("reader %d: %s" % (r, why), flush=True)
    print("reader %d: %d reads, %d bad, %d EIO from close" %
          (r, reads, bad, close_eio), flush=True)
    os._exit(1 if bad else 0)


def main():
    hows = {"rename": ["rename", "rename"], "trunc": ["trunc", "trunc"],
            "mixed": ["rename", "trunc"]}[MODE]
    try:
        os.unlink(DONE)
    except FileNotFoundError:
        pass
    readers = []
    for r in range(3):
        pid = os.fork()
        if pid == 0:
            reader(r)
        readers.append(pid)
    writers = []
    for w, how in enumerate(hows):
        pid = os.fork()
        if pid == 0:
            writer(w, how)
        writers.append(pid)
    failed = 0
    for pid in writers:
        failed += os.waitpid(pid, 0)[1] != 0
    with open(DONE, "wb"):
        pass
    for pid in readers:
        failed += os.waitpid(pid, 0)[1] != 0
    verdict = "FAIL" if failed else "ok  "
    print("%s %s: 2 writers x %d replacements, 3 readers: %d processes "
          "failed" % (verdict, MODE, ROUNDS, failed), flush=True)
    sys.exit(1 if failed else 0)


main()

#!/usr/bin/env python3
"""fuse_spill.py - files bigger than a slot (kvfsd(8), slot_size and
capacity), driven by tests/fuse_spill.sh against a real mount.

usage: fuse_spill.py PHASE DIR SLOT CAPACITY [writethrough]
  write   files of 0, 1, 4096, SLOT-1, SLOT, SLOT+1 and 3 SLOT + 123
          bytes, each in 4 KiB writes, read back after an fstat; an
          O_TRUNC rewrite of a spilled file, smaller; a spilled tmp file
          renamed into place; a spilled file read while a new version
          of its name is written
  check   what write left, after a restart of kvfsd
  toobig  a file bigger than CAPACITY: the write that crosses it fails
          with EFBIG (with writethrough; under the write-back cache the
          write goes to the page cache and close reports it), close
          says the same, nothing is published; an earlier file is whole
          or was evicted for the room the big one took
  nospace files held open fill the capacity, so nothing can be
          evicted: a new file's write that needs room fails with ENOSPC
          (writethrough) or its close does, and nothing is published
Prints "ok ..." per check; exits 1 on the first failure.
"""
import errno
import hashlib
import os
import sys

PHASE, DIR = sys.argv[1], sys.argv[2]
SLOT, CAP = int(sys.argv[3]), int(sys.argv[4])
WT = sys.argv[5:] == ["writethrough"]


def ok(msg):
    print("ok  ", msg, flush=True)


def fail(msg):
    print("FAIL", msg, flush=True)
    sys.exit(1)


def body(name, n):
    seed = hashlib.sha256(name.encode()).digest()
    return (seed * (n // 32 + 1))[:n]


def write(path, data, flags=os.O_CREAT | os.O_WRONLY | os.O_TRUNC):
    fd = os.open(path, flags, 0o644)
    try:
        for i in range(0, len(data), 4096):
            os.write(fd, data[i:i + 4096])
    finally:
        os.close(fd)


def read(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        n = os.fstat(fd).st_size
        got = os.read(fd, n + 1)
        while len(got) < n + 1:
            more = os.read(fd, n + 1 - len(got))
            if not more:
                break
            got += more
        return n, got
    finally:
        os.close(fd)


def expect(path, want, what):
    n, got = read(path)
    if n != len(want) or got != want:
        fail("%s: fstat %d, read %d bytes, want %d" %
             (what, n, len(got), len(want)))


SIZES = (0, 1, 4096, SLOT - 1, SLOT, SLOT + 1, 3 * SLOT + 123)


def do_write():
    for n in SIZES:
        p = os.path.join(DIR, "f%d" % n)
        write(p, body(p, n))
        expect(p, body(p, n), "%d bytes" % n)
    ok("files of %s bytes, written in 4 KiB pieces, read back whole" %
       ", ".join(map(str, SIZES)))
    p = os.path.join(DIR, "rewritten")
    write(p, body("big", 2 * SLOT + 5))
    write(p, body("small", 100))
    expect(p, body("small", 100), "a spilled file rewritten smaller")
    write(p + ".tmp", body("renamed", 2 * SLOT))
    os.replace(p + ".tmp", p)
    expect(p, body("renamed", 2 * SLOT), "a spilled tmp file renamed")
    # a reader of the old version keeps it while a new one is written
    fd = os.open(p, os.O_RDONLY)
    write(p, body("third", 3 * SLOT))
    old = os.pread(fd, 4 * SLOT, 0)
    os.close(fd)
    if old != body("renamed", 2 * SLOT):
        fail("an open reader saw its spilled file change")
    expect(p, body("third", 3 * SLOT), "the new version")
    ok("rewrites, renames and an open reader of spilled files")


def do_check():
    for n in SIZES:
        p = os.path.join(DIR, "f%d" % n)
        expect(p, body(p, n), "after the restart, %d bytes" % n)
    expect(os.path.join(DIR, "rewritten"), body("third", 3 * SLOT),
           "after the restart, the rewritten file")
    ok("after the restart every file is there, whole")


def write_err(path, data):
    """errno of the first failing write, and of close"""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    werr = cerr = 0
    for i in range(0, len(data), 65536):
        try:
            os.write(fd, data[i:i + 65536])
        except OSError as e:
            werr = e.errno
            break
    try:
        os.close(fd)
    except OSError as e:
        cerr = e.errno
    return werr, cerr


def refused(what, path, n, want):
    werr, cerr = write_err(path, body(path, n))
    if WT and werr != want:
        fail("%s: the write failed with %s, not %s" %
             (what, errno.errorcode.get(werr, werr), errno.errorcode[want]))
    if cerr != want:
        fail("%s: close returned %s, not %s" %
             (what, errno.errorcode.get(cerr, cerr), errno.errorcode[want]))
    if os.path.exists(path):
        fail("%s: published all the same" % what)


def do_toobig():
    keep = os.path.join(DIR, "keep")
    write(keep, body(keep, SLOT + 7))
    refused("a file bigger than the capacity", os.path.join(DIR, "huge"),
            CAP + SLOT, errno.EFBIG)
    # growing, it took the room of what could be evicted: an earlier
    # file is gone or whole, never cut
    if os.path.exists(keep):
        expect(keep, body(keep, SLOT + 7), "an earlier file")
    ok("past the capacity: %s, nothing published, earlier files whole "
       "or evicted" % ("the write fails with EFBIG, close too" if WT else
                       "close fails with EFBIG (the write-back cache took "
                       "the write)"))


def do_nospace():
    held = []
    i = 0
    # open files are never evicted: hold them until the next would not fit
    while (i + 2) * 2 * SLOT <= CAP:
        p = os.path.join(DIR, "held%d" % i)
        write(p, body(p, 2 * SLOT))
        held.append(os.open(p, os.O_RDONLY))
        i += 1
    refused("a file for which nothing can be evicted",
            os.path.join(DIR, "nospace"), 3 * SLOT, errno.ENOSPC)
    for fd in held:
        os.close(fd)
    p = os.path.join(DIR, "after")
    write(p, body(p, 3 * SLOT))
    expect(p, body(p, 3 * SLOT), "once the files are closed")
    ok("nothing evictable: %s, nothing published; once closed, the "
       "room is there" % ("the write fails with ENOSPC, close too" if WT
                          else "close fails with ENOSPC"))


{"write": do_write, "check": do_check, "toobig": do_toobig,
 "nospace": do_nospace}[PHASE]()

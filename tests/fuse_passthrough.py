#!/usr/bin/env python3
"""fuse_passthrough.py - files bigger than a slot read through a mount
that passes them through (kvfsd -o passthrough), driven by
tests/fuse_passthrough.sh.

usage: fuse_passthrough.py DIR SLOT
Writes a file of 3 slots and a small one, then: reads and an mmap of the
big one (compared byte for byte), two readers at once, an O_TRUNC
rewrite while a reader holds the old version (it keeps its bytes), a
rename while a reader holds it (the same bytes through either name).
Prints "ok ..." per check and, last, "INO N" for the big file's inode;
exits 1 on the first failure.
"""
import mmap
import os
import sys

DIR, SLOT = sys.argv[1], int(sys.argv[2])


def ok(msg):
    print("ok  ", msg, flush=True)


def fail(msg):
    print("FAIL", msg, flush=True)
    sys.exit(1)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb", buffering=0) as f:
        return f.read()


big = os.path.join(DIR, "big")
one = os.urandom(3 * SLOT + 5)
write(big, one)
write(os.path.join(DIR, "small"), b"s" * 1000)
for _ in range(3):
    if read(big) != one:
        fail("a read of the big file")
with open(big, "rb") as f:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    same = m[:] == one
    m.close()
if not same:
    fail("an mmap of the big file")
ok("reads and an mmap of a file of 3 slots")
a = open(big, "rb", buffering=0)
b = open(big, "rb", buffering=0)
if a.read() != one or b.read() != one:
    fail("two readers at once")
b.close()
ok("two readers at once")
ino = os.stat(big).st_ino
# a new version while a reads the old one
two = os.urandom(2 * SLOT + 7)
write(big, two)
a.seek(0)
if a.read() != one:
    fail("an open reader saw the file change under it")
if read(big) != two:
    fail("the new version")
a.close()
ok("an O_TRUNC rewrite: the open reader keeps its bytes, a new open "
   "reads the new ones")
# a rename while open
c = open(big, "rb", buffering=0)
os.rename(big, big + ".moved")
c.seek(0)
if c.read() != two or read(big + ".moved") != two:
    fail("a file read through two names")
c.close()
ok("a rename while a reader holds it: the same bytes through both names")
print("INO", ino, flush=True)

#!/usr/bin/env python3
"""fuse_open.py - the semantics of an open namespace (kvfs(7), Layouts),
driven by tests/fuse_open.sh against a real mount.

usage: fuse_open.py PHASE NSDIR
  PHASE  main     every file operation an engine's backend performs
         persist  what main left must have survived a restart
         evict    writing past the pool's size makes old files vanish
         race     rename and rewrite right after close, several writers
Prints "ok ..." per check; exits 1 on the first failure.
"""
import ctypes
import errno
import mmap
import os
import signal
import sys

PHASE, NS = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)


def ok(msg):
    print("ok  ", msg, flush=True)


def fail(msg):
    print("FAIL", msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if cond:
        ok(msg)
    else:
        fail(msg)


def errno_of(fn, *a):
    try:
        fn(*a)
    except OSError as e:
        return e.errno
    return 0


def payload(key, n):
    seed = (sum(key.encode()) * 2654435761) & 0xFFFFFFFF
    b = bytearray(n)
    for i in range(0, n, 4096):
        b[i:i + 8] = ((seed + i) & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")
    return bytes(b)


def write_file(path, data, flags=os.O_CREAT | os.O_WRONLY | os.O_TRUNC):
    fd = os.open(path, flags, 0o644)
    os.write(fd, data)
    os.close(fd)


def read_file(path):
    with open(path, "rb", buffering=0) as f:
        return f.read()


def absent_elsewhere(path):
    """another process cannot open path"""
    pid = os.fork()
    if pid == 0:
        try:
            os.close(os.open(path, os.O_RDONLY))
            os._exit(1)
        except OSError:
            os._exit(0)
    return os.waitpid(pid, 0)[1] == 0


def renameat2(a, b, flags):
    AT_FDCWD = -100
    rc = libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags)
    return 0 if rc == 0 else ctypes.get_errno()


def main():
    check(os.getxattr(NS, "user.kvfs.layout") == b"open",
          "a mkdir'd namespace is open (user.kvfs.layout)")
    deep = os.path.join(NS, "m-x", "ab1", "cd_g0", "e", "f")
    os.makedirs(deep)
    check(os.path.isdir(deep), "mkdir -p, five levels")
    check(os.getxattr(deep, "user.kvfs.layout") == b"open",
          "a subdirectory says open too")
    names = ["-lead@x%y:z.pt", "model@8@3@-12ab@bf16.pt", "a" * 255,
             "sp ace.bin", "é.bin"]
    for n in names:
        write_file(os.path.join(deep, n), payload(n, 5000))
    check(sorted(os.listdir(deep)) == sorted(names),
          "any Linux name, up to 255 bytes, lists back")
    check(all(read_file(os.path.join(deep, n)) == payload(n, 5000)
              for n in names), "and reads back byte for byte")
    check(errno_of(write_file, os.path.join(deep, "b" * 256), b"x")
          == errno.ENAMETOOLONG, "a 256-byte name is ENAMETOOLONG")

    # staging: invisible until the last close, then atomically there
    p = os.path.join(NS, "stage.bin")
    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    os.write(fd, b"half")
    check("stage.bin" not in os.listdir(NS), "a staging file is not listed")
    check(absent_elsewhere(p), "nor opened by another process")
    pid = os.fork()
    if pid == 0:  # a child closing its copy publishes nothing
        os.close(fd)
        os._exit(0)
    os.waitpid(pid, 0)
    check(absent_elsewhere(p), "a child's close does not publish it")
    os.write(fd, b"-and-the-rest")
    os.close(fd)
    check(read_file(p) == b"half-and-the-rest",
          "published whole at the last close, seen at once")

    # rename onto a final name, replacing it; RENAME_NOREPLACE
    final = os.path.join(NS, "final.bin")
    write_file(final, b"old")
    reader = os.open(final, os.O_RDONLY)
    tmp = final + ".tmp.1.2.abc"
    write_file(tmp, b"new bytes")
    os.replace(tmp, final)
    check(read_file(final) == b"new bytes" and not os.path.exists(tmp),
          "os.replace publishes onto the final name")
    check(os.pread(reader, 100, 0) == b"old",
          "a reader of the replaced file keeps its bytes")
    os.close(reader)
    write_file(tmp, b"third")
    check(renameat2(tmp, final, 1) == errno.EEXIST,
          "RENAME_NOREPLACE onto an existing name is EEXIST")
    check(renameat2(tmp, os.path.join(NS, "fresh.bin"), 1) == 0 and
          read_file(os.path.join(NS, "fresh.bin")) == b"third",
          "RENAME_NOREPLACE onto a free name moves it")
    # a rename while the writer still holds it: published at its close
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
    os.write(fd, b"renamed while open")
    os.rename(tmp, os.path.join(NS, "late.bin"))
    check(absent_elsewhere(os.path.join(NS, "late.bin")),
          "renamed while open: not visible before the close")
    os.close(fd)
    check(read_file(os.path.join(NS, "late.bin")) == b"renamed while open",
          "renamed while open: published under the new name")
    check(errno_of(os.rename, deep, os.path.join(NS, "moved")) ==
          errno.EXDEV, "a directory rename is EXDEV (mv copies)")

    # O_TRUNC rewrite of a published name: a new version
    slot = os.path.join(NS, "slot0")
    write_file(slot, b"A" * 10000)
    reader = os.open(slot, os.O_RDONLY)
    with open(slot, "wb") as f:
        for _ in range(100):
            f.write(b"B" * 37)
    check(read_file(slot) == b"B" * 3700, "O_TRUNC rewrite replaces it")
    check(os.pread(reader, 20000, 0) == b"A" * 10000,
          "an open reader keeps the old version")
    os.close(reader)
    check(errno_of(os.open, slot, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
          == errno.EEXIST, "O_EXCL on a published name is EEXIST")
    # a write open without O_TRUNC starts from the old bytes
    fd = os.open(slot, os.O_WRONLY)
    os.pwrite(fd, b"CC", 10)
    os.close(fd)
    check(read_file(slot) == b"B" * 10 + b"CC" + b"B" * 3688,
          "a write open without O_TRUNC edits a copy")
    # a mapping of the old version outlives a rewrite: the kernel cuts
    # the size of the inode an O_TRUNC open is on (SIGBUS past the cut)
    mp = os.path.join(NS, "mapped-old.bin")
    write_file(mp, b"M" * 20000)
    m = mmap.mmap(os.open(mp, os.O_RDONLY), 0, prot=mmap.PROT_READ)
    check(m[:4096] == b"M" * 4096, "a mapping of a published file")
    for flags, what in ((os.O_WRONLY | os.O_TRUNC, "an O_TRUNC rewrite"),
                        (os.O_RDWR, "a rewrite without O_TRUNC")):
        fd = os.open(mp, flags)
        size = os.fstat(fd).st_size
        os.write(fd, b"n" * 10)
        os.ftruncate(fd, 5)
        check(size == (0 if flags & os.O_TRUNC else 20000) and
              os.fstat(fd).st_size == 5,
              "%s: its writer's fstat shows its own file" % what)
        for when in ("during", "after"):
            pid = os.fork()
            if pid == 0:  # a SIGBUS kills the child, not the test
                os._exit(0 if m[:] == b"M" * 20000 else 1)
            st = os.waitpid(pid, 0)[1]
            check(st == 0, "the old mapping reads whole %s %s "
                  "(wait status %d)" % (when, what, st))
            if when == "during":
                os.close(fd)
                check(read_file(mp) == b"n" * 5, "%s is published" % what)
        write_file(mp, b"M" * 20000)  # the next round starts over
    m.close()

    # many small writes, writev, pwrite, ftruncate, header then data
    p = os.path.join(NS, "vec.bin")
    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
    os.write(fd, b"H" * 28)
    os.writev(fd, [b"a" * 100, b"b" * 200])
    os.pwrite(fd, b"Z", 1000)
    os.ftruncate(fd, 500)
    os.fsync(fd)
    os.fdatasync(fd)
    os.close(fd)
    check(read_file(p) == b"H" * 28 + b"a" * 100 + b"b" * 200 + b"\0" * 172,
          "header + writev + pwrite + ftruncate + fsync")
    # a shared writable mapping before publication
    p = os.path.join(NS, "mapped.bin")
    fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_EXCL, 0o644)
    os.ftruncate(fd, 8192)
    m = mmap.mmap(fd, 8192, mmap.MAP_SHARED, mmap.PROT_WRITE | mmap.PROT_READ)
    m[100:105] = b"mmap!"
    m.flush()
    m.close()
    os.close(fd)
    data = read_file(p)
    check(len(data) == 8192 and data[100:105] == b"mmap!",
          "a shared writable mmap before publication")
    m = mmap.mmap(os.open(p, os.O_RDONLY), 0, prot=mmap.PROT_READ)
    check(m[100:105] == b"mmap!", "a read-only mmap of the published file")
    m.close()

    # O_DIRECT at any alignment, O_NOATIME, O_TMPFILE
    p = os.path.join(NS, ".o_direct_probe_x.tmp")
    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC | os.O_DIRECT,
                 0o644)
    buf = mmap.mmap(-1, 4096)
    buf.write(b"d" * 4096)
    check(os.write(fd, buf) == 4096, "vLLM's O_DIRECT probe writes 4 KiB")
    os.close(fd)
    os.remove(p)
    p = os.path.join(NS, "odirect.bin")
    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o644)
    check(os.write(fd, b"x" * 1001) == 1001, "O_DIRECT write, odd size")
    os.close(fd)
    fd = os.open(p, os.O_RDONLY | os.O_DIRECT | os.O_NOATIME)
    check(os.pread(fd, 10, 3) == b"x" * 10, "O_DIRECT read, odd offset")
    os.close(fd)
    check(errno_of(os.open, NS, os.O_TMPFILE | os.O_WRONLY, 0o600)
          == errno.EOPNOTSUPP, "O_TMPFILE is EOPNOTSUPP")
    st = os.statvfs(NS)
    check(st.f_bsize == 4096 and st.f_blocks > 0 and st.f_bavail > 0,
          "statvfs: f_bsize 4096 and a real capacity")
    check(os.stat(os.path.join(NS, "slot0")).st_blksize == 4096,
          "st_blksize 4096")
    # a file being written asks for buffers of one write request, so
    # that stdio and Python gather small writes (kvfs(7))
    p = os.path.join(NS, "blksize.bin")
    fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    check(os.fstat(fd).st_blksize == 1 << 19,
          "st_blksize 512 KiB while being written")
    os.close(fd)
    check(os.stat(p).st_blksize == 4096, "st_blksize 4096 once published")

    # unlink at any time; directories
    p = os.path.join(NS, "gone.bin")
    write_file(p, b"still here")
    fd = os.open(p, os.O_RDONLY)
    os.unlink(p)
    check(not os.path.exists(p) and os.pread(fd, 100, 0) == b"still here",
          "unlink of an open file: the name goes, the reader keeps it")
    os.close(fd)
    fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"never")
    os.unlink(p)
    os.close(fd)
    check(not os.path.exists(p), "a staging file unlinked is never published")
    check(errno_of(os.rmdir, os.path.join(NS, "m-x")) == errno.ENOTEMPTY,
          "rmdir of a non-empty directory is ENOTEMPTY")
    check(errno_of(os.unlink, deep) == errno.EISDIR, "unlink of a directory")
    check(errno_of(os.mkdir, os.path.join(NS, "slot0")) == errno.EEXIST,
          "mkdir over a file is EEXIST")
    os.mkdir(os.path.join(NS, "empty"))
    os.rmdir(os.path.join(NS, "empty"))
    check(not os.path.exists(os.path.join(NS, "empty")),
          "rmdir of an empty directory")
    check(errno_of(os.stat, os.path.join(NS, "nope", "x")) == errno.ENOENT,
          "a path through a missing directory is ENOENT")

    # a writer killed halfway publishes nothing
    p = os.path.join(NS, "killed.bin")
    pid = os.fork()
    if pid == 0:
        fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        os.write(fd, b"half of it")
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    check(not os.path.exists(p), "a writer killed halfway publishes nothing")

    # a big directory: listed whole, in pieces
    big = os.path.join(NS, "big")
    os.mkdir(big)
    for i in range(1500):
        write_file(os.path.join(big, "k%05d" % i), b"%d" % i)
    got = sorted(e.name for e in os.scandir(big))
    check(got == ["k%05d" % i for i in range(1500)],
          "scandir of 1500 entries lists each once")
    # left open at the restart: must not survive it
    global leftover
    leftover = os.open(os.path.join(NS, "unfinished.bin"),
                       os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(leftover, b"never finished")
    print("READY", flush=True)
    sys.stdin.read()  # the daemon is killed meanwhile


def race():
    """close, then at once rename or reopen: never lost, never stale"""
    d = os.path.join(NS, "race")
    os.mkdir(d)
    kids = []
    for w in range(4):
        pid = os.fork()
        if pid == 0:
            rc = 0
            for i in range(150):
                final = os.path.join(d, "w%d-f%d" % (w, i % 5))
                tmp = final + ".tmp.%d" % i
                body = b"%d:%d:" % (w, i) * 100
                with open(tmp, "wb") as f:
                    f.write(body)
                os.replace(tmp, final)
                try:
                    got = read_file(final)
                except OSError as e:
                    got = repr(e).encode()
                if got != body or os.path.exists(tmp):
                    print("FAIL writer %d round %d: %r" % (w, i, got[:20]))
                    rc = 1
                    break
            os._exit(rc)
        kids.append(pid)
    bad = sum(os.waitpid(k, 0)[1] != 0 for k in kids)
    check(bad == 0, "os.replace right after close, 4 x 150: never lost")
    left = [n for n in os.listdir(d) if ".tmp." in n]
    check(not left, "no tmp name left behind (%d)" % len(left))
    # O_TRUNC rewrites of one name, read back at once by another process
    p = os.path.join(d, "slot")
    stale = 0
    for i in range(200):
        body = b"v%d;" % i * (50 + i % 7)
        with open(p, "wb") as f:
            f.write(body)
        pid = os.fork()
        if pid == 0:
            os._exit(0 if read_file(p) == body else 1)
        stale += os.waitpid(pid, 0)[1] != 0
    check(stale == 0, "an O_TRUNC rewrite is read at once, 200 times "
          "(%d stale)" % stale)


def persist():
    deep = os.path.join(NS, "m-x", "ab1", "cd_g0", "e", "f")
    check(os.path.isdir(deep) and len(os.listdir(deep)) == 5,
          "after kill -9 and restart: the directories and files are there")
    n = "model@8@3@-12ab@bf16.pt"
    check(read_file(os.path.join(deep, n)) == payload(n, 5000),
          "and their bytes")
    check(read_file(os.path.join(NS, "final.bin")) == b"new bytes",
          "the replacing version survived, not the old one")
    check(not os.path.exists(os.path.join(NS, "unfinished.bin")),
          "a staging file open at the kill is gone")
    check(len(os.listdir(os.path.join(NS, "big"))) == 1500,
          "the big directory is whole")


def evict():
    d = os.path.join(NS, "ev")
    os.mkdir(d)
    seen_missing = False
    for i in range(200):
        write_file(os.path.join(d, "f%d" % i), payload("f%d" % i, 60000))
    for i in range(200):
        p = os.path.join(d, "f%d" % i)
        try:
            data = read_file(p)
        except FileNotFoundError:
            seen_missing = True
            continue
        if data != payload("f%d" % i, 60000):
            fail("evict: wrong bytes in %s" % p)
    check(seen_missing, "writing past the pool evicts: old files are ENOENT")
    check(read_file(os.path.join(d, "f199")) == payload("f199", 60000),
          "the newest file is intact")


{"main": main, "persist": persist, "evict": evict, "race": race}[PHASE]()

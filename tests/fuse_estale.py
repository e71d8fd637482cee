#!/usr/bin/env python3
"""fuse_estale.py - many processes rewrite published names at once, with
open(O_WRONLY|O_CREAT|O_TRUNC) and no retry (llama.cpp's slot save), while
readers open the same names: no open may fail, ESTALE above all (kvfs(7),
Publication: the kernel's one retry of a redirected open must always
find its private inode).

usage: fuse_estale.py DIR [NAMES WRITERS ROUNDS READERS]
  DIR      a directory in an open namespace of a mount
  NAMES    names published first (200)
  WRITERS  writer processes, released together (200)
  ROUNDS   rewrites per writer, each of another name (3)
  READERS  reader processes, reading names until the writers are done (20)

Every version carries a header (magic, name, version, size) and a body
derived from the version, so a read of a short file, or of bytes of two
versions, is caught; at the end each name must hold one whole version of
its own.  Bounded: everything is killed after 150 s.  Prints the counts
(opens, ESTALE, other errors, bad reads) and exits 1 on any failure.
"""
import errno
import os
import random
import select
import signal
import struct
import sys
import time

DIR = sys.argv[1]
NAMES, WRITERS, ROUNDS, READERS = (
    [int(a) for a in sys.argv[2:6]] if len(sys.argv) >= 6
    else [200, 200, 3, 20])
MAGIC = 0x4B565345
HDR = struct.Struct("<IIIQ")
DEADLINE = time.monotonic() + 150


def path(n):
    return os.path.join(DIR, "slot-%03d.bin" % n)


def body(n, version):
    """the bytes of version of name n: 4 KiB to ~100 KB, its own pattern"""
    size = 4096 + (version * 7919 + n * 104729) % 96000
    word = struct.pack("<Q", ((version << 16 | n) * 0x9E3779B97F4A7C15)
                       & (2**64 - 1))
    data = HDR.pack(MAGIC, n, version, size) + word * (size // 8 + 1)
    return data[:size]


def check(n, data):
    """None when data is one whole version of name n, else why not"""
    if len(data) < HDR.size:
        return "short: %d bytes, no header" % len(data)
    magic, name, version, size = HDR.unpack_from(data)
    if magic != MAGIC or name != n:
        return "bad header %#x %d" % (magic, name)
    if len(data) != size:
        return "version %#x: %d bytes of %d" % (version, len(data), size)
    if data != body(n, version):
        return "version %#x: bytes of another version" % version
    return None


def write_file(n, version, flags):
    data = body(n, version)
    fd = os.open(path(n), flags, 0o644)
    try:
        # two writes, as engines that write a header then data do
        os.write(fd, data[:HDR.size])
        os.write(fd, data[HDR.size:])
    finally:
        os.close(fd)


def report(out, line):
    os.write(out, (line + "\n").encode())  # < PIPE_BUF: whole lines


def writer(w, go, out):
    os.read(go, 1)  # every writer starts at once
    opens = estale = other = 0
    for r in range(ROUNDS):
        if time.monotonic() > DEADLINE:
            break
        n = (w + r * 37) % NAMES
        opens += 1
        try:
            write_file(n, (w + 1) << 8 | r,
                       os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        except OSError as e:
            if e.errno == errno.ESTALE:
                estale += 1
            else:
                other += 1
            report(out, "writer %d round %d %s: %s" % (w, r, path(n), e))
    report(out, "W %d %d %d" % (opens, estale, other))
    os._exit(0)


def reader(i, go, out, done):
    os.read(go, 1)
    rnd = random.Random(i)
    opens = estale = other = bad = 0
    while time.monotonic() < DEADLINE:
        if select.select([done], [], [], 0)[0]:
            break  # the writers are done
        n = rnd.randrange(NAMES)
        opens += 1
        try:
            fd = os.open(path(n), os.O_RDONLY)
        except OSError as e:
            if e.errno == errno.ESTALE:
                estale += 1
            else:
                other += 1
            report(out, "reader %d open %s: %s" % (i, path(n), e))
            continue
        try:
            chunks = []
            while True:
                c = os.read(fd, 1 << 20)
                if not c:
                    break
                chunks.append(c)
        except OSError as e:
            other += 1
            report(out, "reader %d read %s: %s" % (i, path(n), e))
            continue
        finally:
            os.close(fd)
        why = check(n, b"".join(chunks))
        if why:
            bad += 1
            report(out, "reader %d %s: %s" % (i, path(n), why))
    report(out, "R %d %d %d %d" % (opens, estale, other, bad))
    os._exit(0)


def main():
    for n in range(NAMES):
        write_file(n, 0, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    out_r, out_w = os.pipe()
    readers, writers = [], []
    for i in range(READERS):
        pid = os.fork()
        if pid == 0:
            os.close(go_w)
            os.close(done_w)
            os.close(out_r)
            reader(i, go_r, out_w, done_r)
        readers.append(pid)
    for w in range(WRITERS):
        pid = os.fork()
        if pid == 0:
            os.close(go_w)
            os.close(done_w)
            os.close(out_r)
            writer(w, go_r, out_w)
        writers.append(pid)
    os.close(out_w)
    os.close(go_w)  # go: every child's read returns at once
    buf = b""
    pending = set(writers)
    while True:
        left = DEADLINE - time.monotonic()
        if left <= 0:
            break
        if select.select([out_r], [], [], min(left, 0.2))[0]:
            c = os.read(out_r, 65536)
            if not c:
                break  # every child has exited
            buf += c
        for pid in list(pending):
            if os.waitpid(pid, os.WNOHANG)[0]:
                pending.discard(pid)
        if not pending and done_w >= 0:
            os.close(done_w)  # the readers stop
            done_w = -1
    timed_out = time.monotonic() >= DEADLINE
    for pid in readers + writers:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    w = [0, 0, 0]
    r = [0, 0, 0, 0]
    nw = nr = 0
    shown = 0
    for line in buf.decode().splitlines():
        f = line.split()
        if f[0] == "W":
            w = [a + int(b) for a, b in zip(w, f[1:])]
            nw += 1
        elif f[0] == "R":
            r = [a + int(b) for a, b in zip(r, f[1:])]
            nr += 1
        elif shown < 20:
            print(line)
            shown += 1
    final = 0
    for n in range(NAMES):
        with open(path(n), "rb") as f:
            why = check(n, f.read())
        if why:
            final += 1
            print("final %s: %s" % (path(n), why))
    failed = (timed_out or nw != WRITERS or nr != READERS or final or
              w[1] or w[2] or sum(r[1:]))
    print("%s %d writers x %d O_TRUNC opens: %d ESTALE, %d other errors; "
          "%d readers: %d opens, %d ESTALE, %d other errors, %d bad reads; "
          "%d names not one whole version%s" %
          ("FAIL" if failed else "ok  ", WRITERS, ROUNDS, w[1], w[2],
           READERS, r[0], r[1], r[2], r[3], final,
           "; timed out" if timed_out else ""), flush=True)
    sys.exit(1 if failed else 0)


main()

#!/usr/bin/env python3
"""fuse_durable.py - close-to-open durability (kvfs(7), Publication),
driven by tests/fuse_durable.sh: kvfsd is killed (SIGKILL) right after a
close returns, and a file whose close (or fsync) returned 0 must be there
after the restart, whole, while one written again after its close must
not appear half-written.

usage: fuse_durable.py write DIR ROUND KVFSD_PID [writethrough]
         in DIR: a new file, an O_TRUNC rewrite of a published name, a
         tmp file renamed into place, a file fsync'ed and left open, a
         file a child closed before its writer wrote on (left open), and
         with writethrough one whose writer closed a dup first; then
         SIGKILL to KVFSD_PID at once, from this process
       fuse_durable.py check DIR ROUND
         what ROUND wrote, after the restart
Prints "ok ..." per check; exits 1 on the first failure.
"""
import os
import signal
import sys

CMD, DIR, ROUND = sys.argv[1], sys.argv[2], int(sys.argv[3])


def body(name, rnd, n=300000):
    word = ("%s:%d;" % (name, rnd)).encode()
    return (word * (n // len(word) + 1))[:n - rnd * 1000]


def fail(msg):
    print("FAIL", msg, flush=True)
    sys.exit(1)


def write(name, data, flags=os.O_CREAT | os.O_WRONLY | os.O_TRUNC):
    fd = os.open(os.path.join(DIR, name), flags, 0o644)
    os.write(fd, data[:4096])
    os.write(fd, data[4096:])
    return fd


def do_write(pid, writethrough):
    # kept open across the kill: a child closes its copy and exits, then
    # the writer writes on (an engine forking while it writes)
    late = write("late-%d" % ROUND, body("late", ROUND))
    child = os.fork()
    if child == 0:
        os.close(late)
        os._exit(0)
    os.waitpid(child, 0)
    os.write(late, b"more bytes after that close")
    if writethrough:
        # the writer's own dup closed, then written again: every write
        # reaches kvfsd at once and takes the close back
        late2 = write("late2-%d" % ROUND, body("late", ROUND))
        os.close(os.dup(late2))
        os.write(late2, b"more bytes after that close")
    # fsync'ed and still open at the kill
    synced = write("synced-%d" % ROUND, body("synced", ROUND))
    os.fsync(synced)
    os.close(write("rewritten", body("rewritten", ROUND)))
    tmp = "tmp-%d" % ROUND
    os.close(write(tmp, body("renamed", ROUND)))
    os.replace(os.path.join(DIR, tmp), os.path.join(DIR, "renamed"))
    os.close(write("new-%d" % ROUND, body("new", ROUND)))
    os.kill(pid, signal.SIGKILL)  # at once after that close returned
    # the descriptors still open die with the mount
    print("ok   round %d written, kvfsd killed" % ROUND, flush=True)


def read(name):
    with open(os.path.join(DIR, name), "rb", buffering=0) as f:
        return f.read()


def expect(name, want):
    try:
        got = read(name)
    except OSError as e:
        fail("round %d: %s: %s" % (ROUND, name, e))
    if got != want:
        fail("round %d: %s: %d bytes, not the %d closed" %
             (ROUND, name, len(got), len(want)))


def do_check():
    expect("new-%d" % ROUND, body("new", ROUND))
    expect("rewritten", body("rewritten", ROUND))
    expect("renamed", body("renamed", ROUND))
    expect("synced-%d" % ROUND, body("synced", ROUND))
    for name in ("late-%d" % ROUND, "late2-%d" % ROUND):
        if os.path.exists(os.path.join(DIR, name)):
            fail("round %d: %s, written after a close, was published "
                 "(%d bytes)" % (ROUND, name, len(read(name))))
    left = [n for n in os.listdir(DIR) if n.startswith("tmp-")]
    if left:
        fail("round %d: tmp names left: %s" % (ROUND, left))
    print("ok   round %d: every closed or fsync'ed file survived the kill, "
          "the one written after its close did not appear" % ROUND,
          flush=True)


if CMD == "write":
    do_write(int(sys.argv[4]), sys.argv[5:] == ["writethrough"])
else:
    do_check()

#!/bin/sh
# fuse_open.sh - an open namespace through a real mount (kvfs(7), Layouts):
# names, subdirectories, staging and publication, rename and replace,
# O_TRUNC versions, O_DIRECT, unlink, mmap, statvfs, a killed writer,
# a kill -9 of kvfsd and its restart, eviction; then the layout knobs.
T=fuse_open
. "${top_srcdir:-.}/tests/fuse_lib.sh"

PY=${PYTHON3:-python3}
command -v "$PY" >/dev/null 2>&1 || skip "python3 is missing"
KVCTL=$top_builddir/src/kvctl/kvctl
SCRIPT=$top_srcdir/tests/fuse_open.py
fuse_begin
KVFSD_LAYOUT=open kvfsd_start "slot_size=64K,slots=2048"

mkdir "$MNT/eng" || bad "mkdir of a namespace"
# main leaves a staging file open and waits: kill -9 the daemon under it
mkfifo "$tmp/hold"
"$PY" "$SCRIPT" main "$MNT/eng" <"$tmp/hold" >"$tmp/main.out" 2>&1 &
MAINPID=$!
HELPERS="$HELPERS $MAINPID"
exec 3>"$tmp/hold"
wait_until 1200 grep -q -e READY -e FAIL -e Traceback "$tmp/main.out" || true
cat "$tmp/main.out"
grep -q READY "$tmp/main.out" || bad "the open-namespace checks"
kvfsd_kill9
exec 3>&-
wait "$MAINPID" 2>/dev/null
KVFSD_LAYOUT=open kvfsd_start ""
"$PY" "$SCRIPT" persist "$MNT/eng" || bad "after a restart"
"$PY" "$SCRIPT" race "$MNT/eng" || bad "races of close with rename and rewrite"
kvfsd_stop || bad "kvfsd exits 0 at SIGTERM"

# a small pool: eviction makes files disappear, never corrupts them
rm -rf "$POOL" "$POOL.d"
rm -rf "$STATE"
KVFSD_LAYOUT=open kvfsd_start "slot_size=64K,slots=32"
mkdir "$MNT/small"
"$PY" "$SCRIPT" evict "$MNT/small" || bad "eviction"

# the layout knobs: kvctl ns create -y, user.kvfs.layout, ns list
"$KVCTL" -m "$MNT" ns create -y chain chained >/dev/null ||
	bad "kvctl ns create -y chain"
"$PY" - "$MNT" <<'EOF' || bad "user.kvfs.layout"
import errno, os, sys
m = sys.argv[1]
assert os.getxattr(m + "/chained", "user.kvfs.layout") == b"chain"
print("ok   a chain namespace says so")
os.setxattr(m + "/chained", "user.kvfs.layout", b"open")
assert os.getxattr(m + "/chained", "user.kvfs.layout") == b"open"
print("ok   an empty namespace's layout can be set")
try:
    os.setxattr(m + "/small", "user.kvfs.layout", b"chain")
    sys.exit("FAIL the layout of a namespace holding files changed")
except OSError as e:
    assert e.errno == errno.ENOTEMPTY, e
print("ok   a namespace holding files keeps its layout")
EOF
"$KVCTL" -m "$MNT" ns list -j | "$PY" -c '
import json, sys
n = {x["name"]: x["layout"] for x in json.load(sys.stdin)["namespaces"]}
assert n == {"small": "open", "chained": "open"}, n' &&
	ok "kvctl ns list shows each layout" || bad "kvctl ns list layouts"
# kvctl names an open namespace's files by path
"$KVCTL" -m "$MNT" ls small >"$tmp/ls"
if grep -qx 'ev/f199' "$tmp/ls"; then ok "kvctl ls lists paths"
else bad "kvctl ls of an open namespace: $(head -3 "$tmp/ls")"; fi
"$KVCTL" -m "$MNT" stat -p small ev/f199 | grep -q '^path      ev/f199$' &&
	ok "kvctl stat -p" || bad "kvctl stat -p small ev/f199"
absent() { [ ! -e "$1" ]; }
# the kernel learns of it at the next sweep of its dentries (a second)
"$KVCTL" -m "$MNT" evict -p small ev/f199 >"$tmp/ev" 2>&1 &&
	wait_until 50 absent "$MNT/small/ev/f199" &&
	ok "kvctl evict -p: the file is gone" ||
	bad "kvctl evict -p small ev/f199: $(cat "$tmp/ev")"
# a chain namespace still refuses what is not a chain name
"$KVCTL" -m "$MNT" ns create strict >/dev/null
if ! (echo x >"$MNT/strict/hello.txt") 2>/dev/null; then
	ok "a chain namespace refuses other names"
else bad "a chain namespace took hello.txt"; fi
kvfsd_stop || bad "kvfsd exits 0 at SIGTERM"
exit "$fail"

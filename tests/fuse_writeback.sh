#!/bin/sh
# kvfsd's write path through the kernel (kvfsd(8) "writethrough"; fs.c
# fs_init, fs_io.c): with the write-back cache, small writes reach kvfsd
# as few large requests; with -o writethrough, one request each; either
# way no GETXATTR "security.capability" round trip per write(2) where the
# kernel offers FUSE_HANDLE_KILLPRIV_V2; and a chain block sealed by the
# writer's fsync(2) never shows its readers what that writer writes after.
# The requests are counted in libfuse's debug log (-d).
set -eu

T=fuse_writeback
. "${top_srcdir:-.}/tests/fuse_lib.sh"
fuse_begin
# the pool of the daemon in the namespaces below too, whatever happened;
# the status is fuse_cleanup's to report, so it is kept across the rm
# (set +e: under set -e the (exit) would end the trap before fuse_cleanup)
trap 'rc=$?; rm -rf "$POOL.2" "$POOL.2.d"; set +e; (exit $rc); fuse_cleanup' EXIT
command -v python3 >/dev/null 2>&1 || skip "python3 not found"

KVCTL=$top_builddir/src/kvctl/kvctl
N=64 # write(2) calls of 1000 bytes

# count OPCODE requests in the log since line $1 (GETXATTR: the kernel
# asks once a file for security.capability, then knows: up to 1)
count() { tail -n +"$1" "$tmp/kvfsd.log" | grep -c "opcode: $2 " || true; }
lines() { wc -l <"$tmp/kvfsd.log"; }

# N unbuffered 1000-byte writes to $1, then read back and compared
small_writes() {
	python3 - "$1" "$N" <<'EOF'
import os, sys
path, n = sys.argv[1], int(sys.argv[2])
data = bytes((i * 7 + 3) % 251 for i in range(1000))
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for _ in range(n):
    if os.write(fd, data) != len(data):
        sys.exit("short write")
os.close(fd)
with open(path, "rb") as f:
    if f.read() != data * n:
        sys.exit("the file read back differs")
EOF
}

# start kvfsd with OPTS ($1), then: the cache is "$2" (on or off), $N
# small writes read back, and the WRITE requests they took are between $3
# and $4; GETXATTR at most once, where the kernel offers KILLPRIV_V2
small_case() {
	rm -f "$tmp/kvfsd.log"
	KVFSD_ARGS=-d kvfsd_start "slot_size=256K,slots=64,layout=open$1"
	mkdir -p "$MNT/o"
	grep -q "write-back cache $2" "$tmp/kvfsd.log" &&
		ok "write-back cache $2" || bad "write-back cache $2"
	at=$(($(lines) + 1))
	if small_writes "$MNT/o/small-$2"; then
		ok "cache $2: $N small writes read back"
	else
		bad "cache $2: $N small writes read back"
	fi
	w=$(count "$at" WRITE)
	[ "$w" -ge "$3" ] && [ "$w" -le "$4" ] &&
		ok "cache $2: $N write(2) calls reach kvfsd as $w requests" ||
		bad "cache $2: $N write(2) calls are $w requests, not $3-$4"
	if grep -q 'handle_killpriv_v2 not offered' "$tmp/kvfsd.log"; then
		echo "# no FUSE_HANDLE_KILLPRIV_V2 here: GETXATTR not counted"
	else
		x=$(count "$at" GETXATTR)
		[ "$x" -le 1 ] && ok "cache $2: no GETXATTR for each write" ||
			bad "cache $2: $x GETXATTR requests for $N writes"
	fi
}

# ---- the write-back cache (the default, where /sys can be written) -------
if [ "$(id -u)" = 0 ] && [ -w /sys/class/bdi ]; then
	small_case "" on 1 4
else
	echo "# /sys/class/bdi is not ours to write: the default is tested" \
		"without the write-back cache"
	small_case "" off "$N" $((2 * N))
fi

# ---- a chain block sealed by fsync: later writes stay the writer's -------
"$KVCTL" -m "$MNT" ns create -y chain c >/dev/null ||
	bad "kvctl ns create -y chain c"
if python3 - "$MNT/c/$(blk 1)" <<'EOF'; then
import errno, os, sys
path = sys.argv[1]
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"A" * 8192)
os.fsync(fd)  # a chain block's writer: fsync seals it
with open(path, "rb") as f:  # a reader, the sealed bytes
    if f.read() != b"A" * 8192:
        sys.exit("the sealed block read back differs")
try:  # into the page cache, or EPERM: never the reader's bytes
    os.pwrite(fd, b"B" * 4096, 0)
except OSError as e:
    if e.errno != errno.EPERM:
        raise
for _ in range(2):
    with open(path, "rb") as f:
        got = f.read()
    if got != b"A" * 8192:
        sys.exit("a reader got %r... after the writer wrote past its seal"
                 % got[:8])
try:
    os.close(fd)
except OSError:
    pass  # the write past the seal is reported here, or was at write
with open(path, "rb") as f:
    if f.read() != b"A" * 8192:
        sys.exit("after the writer's close, the block differs")
EOF
	ok "an fsync-sealed block keeps its bytes for its readers"
else
	bad "an fsync-sealed block keeps its bytes for its readers"
fi
kvfsd_stop

# ---- -o writethrough: one request a write(2), two when it ends inside a
# page it began on another ----------------------------------------------
small_case ",writethrough" off "$N" $((2 * N))
kvfsd_stop

# ---- a read-only /sys (private mount and pid namespaces, which take
# kvfsd and its mount with them whatever happens): no write-back cache,
# and a line that says why --------------------------------------------------
ns="unshare -m -p -f --kill-child --mount-proc --propagation private"
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 &&
	$ns true 2>/dev/null; then
	mkdir "$tmp/mnt2"
	# shellcheck disable=SC2016 # expanded by the inner shell
	timeout 60 $ns sh -c '
		mount -o remount,bind,ro /sys || exit 3
		"$1" -f -o "state=$2,pool=$3,slot_size=256K,slots=16" "$4" \
			>"$5" 2>&1 &
		k=$!
		n=0
		while [ $n -lt 100 ] && ! grep -q " $4 fuse" /proc/mounts; do
			sleep 0.1
			n=$((n + 1))
		done
		fusermount3 -u "$4" || kill $k
		wait $k' sh "$KVFSD" "$tmp/state2" "$POOL.2" "$tmp/mnt2" \
		"$tmp/kvfsd2.log" && rc=0 || rc=$?
	rm -rf "$POOL.2" "$POOL.2.d"
	if [ $rc = 3 ]; then
		echo "# /sys cannot be remounted read-only here: not tested"
	elif grep -q 'no write-back cache: .*limit cannot be lifted' \
		"$tmp/kvfsd2.log"; then
		ok "read-only /sys: no write-back cache, and why"
	else
		bad "read-only /sys: no line about the write-back cache" \
			"(exit $rc): $(tail -n 3 "$tmp/kvfsd2.log")"
	fi
fi
exit $fail

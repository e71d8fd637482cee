#!/bin/sh
# publish: when a file written through the mount becomes visible (kvfs(7),
# Publication): at the last close of the open file its create made, dups
# and children's copies included; never at a child's close, exit, exec or
# close_range while the writer still holds it; never after a write error;
# and no writer that forks, execs or spawns with its file open hangs.
#
# tests/helpers/pubcheck runs one case per call under its own deadline
# (a hang is a FAIL naming the step, and kvfsd is then restarted: a hung
# case may leave a daemon thread stuck).  Here: every case in a chain and
# in an open namespace; Python's subprocess.run, whose child runs
# close_range; cp of blocks from one mount to another whose inode numbers
# collide; and the cases again as an unprivileged user running its own
# kvfsd, as kvfsd(8) ACCESS CONTROL says writers do.
set -eu

T=publish
. "${top_srcdir:-.}/tests/fuse_lib.sh"
PC=$top_builddir/tests/helpers/pubcheck
PY=${PYTHON3:-python3}
if [ ! -x "$PC" ]; then
	echo "$T: $PC not built" >&2
	exit 1
fi
fuse_begin
trap pub_cleanup EXIT
# a hung case costs its deadline and a restart: more than the default
KVFSD_TIMEOUT=${KVFSD_TIMEOUT:-600}

SLOT=262144
CAP=$((256 * SLOT)) # the pool's capacity: past it, EFBIG
SIZE=200000
OPTS="slot_size=256K,slots=256"
CASES="fork fork-close fork-closerange exec exec-cloexec system
	system-cloexec spawn spawn-cloexec dup"

# ---- a second kvfsd (another mount, or another user's) ---------------------
# x_start AS DIR OPTS: kvfsd run through AS (empty: as we are) on DIR/mnt,
# state DIR/state, its own pool; X_DPID is the daemon.  1 if it did not
# mount (its log: DIR.log)
X_PID=
X_DPID=
X_MNT=
X_POOL=

x_start() {
	X_AS=$1
	X_DIR=$2
	X_OPTS=$3
	X_MNT=$X_DIR/mnt
	X_POOL=/dev/shm/kvfs-test-$T-$$-${X_DIR##*/}.pool
	mkdir -p "$X_MNT"
	$X_AS timeout -s TERM "$KVFSD_TIMEOUT" "$X_KVFSD" -f \
		-o "state=$X_DIR/state,pool=$X_POOL,layout=${KVFSD_LAYOUT:-chain},$X_OPTS" \
		"$X_MNT" >>"$X_DIR.log" 2>&1 &
	X_PID=$!
	wait_until 100 x_settled || true
	if gone "$X_PID" || ! is_mounted "$X_MNT"; then
		x_stop
		return 1
	fi
	X_DPID=$($X_AS sed -n 's/.*"pid":\([0-9]*\).*/\1/p' \
		"$X_MNT/.kvfs/nodes")
}

x_settled() { gone "$X_PID" || is_mounted "$X_MNT"; }

# x_stop [SIG]: stop it (SIGTERM, or SIG), unmount, drop its pool
x_stop() {
	[ -n "$X_PID" ] || return 0
	if [ -n "$X_DPID" ] && ! gone "$X_DPID"; then
		kill -"${1:-TERM}" "$X_DPID" 2>/dev/null
		wait_until 50 gone "$X_DPID" || kill -KILL "$X_DPID"
	fi
	# timeout(1) passes TERM on; a KILL would leave its child serving
	kill -TERM "$X_PID" 2>/dev/null || true
	wait "$X_PID" 2>/dev/null || true
	if is_mounted "$X_MNT"; then
		fusermount3 -u "$X_MNT" 2>/dev/null ||
			fusermount3 -u -z "$X_MNT" 2>/dev/null ||
			umount -l "$X_MNT"
	fi
	rm -rf "$X_POOL" "$X_POOL.d"
	X_PID=
	X_DPID=
}

pub_cleanup() {
	rc=$?
	set +e
	x_stop KILL
	(exit "$rc")
	fuse_cleanup
}

# ---- running the cases -----------------------------------------------------
blkno=0
# B: the next block name in namespace $1
next_name() {
	blkno=$((blkno + 1))
	B=$1/$(blk $blkno)
}

# pc LABEL CMD...: one pubcheck call, bounded by its own deadline and by
# timeout(1) should it get stuck itself.  Its output goes to a file, not
# a pipe: a hung case leaves children that hold it until kvfsd dies.
# 1 when the case hung (restart the daemon)
pc() {
	label=$1
	shift
	r=0
	timeout -s KILL 60 "$@" >"$tmp/pc.out" 2>&1 || r=$?
	out=$(cat "$tmp/pc.out")
	if [ $r = 0 ] && [ "${out%% *}" = ok ]; then
		ok "$label"
	else
		bad "$label: $out (exit $r)"
	fi
	case $out in
	*hung* | "") return 1 ;;
	esac
	return 0
}

# run_cases LABEL NSDIR RESTART AS PUBCHECK: every case in namespace
# NSDIR, run through AS; RESTART restarts the daemon after a hang
run_cases() {
	rl=$1
	rns=$2
	rre=$3
	ras=$4
	rpc=$5
	for c in $CASES; do
		next_name "$rns"
		pc "$rl: $c" $ras "$rpc" "$c" $SIZE "$B" || $rre
	done
	for c in many many-cloexec; do
		names=
		for k in 1 2 3 4 5 6 7 8 9 10; do
			next_name "$rns"
			names="$names $B"
		done
		# shellcheck disable=SC2086 # one path each
		pc "$rl: $c (10 writers)" $ras "$rpc" "$c" $SIZE $names || $rre
	done
	names=
	for k in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		next_name "$rns"
		names="$names $B"
	done
	# shellcheck disable=SC2086
	pc "$rl: close-open (20 files)" $ras "$rpc" close-open $SIZE $names ||
		$rre
	next_name "$rns"
	pc "$rl: ftruncate" $ras "$rpc" ftruncate $CAP "$B" || $rre
	next_name "$rns"
	pc "$rl: efbig-write" $ras "$rpc" efbig-write $CAP "$B" || $rre
	if timeout -s KILL 10 $ras stat "$rns" >/dev/null 2>&1; then
		ok "$rl: the mount still answers"
	else
		bad "$rl: the mount no longer answers"
		$rre
	fi
}

restart_root() {
	echo "# restarting kvfsd after a hang"
	kvfsd_kill9
	kvfsd_start "$OPTS"
}

# Python: open (O_CLOEXEC, as Python does), write half,
# subprocess.run(["true"]) (close_range in the child), not visible to
# another process, write the rest, close, whole.  The checker is a process
# started before the file is opened, so it holds no descriptor of it.
py_case() {
	r=0
	timeout -s KILL 30 "$PY" - "$2" $SIZE >"$tmp/py.out" 2>&1 <<'EOF' || r=$?
import errno, hashlib, os, subprocess, sys

path, size = sys.argv[1], int(sys.argv[2])
data = os.urandom(size)
CHECKER = r"""
import errno, hashlib, sys
for line in sys.stdin:
    try:
        with open(line.rstrip("\n"), "rb") as f:
            b = f.read()
        print(len(b), hashlib.sha256(b).hexdigest(), flush=True)
    except OSError as e:
        print(errno.errorcode.get(e.errno, e.errno), flush=True)
"""
chk = subprocess.Popen([sys.executable, "-c", CHECKER], text=True,
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def look():
    chk.stdin.write(path + "\n")
    chk.stdin.flush()
    return chk.stdout.readline().strip()


def put(fd, b):
    while b:
        b = b[os.write(fd, b):]


why = []
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
put(fd, data[:size // 2])
subprocess.run(["true"], check=True)
got = look()
if got != "ENOENT":
    why.append("after subprocess.run, the writer still open: visible: "
               + got)
try:
    put(fd, data[size // 2:])
except OSError as e:
    why.append("writing the rest: " + errno.errorcode[e.errno])
try:
    os.close(fd)
except OSError as e:
    why.append("close: " + errno.errorcode[e.errno])
got = look()
if got != "%d %s" % (size, hashlib.sha256(data).hexdigest()):
    why.append("after the close: " + got)
chk.stdin.close()
chk.wait()
if why:
    sys.exit("FAIL subprocess.run: " + "; ".join(why))
print("ok subprocess.run")
EOF
	out=$(cat "$tmp/py.out")
	if [ $r = 0 ]; then
		ok "$1"
	else
		bad "$1: $out (exit $r)"
	fi
	case $r in 124 | 137) return 1 ;; esac
	return 0
}

kvfsd_start "$OPTS"
X_KVFSD=$KVFSD

# ---- cp between two mounts -------------------------------------------------
# cp holds its source open while it closes the copy: the copy must be
# published all the same when the source, on another mount, has the same
# path in its namespace and the same inode number.  kvfsd hands inode
# numbers out in sequence, so pubcheck align (creates it aborts) moves
# mount A's well past B's before each source is written, then B's up to
# the source's, and the copy gets the source's number.  Where that fails,
# the cp still runs.
if x_start "" "$tmp/b" "$OPTS"; then
	mkdir "$MNT/cp" "$MNT/pad" "$X_MNT/cp" "$X_MNT/pad"
	last=$(stat -c %i "$X_MNT/pad")
	k=1
	same=0
	good=0
	cpwhy=
	while [ $k -le 32 ]; do
		src=$MNT/cp/$(blk $k)
		dst=$X_MNT/cp/$(blk $k)
		size=$((k * 4099))
		timeout -s KILL 60 "$PC" align $((last + 16)) "$MNT/pad" \
			>/dev/null 2>&1 || true
		"$FE" put "$src" $size >/dev/null
		ino=$(stat -c %i "$src")
		if timeout -s KILL 60 "$PC" align "$ino" "$X_MNT/pad" \
			>"$tmp/align.out" 2>&1; then
			same=$((same + 1))
		fi
		r=0
		timeout -s KILL 20 cp "$src" "$dst" || r=$?
		got=$("$FE" check "$dst" $size)
		if [ $r = 0 ] && [ "$got" = OK ]; then
			good=$((good + 1))
		elif [ -z "$cpwhy" ]; then
			cpwhy="block $k (inode $ino): cp exits $r, the copy: $got"
		fi
		last=$(stat -c %i "$dst" 2>/dev/null) || last=$ino
		k=$((k + 1))
	done
	if [ $good = 32 ]; then
		ok "cp between two mounts: 32 copies whole, $same under their source's inode number"
	else
		bad "cp between two mounts: $((32 - good)) of 32 copies wrong ($same under their source's inode number), the first: $cpwhy"
	fi
	[ $same -gt 0 ] ||
		echo "# no copy got its source's inode number: $(cat "$tmp/align.out")"
	x_stop || bad "second kvfsd's exit status"
else
	bad "a second kvfsd did not mount: $(tail -n 3 "$tmp/b.log")"
fi

# ---- as root (or whoever runs the test) ------------------------------------
mkdir "$MNT/chain"
expect chain "mkdir makes a chain namespace" \
	"$FE" getx "$MNT/chain" user.kvfs.layout
run_cases "chain" "$MNT/chain" restart_root "" "$PC"
mkdir "$MNT/open"
expect OK "an empty namespace made open" \
	"$FE" setx "$MNT/open" user.kvfs.layout open
run_cases "open" "$MNT/open" restart_root "" "$PC"

if command -v "$PY" >/dev/null 2>&1; then
	for ns in chain open; do
		next_name "$MNT/$ns"
		py_case "$ns: python subprocess.run" "$B" || restart_root
	done
	# the extended attributes of a file right after its writer's close
	# are the published block's (the writer's dentry is cached, so no
	# lookup waits for the publication: the getxattr must)
	for ns in chain open; do
		if timeout 60 "$PY" - "$MNT/$ns" <<'PYEOF'
import os, sys
d = sys.argv[1]
for i in range(200):
    p = os.path.join(d, "%064x" % (0x7a0000 + i))
    with open(p, "wb") as f:
        f.write(b"x" * 3000)
    if os.getxattr(p, "user.kvfs.refs") != b"0":
        sys.exit("refs of %s: %r" % (p, os.getxattr(p, "user.kvfs.refs")))
PYEOF
		then
			ok "$ns: user.kvfs.refs right after close, 200 times"
		else
			bad "$ns: user.kvfs.refs right after close"
		fi
	done
else
	echo "# python3 is missing: the subprocess.run case is skipped"
fi

# ---- as an unprivileged user with its own kvfsd ------------------------------
# The writers run as uid 65534 with nothing more; so does its kvfsd where
# fusermount3 can mount for it.  Where it cannot (no setuid in a
# container, /dev/fuse 0600), the daemon gets just what fusermount3 would
# use, CAP_DAC_OVERRIDE to open /dev/fuse and CAP_SYS_ADMIN to mount:
# still uid 65534, so the mount and every file are that user's.
user_why=
AS="setpriv --reuid=65534 --regid=65534 --clear-groups"
AS_MOUNT="$AS --inh-caps=+dac_override,+sys_admin"
AS_MOUNT="$AS_MOUNT --ambient-caps=+dac_override,+sys_admin"
if [ "$(id -u)" != 0 ]; then
	user_why="already running as uid $(id -u): the cases above were that"
elif ! command -v setpriv >/dev/null 2>&1; then
	user_why="setpriv not found"
else
	# the user needs a path to its mount and binaries it can run
	chmod 0755 "$tmp"
	mkdir "$tmp/u"
	cp "$KVFSD" "$PC" "$tmp/u/"
	chown -R 65534:65534 "$tmp/u"
	X_KVFSD=$tmp/u/kvfsd
	if ! $AS test -x "$X_KVFSD"; then
		user_why="$tmp is not reachable by uid 65534"
	elif x_start "$AS" "$tmp/u" "$OPTS"; then
		USER_D=$AS
	elif x_start "$AS_MOUNT" "$tmp/u" "$OPTS"; then
		USER_D=$AS_MOUNT
		echo "# uid 65534's kvfsd mounts with CAP_DAC_OVERRIDE and" \
			"CAP_SYS_ADMIN: $(grep -m 1 -e 'fuse: ' -e fusermount "$tmp/u.log")"
	else
		user_why="uid 65534 cannot mount here: $(tail -n 1 "$tmp/u.log")"
	fi
fi
restart_user() {
	echo "# restarting the user's kvfsd after a hang"
	x_stop KILL
	x_start "$USER_D" "$tmp/u" "$OPTS" || bad "the user's kvfsd restarts"
}
if [ -z "$user_why" ]; then
	$AS mkdir "$X_MNT/chain"
	run_cases "uid 65534" "$X_MNT/chain" restart_user "$AS" \
		"$tmp/u/pubcheck"
	x_stop || bad "the user's kvfsd exit status"
else
	echo "# SKIP the unprivileged half: $user_why"
fi

kvfsd_stop || bad "kvfsd exit status $?"
exit "$fail"

# fuse_lib.sh - sourced by tests/fuse_*.sh: a private mount directory,
# state directory and pool, kvfsd under timeout(1), and an EXIT trap that
# always stops the daemon and unmounts, whatever happened.
#
# The test sets T (its name) and calls fuse_begin first.  Then:
#   kvfsd_start [OPTS]   start on $MNT (state $STATE, pool $POOL, plus OPTS;
#                        $KVFSD_ARGS, split on blanks, before the mountpoint)
#                        and wait for the mount; namespaces made by mkdir
#                        are chain ones unless $KVFSD_LAYOUT says open;
#                        SKIP (77) when the first
#                        start finds mounting impossible here
#   kvfsd_stop [SIG]     SIGTERM (or SIG); returns the daemon's exit status
#   kvfsd_kill9          SIGKILL, then fusermount3 -u
#   fuse_abort MNT       abort MNT's FUSE connection (fusectl): what frees a
#                        killed daemon whose exit waits on the kernel
#   (and tests/lib.sh's ok, bad, skip, expect, wait_until, gone)
#   helper OUT CMD...    run CMD in the background, output to OUT; its pid
#                        in HPID; killed at exit if still running

. "${top_srcdir:-.}/tests/lib.sh"
KVFSD=$top_builddir/fuse/kvfsd
FE=$top_builddir/tests/helpers/fuse_errno

PID=
DPID=
HELPERS=
started=0

# the name of block K: 64 lowercase hex digits
blk() { printf '%064x' "$1"; }

is_mounted() { grep -q " $1 fuse" /proc/mounts; }

helper() {
	out=$1
	shift
	"$@" >"$out" 2>&1 &
	HPID=$!
	HELPERS="$HELPERS $HPID"
}

# A daemon killed by SIGKILL can stay in its exit for good when one of
# its threads waits in the kernel on a FUSE request that only the daemon
# would answer (a cache notification racing an open request): aborting
# the connection through fusectl fails those requests and lets it go.
# Never stats MNT (which could block): the device comes from mountinfo.
fuse_abort() {
	dev=$(awk -v m="$1" '$5 == m && / - fuse/ { print $3; exit }' \
		/proc/self/mountinfo)
	[ -n "$dev" ] || return 0
	ctl=/sys/fs/fuse/connections
	[ -e "$ctl/${dev#*:}/abort" ] ||
		mount -t fusectl fusectl "$ctl" 2>/dev/null || true
	[ -e "$ctl/${dev#*:}/abort" ] || return 0
	echo 1 >"$ctl/${dev#*:}/abort" 2>/dev/null || true
}

fuse_cleanup() {
	rc=$?
	set +e
	for h in $HELPERS; do kill -KILL "$h" 2>/dev/null; done
	if [ -n "$DPID" ] && ! gone "$DPID"; then
		kill -TERM "$DPID" 2>/dev/null
		wait_until 50 gone "$DPID" || kill -KILL "$DPID" 2>/dev/null
		wait_until 50 gone "$DPID" || fuse_abort "$MNT"
	fi
	[ -z "$PID" ] || kill -KILL "$PID" 2>/dev/null
	wait 2>/dev/null
	if is_mounted "$MNT"; then
		fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
	fi
	rm -rf "$POOL" "$POOL.d"
	# KVFS_TEST_LOG=FILE keeps the daemon's whole log, for debugging
	[ -z "${KVFS_TEST_LOG:-}" ] || cp "$tmp/kvfsd.log" "$KVFS_TEST_LOG"
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -s "$tmp/kvfsd.log" ]; then
		echo "--- kvfsd log" >&2
		tail -n 40 "$tmp/kvfsd.log" >&2
	fi
	rm -rf "$tmp"
	exit "$rc"
}

fuse_begin() {
	[ -c /dev/fuse ] || skip "/dev/fuse is missing"
	command -v fusermount3 >/dev/null 2>&1 || skip "fusermount3 not found"
	if [ ! -x "$KVFSD" ] || [ ! -x "$FE" ]; then
		echo "$T: $KVFSD or $FE not built" >&2
		exit 1
	fi
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/$T.XXXXXX")
	MNT=$tmp/mnt
	STATE=$tmp/state
	POOL=/dev/shm/kvfs-test-$T-$$.pool
	mkdir "$MNT"
	trap fuse_cleanup EXIT
	trap 'exit 1' INT TERM HUP
}

kvfsd_start() {
	timeout -s TERM "${KVFSD_TIMEOUT:-120}" "$KVFSD" -f \
		-o "state=$STATE,pool=$POOL,layout=${KVFSD_LAYOUT:-chain}${1:+,$1}" \
		${KVFSD_ARGS:-} "$MNT" \
		>>"$tmp/kvfsd.log" 2>&1 &
	PID=$!
	wait_until 100 kvfsd_settled || true
	if gone "$PID" || ! is_mounted "$MNT"; then
		if [ $started = 0 ] && gone "$PID" &&
			grep -Eq 'fuse: |fusermount' "$tmp/kvfsd.log"; then
			why=$(tail -n 1 "$tmp/kvfsd.log")
			skip "mounting is not possible here: $why"
		fi
		echo "FAIL kvfsd did not mount $MNT" >&2
		exit 1
	fi
	started=1
	DPID=$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' "$MNT/.kvfs/nodes")
	[ -n "$DPID" ] || {
		echo "FAIL no pid in .kvfs/nodes" >&2
		exit 1
	}
}

kvfsd_settled() { gone "$PID" || is_mounted "$MNT"; }

kvfsd_stop() {
	kill -"${1:-TERM}" "$DPID"
	if ! wait_until 100 gone "$DPID"; then
		echo "FAIL kvfsd ignored SIG${1:-TERM}" >&2
		exit 1
	fi
	src=0
	wait "$PID" || src=$?
	PID=
	DPID=
	return $src
}

kvfsd_kill9() {
	kill -KILL "$DPID"
	wait_until 100 gone "$DPID" || fuse_abort "$MNT"
	wait "$PID" 2>/dev/null || true
	PID=
	DPID=
	fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT"
}

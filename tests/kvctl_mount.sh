#!/bin/sh
# kvctl with no -m, -s or KVFS_SOCKET finds the daemon of the one kvfs
# mounted (fuse.kvfs in /proc/mounts); with two mounted it names both and
# asks which (usage error, exit 2).  Other tests mount kvfs at the same
# time, so this one runs in a private mount namespace (unshare -m) where
# it hides every kvfs mount but its own; SKIP (77) where that is
# impossible.
T=kvctl_mount
if [ -z "${KVCTL_MOUNT_NS:-}" ]; then
	command -v unshare >/dev/null 2>&1 || {
		echo "$T: SKIP: no unshare(1)"
		exit 77
	}
	unshare -m --propagation private true 2>/dev/null || {
		echo "$T: SKIP: no private mount namespace here (needs root)"
		exit 77
	}
	KVCTL_MOUNT_NS=1 exec unshare -m --propagation private sh "$0" "$@"
fi

. "${top_srcdir:-.}/tests/fuse_lib.sh"
KVCTL=$top_builddir/src/kvctl/kvctl
unset KVFS_SOCKET
fuse_begin
# the second daemon's pool too, whatever happened; the status is
# fuse_cleanup's to report, so it is kept across the rm (set +e: under
# set -e the (exit) would end the trap before fuse_cleanup)
POOL2=/dev/shm/kvfs-test-$T-$$-2.pool
trap 'rc=$?; rm -rf "$POOL2" "$POOL2.d"; set +e; (exit $rc); fuse_cleanup' EXIT

# only in this namespace: the others' mounts stay where they are
awk '$3 == "fuse.kvfs" { print $2 }' /proc/mounts | while read -r m; do
	umount -l "$m" 2>/dev/null
done
n=$(awk '$3 == "fuse.kvfs"' /proc/mounts | wc -l)
[ "$n" -eq 0 ] || skip "cannot hide the other kvfs mounts ($n left)"

expect "exit 2" "no kvfs mounted: a usage error" \
	sh -c "'$KVCTL' status >/dev/null 2>&1 || echo \"exit \$?\""

kvfsd_start "slot_size=64K,slots=8"
mkdir "$MNT/one"
if "$KVCTL" ns list >"$tmp/ns.out" 2>"$tmp/ns.err" &&
	grep -q '^one ' "$tmp/ns.out"; then
	ok "one kvfs mounted: kvctl finds its daemon"
else
	bad "one kvfs mounted: $(cat "$tmp/ns.err" "$tmp/ns.out")"
fi
if "$KVCTL" ns list -m "$MNT" | grep -q '^one '; then
	ok "-m after the command"
else
	bad "-m after the command"
fi

# a second kvfs: kvctl must not guess
MNT2=$tmp/mnt2
mkdir "$MNT2"
timeout -s TERM 60 "$KVFSD" -f \
	-o "state=$tmp/state2,pool=$POOL2,slot_size=64K,slots=8" "$MNT2" \
	>>"$tmp/kvfsd2.log" 2>&1 &
PID2=$!
HELPERS="$HELPERS $PID2"
if wait_until 100 is_mounted "$MNT2"; then
	"$KVCTL" status >"$tmp/two.out" 2>"$tmp/two.err"
	rc=$?
	if [ "$rc" -eq 2 ] && grep -q "$MNT" "$tmp/two.err" &&
		grep -q "$MNT2" "$tmp/two.err"; then
		ok "two kvfs mounted: a usage error naming both"
	else
		bad "two kvfs mounted: exit $rc: $(cat "$tmp/two.err")"
	fi
	kill -TERM "$PID2"
	wait_until 100 gone "$PID2" || bad "the second kvfsd ignored SIGTERM"
else
	bad "the second kvfsd did not mount: $(tail -n 3 "$tmp/kvfsd2.log")"
fi
rm -rf "$POOL2" "$POOL2.d"
kvfsd_stop || bad "kvfsd: exit status after SIGTERM"
exit "$fail"

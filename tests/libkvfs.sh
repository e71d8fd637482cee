#!/bin/sh
# libkvfs (kvfs.h) against a real kvfsd: tests/check_libkvfs on a small
# pool, examples/engine twice (misses stored, then hit and verified), the
# pool's mode following ctl_mode, and the library's exported symbols.
set -eu

T=libkvfs
. "${top_srcdir:-.}/tests/fuse_lib.sh"

# ---- exports: kvfs.h's functions and nothing else -------------------------
SO=$top_builddir/src/libkvfs/.libs/libkvfs.so
if [ -e "$SO" ] && command -v nm >/dev/null 2>&1; then
	# type A is the version node (KVFS_1), not a symbol
	extra=$(nm -D --defined-only "$SO" | awk '$2 != "A" { print $3 }' |
		sed 's/@.*//' | grep -v '^kvfs_' || true)
	if [ -z "$extra" ]; then
		echo "ok   libkvfs.so exports kvfs_* only"
	else
		echo "FAIL libkvfs.so exports more: $extra" >&2
		exit 1
	fi
fi

fuse_begin
CHECK=$top_builddir/tests/check_libkvfs
ENGINE=$top_builddir/examples/engine

# check_libkvfs.c's POOL_SLOTS and SLOT_SIZE
kvfsd_start "slot_size=64K,slots=8"
expect 600 "the pool's mode is the socket's (0600)" stat -c %a "$POOL"
mkdir "$MNT/t" "$MNT/u" "$MNT/e"
expect OK "namespace e: 16 tokens a block (the engine's)" \
	"$FE" setx "$MNT/e" user.kvfs.block_tokens 16

if KVFS_MNT=$MNT "$CHECK"; then ok "check_libkvfs"; else bad "check_libkvfs"; fi

expect "blocks 6 hits 0 misses 6" "engine: a new prompt misses" \
	"$ENGINE" "$MNT" e 100 3
expect "blocks 6 hits 6 misses 0" "engine: again, every block hits" \
	"$ENGINE" "$MNT" e 100 3
expect "blocks 7 hits 6 misses 1" "engine: a longer prompt reuses its prefix" \
	"$ENGINE" "$MNT" e 120 3
expect 7 "the engine's blocks are files of the mount" \
	sh -c "ls '$MNT/e' | wc -l"

kvfsd_stop
kvfsd_start "slot_size=64K,slots=8,ctl_mode=0660"
expect 660 "ctl_mode=0660 makes the pool 0660" stat -c %a "$POOL"
kvfsd_stop

# ---- --no-mount: the same state and pool, served on the socket alone --------
SOCK=$STATE/ctl.sock
helper "$tmp/nomount.out" "$KVFSD" -f --no-mount \
	-o "state=$STATE,pool=$POOL,ctl_mode=0660" "$MNT"
npid=$HPID
sock_up() { [ -S "$SOCK" ] || gone "$npid"; }
wait_until 100 sock_up || true
if [ -S "$SOCK" ] && ! is_mounted "$MNT"; then
	ok "kvfsd --no-mount serves $SOCK and mounts nothing"
else
	bad "kvfsd --no-mount: $(tail -n 2 "$tmp/nomount.out")"
fi
expect "blocks 7 hits 7 misses 0" "--no-mount: the engine, on the socket, hits all" \
	"$ENGINE" "$SOCK" e 120 3
expect "blocks 8 hits 7 misses 1" "--no-mount: and stores what it misses" \
	"$ENGINE" "$SOCK" e 140 3
if KVFS_MNT=$SOCK "$CHECK"; then
	ok "--no-mount: check_libkvfs on the socket (kvfs_write through a slot)"
else
	bad "--no-mount: check_libkvfs on the socket"
fi
kill -TERM "$npid"
if wait_until 100 gone "$npid" && wait "$npid" && [ ! -e "$SOCK" ]; then
	ok "--no-mount: SIGTERM stops it, status 0, socket removed"
else
	bad "--no-mount: SIGTERM: $(tail -n 2 "$tmp/nomount.out")"
fi
exit "$fail"

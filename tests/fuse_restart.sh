#!/bin/sh
# kvfsd restarts: after kill -9 (and fusermount3 -u) a daemon on the same
# state and pool brings every sealed block back byte-identical and nothing
# that was being written; SIGTERM (and SIGINT) unmount cleanly (the mount
# leaves /proc/mounts, the control socket goes) and a restart recovers as
# well.
set -eu

T=fuse_restart
. "${top_srcdir:-.}/tests/fuse_lib.sh"
fuse_begin

N=40
kvfsd_start "slot_size=256K,slots=64"
R=$MNT/r
"$FE" mkdir "$R" >/dev/null
size() { echo $(($1 * 6151 % 262144 + 1)); }
k=1
while [ $k -le $N ]; do
	"$FE" put "$R/$(blk $k)" "$(size $k)" >"$tmp/put.out"
	[ "$(cat "$tmp/put.out")" = OK ] ||
		bad "put block $k: $(cat "$tmp/put.out")"
	k=$((k + 1))
done
# one block still being written when the daemon dies
helper "$tmp/w.out" \
	"$FE" wopen "$tmp/w.ready" "$tmp/w.go" 100000 "$R/$(blk 999)"
wait_until 100 test -e "$tmp/w.ready" || bad "writer got ready"

check_all() {
	bad_blocks=0
	k=1
	while [ $k -le $N ]; do
		[ "$("$FE" check "$R/$(blk $k)" "$(size $k)")" = OK ] ||
			bad_blocks=$((bad_blocks + 1))
		k=$((k + 1))
	done
	[ $bad_blocks = 0 ] && ok "$1: all $N blocks byte-identical" ||
		bad "$1: $bad_blocks of $N blocks wrong or missing"
}

kvfsd_kill9
touch "$tmp/w.go"
wait "$HPID" 2>/dev/null || true
is_mounted "$MNT" && bad "kill -9: fusermount3 -u left the mount" ||
	ok "kill -9, fusermount3 -u: unmounted"

kvfsd_start "slot_size=256K,slots=64"
check_all "after kill -9"
expect ENOENT "the block being written is gone" "$FE" check "$R/$(blk 999)" 1
grep -q "\"recovered\":$N," "$MNT/.kvfs/stats" && ok "stats: $N recovered" ||
	bad "stats after kill -9: $(cat "$MNT/.kvfs/stats")"
expect OK "its name is free" "$FE" put "$R/$(blk 999)" 1000

kvfsd_stop && ok "SIGTERM: exit status 0" || bad "SIGTERM: exit status"
is_mounted "$MNT" && bad "SIGTERM: still in /proc/mounts" ||
	ok "SIGTERM: gone from /proc/mounts"
[ ! -e "$STATE/ctl.sock" ] && ok "SIGTERM: control socket removed" ||
	bad "SIGTERM: control socket left"

# no geometry given: the existing pool's is adopted
kvfsd_start ""
check_all "after SIGTERM, default geometry"
expect OK "and the block written last" "$FE" check "$R/$(blk 999)" 1000
kvfsd_stop INT && ok "SIGINT: exit status 0" || bad "SIGINT: exit status"
is_mounted "$MNT" && bad "SIGINT: still mounted" || ok "SIGINT: unmounted"
exit $fail

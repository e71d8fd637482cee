#!/bin/sh
# Root kvfsd adopts only a pool it can trust: a pool file another user
# made beforehand under the name kvfsd would use is refused and left as
# it was; a symbolic link there is never followed, with -o reformat
# neither, and its target keeps its bytes; a pool writable by group or
# others is refused, as are a state directory that is a link, another
# user's, or writable by others, and a link at the control socket's path.
# A plain start still works (pool and socket 0600), and a restart adopts
# its own pool with its blocks.
set -eu

T=pool_adopt
. "${top_srcdir:-.}/tests/fuse_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (pools owned by another user)"
NOBODY=65534
if command -v setpriv >/dev/null 2>&1; then
	as_nobody() {
		setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"
	}
else
	skip "setpriv not found"
fi
fuse_begin
# the state directories' pool, never made by a refused start; the
# status is fuse_cleanup's to report, so it is kept across the rm (set +e:
# under set -e the (exit) would end the trap before fuse_cleanup)
SPOOL=$POOL-s
trap 'rc=$?; rm -rf "$SPOOL" "$SPOOL.d"; set +e; (exit $rc); fuse_cleanup' EXIT

G="slot_size=64K,slots=4"

# refused NAME GREP OPTS: kvfsd -f with OPTS exits 1 saying GREP, and
# mounts nothing
refused() {
	name=$1 msg=$2
	rc=0
	timeout 20 "$KVFSD" -f -o "$3" "$MNT" >"$tmp/r.out" 2>&1 || rc=$?
	if [ "$rc" != 1 ]; then
		bad "$name: exit $rc, want 1: $(cat "$tmp/r.out")"
	elif ! grep -q -- "$msg" "$tmp/r.out"; then
		bad "$name: no '$msg' in: $(cat "$tmp/r.out")"
	elif is_mounted "$MNT"; then
		bad "$name: mounted"
	else
		ok "$name: refused, '$msg'"
	fi
}

# ---- a pool another user made beforehand ----------------------------------
rm -rf "$POOL" "$POOL.d"
as_nobody sh -c 'umask 022; printf "nobody was here" >"$1"' sh "$POOL"
[ "$(stat -c %u "$POOL")" = $NOBODY ] || bad "nobody made the pool"
cp "$POOL" "$tmp/foreign"
for r in "" ",reformat"; do
	refused "another user's pool$r" "owned by uid $NOBODY" \
		"state=$STATE,pool=$POOL,$G$r"
	if cmp -s "$POOL" "$tmp/foreign" &&
		[ "$(stat -c %u:%a "$POOL")" = "$NOBODY:644" ]; then
		ok "another user's pool$r: left as it was"
	else
		bad "another user's pool$r: now $(stat -c %u:%a:%s "$POOL")"
	fi
done
rm -rf "$POOL" "$POOL.d"

# ---- a symbolic link at the pool's name ------------------------------------
printf 'precious bytes\n' >"$tmp/target"
cp "$tmp/target" "$tmp/target.orig"
ln -s "$tmp/target" "$POOL"
for r in "" ",reformat"; do
	refused "a link at the pool's name$r" "symbolic link" \
		"state=$STATE,pool=$POOL,$G$r"
	if cmp -s "$tmp/target" "$tmp/target.orig" && [ -L "$POOL" ]; then
		ok "a link at the pool's name$r: target intact, link kept"
	else
		bad "a link at the pool's name$r: target now \
$(stat -c %s "$tmp/target") bytes"
	fi
done
rm -rf "$POOL" "$POOL.d"

# ---- state directories -----------------------------------------------------
mkdir -m 0700 "$tmp/real"
ln -s "$tmp/real" "$tmp/link"
refused "a state directory that is a link" "symbolic link" \
	"state=$tmp/link,pool=$SPOOL,$G"
mkdir "$tmp/open"
chmod 0777 "$tmp/open"
refused "an other-writable state directory" "writable by group or others" \
	"state=$tmp/open,pool=$SPOOL,$G"
mkdir -m 0700 "$tmp/theirs"
chown $NOBODY:$NOBODY "$tmp/theirs"
refused "another user's state directory" "owned by uid $NOBODY" \
	"state=$tmp/theirs,pool=$SPOOL,$G"
made=$(ls -A "$tmp/real")$(ls -A "$tmp/open")$(ls -A "$tmp/theirs")
[ ! -e "$SPOOL" ] && [ -z "$made" ] &&
	ok "refused state directories: nothing made" ||
	bad "refused state directories: made $made $(ls "$SPOOL" 2>&1)"

# ---- a link at the control socket's path ----------------------------------
ln -s "$tmp/target" "$tmp/ctl.link"
refused "a link at the control socket's path" "symbolic link" \
	"state=$STATE,pool=$POOL,$G,ctl=$tmp/ctl.link"
cmp -s "$tmp/target" "$tmp/target.orig" && [ -L "$tmp/ctl.link" ] &&
	ok "control socket link: target intact" ||
	bad "control socket link: target or link changed"
rm -rf "$POOL" "$POOL.d"

# ---- a plain start, a restart ----------------------------------------------
kvfsd_start "$G"
expect 600 "pool 0600" stat -c %a "$POOL"
expect 600 "control socket 0600" stat -c %a "$STATE/ctl.sock"
"$FE" mkdir "$MNT/ns" >/dev/null
expect OK "a block" "$FE" put "$MNT/ns/$(blk 1)" 5000
kvfsd_stop || bad "SIGTERM: exit status"
kvfsd_start "$G"
expect OK "restart: own pool adopted, the block survives" \
	"$FE" check "$MNT/ns/$(blk 1)" 5000
kvfsd_stop || bad "SIGTERM: exit status"

# ---- our own pool, made writable by group or others -----------------------
for m in 0606 0660; do
	chmod $m "$POOL"
	refused "our pool at $m" "writable by" "state=$STATE,pool=$POOL,$G"
done
chmod 0600 "$POOL"
kvfsd_start "$G"
expect OK "back at 0600: adopted, the block survives" \
	"$FE" check "$MNT/ns/$(blk 1)" 5000
kvfsd_stop || bad "SIGTERM: exit status"
exit $fail

#!/bin/sh
# ctl_limits.sh - the control socket bounds what one client may hold and
# for how long it may sit idle (kvfsd(8): ctl_idle, ctl_uid_clients,
# ctl_leases, ctl_uid_leases, lease_max_ms; kvctl(1): leases).  Each
# check below failed before those limits existed:
#
#  - 300 idle connections held every slot, so any other client (an
#    engine included) was told EMFILE: now a newcomer takes the place of
#    the longest-idle one, and idle ones are closed after ctl_idle;
#  - a lease asked for 24 h got 24 h: now lease_max_ms;
#  - one connection took 4096 match leases: now ctl_leases;
#  - one user's flood of pins filled the store's 65536 leases, and every
#    match of every other user failed with EAGAIN until they expired: now
#    ctl_uid_leases stops the flood at its own uid;
#  - leases could not be listed, and anyone could release anyone's: now
#    kvctl leases lists them and only the owner's uid (or root) revokes.
#
# The other user is uid 65534 (root only; as another user the checks that
# need a second uid are skipped with a note).
set -eu

T=ctl_limits
. "${top_srcdir:-.}/tests/fuse_lib.sh"
KVCTL=$top_builddir/src/kvctl/kvctl
FLOOD=$top_builddir/tests/helpers/ctl_flood
for p in "$KVCTL" "$FLOOD"; do
	[ -x "$p" ] || {
		echo "$T: $p not built" >&2
		exit 1
	}
done
fuse_begin

SOCK=$tmp/ctl.sock
LEASE_MAX=60000 # longer than the flood below takes
CONN_LEASES=64
UID_LEASES=1000
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	AS="setpriv --reuid=65534 --regid=65534 --clear-groups"
	# the other user needs a path to the socket and programs it can run
	chmod 0755 "$tmp"
	cp "$KVCTL" "$tmp/kvctl"
	cp "$FLOOD" "$tmp/ctl_flood"
	chmod 0755 "$tmp/kvctl" "$tmp/ctl_flood"
	$AS test -x "$tmp/kvctl" || AS=
else
	AS=
fi
[ -n "$AS" ] || echo "note: not root (or $tmp unreachable): one uid only"

kvfsd_start "slot_size=64K,slots=16,ctl=$SOCK,ctl_mode=0666,ctl_idle=2,ctl_leases=$CONN_LEASES,ctl_uid_leases=$UID_LEASES,lease_max_ms=$LEASE_MAX"
[ -S "$SOCK" ] || {
	bad "no control socket at $SOCK"
	exit 1
}
K() { "$KVCTL" -s "$SOCK" "$@"; }
H=$(blk 1)
expect OK "a namespace" "$FE" mkdir "$MNT/ns"
expect OK "a block in it" "$FE" put "$MNT/ns/$H" 4096

# a field of a one-line JSON answer: "key":value or "key":"value"
field() { sed -n "s/.*\"$1\":\"\{0,1\}\([0-9A-Za-z_]*\).*/\1/p"; }

# as expect, but only stdout is compared: ctl_flood's last error message
# goes to stderr, and is shown on a failure
expect_out() {
	want=$1
	desc=$2
	shift 2
	got=$("$@" 2>"$tmp/err") || got="exit $?: $got"
	if [ "$got" = "$want" ]; then
		ok "$desc"
	else
		bad "$desc: want '$want', got '$got' ($(cat "$tmp/err"))"
	fi
}

# ---- lease_max_ms ---------------------------------------------------------
out=$(K pin -j -L 86400000 ns "$H") || true
L1=$(echo "$out" | field lease)
ms=$(echo "$out" | field lease_ms)
[ "$ms" = "$LEASE_MAX" ] && ok "a 24 h pin is granted for lease_max_ms" ||
	bad "a 24 h pin got lease_ms '$ms', want $LEASE_MAX: $out"
out=$(K renew -j -L 86400000 "$L1" 2>&1) || true
[ "$(echo "$out" | field lease_ms)" = "$LEASE_MAX" ] &&
	ok "and so is a 24 h renewal" || bad "renewal: $out"

# ---- kvctl leases: list and revoke ----------------------------------------
list=$(K leases 2>&1) || true
echo "$list" | grep -Eq "^$L1 +pin +$(id -u) " &&
	ok "kvctl leases shows the pin with its owner" ||
	bad "kvctl leases: $list"
K leases -j | grep -q "\"lease\":\"$L1\"" && ok "kvctl leases -j shows it" ||
	bad "kvctl leases -j: $(K leases -j 2>&1)"
if [ -n "$AS" ]; then
	OK_="$AS $tmp/kvctl -s $SOCK"
	out=$($OK_ leases revoke "$L1" 2>&1) && st=0 || st=$?
	[ "$st" = 1 ] && echo "$out" | grep -q 'belongs to uid' &&
		ok "another user may not revoke root's lease" ||
		bad "another user revoking: exit $st: $out"
	out=$($OK_ unpin "$L1" 2>&1) && st=0 || st=$?
	[ "$st" = 1 ] && ok "nor unpin it" || bad "another user unpinning: $out"
	L2=$($OK_ pin -j ns "$H" | field lease)
	$OK_ leases | grep -Eq "^$L2 +pin +65534 " &&
		ok "the other user's pin is listed as its own" ||
		bad "the other user's pin: $($OK_ leases 2>&1)"
	expect "revoked lease $L2" "the owner revokes its own lease" \
		$OK_ leases revoke "$L2"
fi
expect "revoked lease $L1" "the owner (or root) revokes a lease" \
	K leases revoke "$L1"
K leases | grep -q "^$L1 " && bad "lease $L1 still listed" ||
	ok "a revoked lease is gone"
out=$(K leases revoke "$L1" 2>&1) && st=0 || st=$?
[ "$st" = 1 ] && ok "revoking it again fails" || bad "revoke again: $out"

# ---- ctl_leases: one connection -------------------------------------------
expect_out "ok=$CONN_LEASES EAGAIN=$((100 - CONN_LEASES))" \
	"one connection holds ctl_leases match leases" \
	"$FLOOD" "$SOCK" repeat 100 match ns 60000 "$H"

# ---- ctl_uid_leases: a flood of pins --------------------------------------
# 66000 pins would fill the store's 65536 leases without the uid cap
FLOOD_AS=$FLOOD
[ -z "$AS" ] || FLOOD_AS="$AS $tmp/ctl_flood"
expect_out "ok=$UID_LEASES EAGAIN=$((66000 - UID_LEASES))" \
	"a flood of 24 h pins stops at ctl_uid_leases" \
	$FLOOD_AS "$SOCK" repeat 66000 pin ns 86400000 "$H"
if [ -n "$AS" ]; then
	expect_out "ok=1" "another user's match still works during the flood" \
		"$FLOOD" "$SOCK" repeat 1 match ns 60000 "$H"
	expect_out "ok=1" "and so does its pin" \
		"$FLOOD" "$SOCK" repeat 1 pin ns 1000 "$H"
fi

# ---- idle clients -----------------------------------------------------------
# 300 silent connections, more than the table's 256 slots, held 5 s
helper "$tmp/idle.out" "$FLOOD" "$SOCK" idle 300 5000 "$tmp/idle.ready"
wait_until 100 test -e "$tmp/idle.ready" || bad "idle clients never connected"
sleep 1.5 # past the 1 s a client must be idle before it makes room
out=$(K status -j 2>&1) && st=0 || st=$?
[ "$st" = 0 ] && ok "a real client gets in past 300 idle ones" ||
	bad "status with idle clients around: exit $st: $out"
wait_until 150 gone "$HPID" || bad "the idle helper did not finish"
out=$(cat "$tmp/idle.out")
case $out in
refused=*" closed="[1-9]*" open=0") ok "idle clients are closed: $out" ;;
*) bad "idle clients: $out" ;;
esac

kvfsd_stop || bad "kvfsd exit status $?"
exit "$fail"

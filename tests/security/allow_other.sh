#!/bin/sh
# kvfsd with allow_other: every local user reaches the mount, so the modes
# kvfsd reports must be enforced (it adds default_permissions).  Another
# user (uid 65534) lists and reads, and changes nothing: no namespace or
# block made, written, overwritten, removed, no attribute set.  Root, whose
# mount it is, still does all of it.
set -eu

T=allow_other
. "${top_srcdir:-.}/tests/fuse_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root, to act as another user"
command -v setpriv >/dev/null 2>&1 || skip "setpriv not found"
fuse_begin

# the other user; it needs a path to the mount and a helper it can run
AS="setpriv --reuid=65534 --regid=65534 --clear-groups"
chmod 0755 "$tmp"
cp "$FE" "$tmp/fe"
chmod 0755 "$tmp/fe"
$AS test -x "$tmp/fe" ||
	skip "$tmp is not reachable by uid 65534 (a parent directory's mode)"
OFE=$tmp/fe

SIZE=100000
kvfsd_start "slot_size=256K,slots=64,allow_other,ctl_mode=0660"
NS=$MNT/ns
B1=$NS/$(blk 1)
B2=$NS/$(blk 2)

# refused: EACCES from the kernel's mode checks (EPERM where the owner
# check applies); anything else, OK above all, is a hole
denied() {
	desc=$1
	shift
	got=$($AS "$OFE" "$@" 2>&1) || got="exit $?: $got"
	case $got in
	EACCES | EPERM) ok "$desc: $got" ;;
	*) bad "$desc: want EACCES or EPERM, got '$got'" ;;
	esac
}

# ---- what root sets up ----------------------------------------------------
expect OK "root makes a namespace" "$FE" mkdir "$NS"
expect OK "and an empty one" "$FE" mkdir "$MNT/empty"
expect OK "root writes a block" "$FE" put "$B1" $SIZE
[ "$(stat -c '%a %u' "$MNT" "$NS" "$B1" | tr '\n' ' ')" = \
	"755 0 755 0 444 0 " ] &&
	ok "root, namespace 0755, sealed block 0444, owned by the daemon's user" ||
	bad "modes: $(stat -c '%n %a %u' "$MNT" "$NS" "$B1" | tr '\n' ' ')"

# ---- what another user may do -----------------------------------------------
[ "$($AS ls "$NS")" = "$(blk 1)" ] && ok "another user lists a namespace" ||
	bad "another user lists a namespace"
expect OK "and reads a block" $AS "$OFE" check "$B1" $SIZE
expect OK "and maps it" $AS "$OFE" mmap "$B1" $SIZE
expect 512 "and reads an attribute" \
	$AS "$OFE" getx "$NS" user.kvfs.block_tokens

# ---- and may not ------------------------------------------------------------
denied "mkdir a namespace" mkdir "$MNT/theirs"
denied "create a block in root's namespace" put "$B2" $SIZE
denied "open root's block for writing" open "$B1" wo
denied "open it with O_TRUNC" open "$B1" trunc
denied "truncate it" truncate "$B1" 0
denied "overwrite it (unlink, create)" reput "$B1" $SIZE
denied "unlink it" unlink "$B1"
denied "rmdir a namespace" rmdir "$MNT/empty"
denied "rmdir one with blocks" rmdir "$NS"
denied "set block_tokens" setx "$MNT/empty" user.kvfs.block_tokens 64
denied "create in .kvfs" put "$MNT/.kvfs/$(blk 3)" 10
denied "open a .kvfs file for writing" open "$MNT/.kvfs/stats" wo

# ---- nothing changed ----------------------------------------------------------
expect ENOENT "no namespace was made" "$FE" check "$MNT/theirs/$(blk 1)" 1
expect ENOENT "no block was made" "$FE" check "$B2" $SIZE
expect OK "root's block is intact" "$FE" check "$B1" $SIZE
expect 512 "block_tokens unchanged" "$FE" getx "$MNT/empty" user.kvfs.block_tokens

# ---- modes and owners a shared mount cannot keep: EPERM, never 0 ------------
"${PYTHON3:-python3}" - "$MNT" <<'PYEOF' || bad "modes kvfs cannot keep"
import errno, os, sys
m = sys.argv[1] + "/open"
os.mkdir(m)
os.setxattr(m, "user.kvfs.layout", b"open")
def refused(what, fn, *a):
    try:
        fn(*a)
    except OSError as e:
        if e.errno == errno.EPERM:
            print("ok   %s: EPERM" % what)
            return
        sys.exit("FAIL %s: %s" % (what, e))
    sys.exit("FAIL %s: returned 0, and every user reads it" % what)
refused("a create of mode 0600", os.open, m + "/private",
        os.O_CREAT | os.O_WRONLY, 0o600)
refused("a mkdir of mode 0700", os.mkdir, m + "/privdir", 0o700)
fd = os.open(m + "/f", os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b"x" * 100)
os.close(fd)
refused("chmod 0600", os.chmod, m + "/f", 0o600)
refused("chown to another user", os.chown, m + "/f", 65534, -1)
refused("chmod 0700 of a directory", os.chmod, m, 0o700)
os.chmod(m + "/f", 0o644)  # what it is: nothing to refuse
assert not os.path.exists(m + "/private")
assert os.stat(m + "/f").st_mode & 0o777 == 0o644
print("ok   a create of 0644 and a chmod to the mode shown work")
os.unlink(m + "/f")
os.rmdir(m)
PYEOF

# ---- root still does everything ------------------------------------------------
expect OK "root sets block_tokens" \
	"$FE" setx "$MNT/empty" user.kvfs.block_tokens 64
expect OK "root writes another block" "$FE" put "$B2" $SIZE
expect OK "root unlinks it" "$FE" unlink "$B2"
expect OK "root removes a namespace" "$FE" rmdir "$MNT/empty"
expect OK "root unlinks its block" "$FE" unlink "$B1"
expect OK "root removes the emptied namespace" "$FE" rmdir "$NS"

kvfsd_stop || bad "kvfsd exit status $?"
exit "$fail"

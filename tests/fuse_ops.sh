#!/bin/sh
# kvfsd: every operation of the mount and every error it documents
# (kvfsd(8) ERRORS), on a private mount.  Exact errnos come from the
# tests/fuse_errno helper, which prints one word per operation.
set -eu

T=fuse_ops
. "${top_srcdir:-.}/tests/fuse_lib.sh"
fuse_begin

SLOT=262144
kvfsd_start "slot_size=256K,slots=256"
NS=$MNT/ns
B1=$NS/$(blk 1)
B2=$NS/$(blk 2)

# ---- the root and .kvfs ---------------------------------------------------
[ "$(ls -A "$MNT")" = ".kvfs" ] && ok "a fresh root holds .kvfs only" ||
	bad "a fresh root holds .kvfs only: $(ls -A "$MNT")"
[ "$(ls "$MNT/.kvfs" | tr '\n' ' ')" = "metrics nodes stats " ] &&
	ok ".kvfs holds metrics, nodes, stats" || bad ".kvfs listing"
expect EACCES "a .kvfs file is read-only" "$FE" open "$MNT/.kvfs/stats" wo
expect EPERM "unlink in .kvfs: EPERM" "$FE" unlink "$MNT/.kvfs/stats"
expect EPERM "mkdir in .kvfs: EPERM" "$FE" mkdir "$MNT/.kvfs/x"
expect EPERM "rmdir .kvfs: EPERM" "$FE" rmdir "$MNT/.kvfs"
expect EPERM "a file in the root: EPERM" "$FE" create "$MNT/$(blk 1)"
expect ENOENT "a missing namespace: ENOENT" "$FE" check "$MNT/nons/$(blk 1)" 1

# ---- namespaces ------------------------------------------------------------
expect OK "mkdir makes a namespace" "$FE" mkdir "$NS"
expect EEXIST "mkdir again: EEXIST" "$FE" mkdir "$NS"
expect EINVAL "a namespace name may not start with a dot" "$FE" mkdir "$MNT/.ns"
expect EPERM "namespaces do not nest" "$FE" mkdir "$NS/$(blk 77)"
expect EINVAL "nor hold other names" "$FE" mkdir "$NS/sub"
expect 512 "a namespace's block_tokens" "$FE" getx "$NS" user.kvfs.block_tokens
expect OK "mkdir nsb" "$FE" mkdir "$MNT/nsb"
expect OK "block_tokens of an empty namespace can be set" \
	"$FE" setx "$MNT/nsb" user.kvfs.block_tokens 64
expect 64 "and reads back" "$FE" getx "$MNT/nsb" user.kvfs.block_tokens
expect EINVAL "block_tokens 0: EINVAL" \
	"$FE" setx "$MNT/nsb" user.kvfs.block_tokens 0
expect EINVAL "block_tokens not a number: EINVAL" \
	"$FE" setx "$MNT/nsb" user.kvfs.block_tokens 12x
expect OK "a block in nsb" "$FE" put "$MNT/nsb/$(blk 1)" 10
expect 64 "its ntokens follow" "$FE" getx "$MNT/nsb/$(blk 1)" user.kvfs.ntokens
expect ENOTEMPTY "block_tokens of a namespace with blocks: ENOTEMPTY" \
	"$FE" setx "$MNT/nsb" user.kvfs.block_tokens 128
expect EOPNOTSUPP "block_tokens is a namespace's only" \
	"$FE" setx "$MNT/nsb/$(blk 1)" user.kvfs.block_tokens 128

# ---- a block's life --------------------------------------------------------
expect OK "create, write, close" "$FE" put "$B1" 200000
expect OK "a block exactly one slot long" "$FE" put "$B2" $SLOT
expect OK "read back" "$FE" check "$B1" 200000
expect OK "read back a full slot" "$FE" check "$B2" $SLOT
"$FE" gen "$B1" 200000 >"$tmp/b1"
cmp -s "$tmp/b1" "$B1" && ok "cmp with the bytes written" || bad "cmp"
dd if="$B1" of="$tmp/dd1" bs=1000 skip=37 count=50 2>/dev/null
dd if="$tmp/b1" of="$tmp/dd2" bs=1000 skip=37 count=50 2>/dev/null
cmp -s "$tmp/dd1" "$tmp/dd2" && [ -s "$tmp/dd1" ] &&
	ok "pread through dd skip" || bad "pread through dd skip"
expect OK "pread at an odd offset" "$FE" pread "$B1" 123457 54321
expect OK "mmap reads every byte" "$FE" mmap "$B1" 200000
if [ "$(stat -c '%a %s %h %F' "$B1")" = "444 200000 1 regular file" ]; then
	ok "stat: 0444, size, one link"
else
	bad "stat: $(stat -c '%a %s %h %F' "$B1")"
fi
now=$(date +%s)
mt=$(stat -c %Y "$B1")
[ $((now - mt)) -ge 0 ] && [ $((now - mt)) -lt 120 ] &&
	ok "mtime is the seal time" || bad "mtime $mt, now $now"

# ---- errors of a block -----------------------------------------------------
expect EINVAL "a short name: EINVAL" "$FE" create "$NS/abc"
expect EINVAL "an uppercase name: EINVAL" "$FE" create \
	"$NS/$(blk 255 | tr a-f A-F | sed 's/0/F/')"
expect EINVAL "a non-hex name: EINVAL" \
	"$FE" create "$NS/$(blk 3 | sed 's/^0/g/')"
expect EINVAL "65 characters: EINVAL" "$FE" create "$NS/0$(blk 3)"
expect EINVAL "a bad name even to look at: EINVAL" "$FE" check "$NS/abc" 1
expect EEXIST "a second create: EEXIST" "$FE" create "$B1"
expect EPERM "open a sealed block for writing: EPERM" "$FE" open "$B1" wo
expect EPERM "open it read-write: EPERM" "$FE" open "$B1" rw
expect EPERM "open it with O_TRUNC: EPERM" "$FE" open "$B1" trunc
expect EPERM "truncate it: EPERM" "$FE" truncate "$B1" 10
if chmod 0644 "$B1" 2>/dev/null || touch "$B1" 2>/dev/null; then
	bad "chmod or touch of a sealed block succeeded"
else
	ok "chmod and touch of a sealed block fail"
fi
expect EPERM "rename: EPERM" "$FE" rename "$B1" "$NS/$(blk 99)"
expect OK "a block larger than a slot spills, not refused" \
	"$FE" put "$NS/$(blk 9)" $((SLOT + 1))
expect OK "and reads back whole" "$FE" check "$NS/$(blk 9)" $((SLOT + 1))
expect OK "ftruncate while writing" "$FE" ftruncate "$NS/$(blk 10)" 1000
head -c 1000 /dev/zero | cmp -s - "$NS/$(blk 10)" &&
	ok "a hole reads as zeros" || bad "a hole reads as zeros"
expect EFBIG "ftruncate past the capacity (256 slots): EFBIG" \
	"$FE" ftruncate "$NS/$(blk 11)" $((256 * SLOT + 1))

# ---- a block being written is invisible ----------------------------------
W=$NS/$(blk 20)
helper "$tmp/w.out" "$FE" wopen "$tmp/w.ready" "$tmp/w.go" 5000 "$W"
wait_until 100 test -e "$tmp/w.ready" || bad "writer got ready"
[ ! -e "$W" ] && ok "unsealed: not there for others" || bad "unsealed: visible"
expect ENOENT "unsealed: open ENOENT" "$FE" check "$W" 5000
expect EEXIST "unsealed: create EEXIST" "$FE" create "$W"
ls "$NS" | grep -q "$(blk 20)" && bad "unsealed: listed" ||
	ok "unsealed: not listed"
touch "$tmp/w.go"
wait "$HPID" || true
[ "$(cat "$tmp/w.out")" = OK ] && ok "its close seals it" ||
	bad "its close: $(cat "$tmp/w.out")"
expect OK "sealed: visible at once" "$FE" check "$W" 5000

# ---- a writer that dies seals nothing ---------------------------------------
"$FE" crash "$NS/$(blk 21)" 100000 >/dev/null 2>&1 || true
expect ENOENT "killed mid-write: nothing visible" "$FE" check "$NS/$(blk 21)" 1
"$FE" exit "$NS/$(blk 22)" 100000 3 >/dev/null 2>&1 || true
expect ENOENT "exit(3) unclosed: nothing visible" "$FE" check "$NS/$(blk 22)" 1
"$FE" exit "$NS/$(blk 23)" 100000 0 >/dev/null 2>&1 || true
expect OK "exit(0) unclosed: sealed" "$FE" check "$NS/$(blk 23)" 100000
"$FE" gen "$NS/$(blk 24)" 4321 >"$NS/$(blk 24)"
expect OK "a shell redirection seals" "$FE" check "$NS/$(blk 24)" 4321
expect OK "a dead writer's name is free again" "$FE" put "$NS/$(blk 21)" 100000

# ---- the seal keeps what the write left in the page cache -------------------
# (only a name someone was told is missing gets invalidated: dropping the
# writer's dentry would drop its inode and pages, and the first read would
# fetch the whole block again)
if command -v fincore >/dev/null 2>&1; then
	"$FE" gen "$NS/$(blk 25)" 65536 >"$NS/$(blk 25)"
	res=$(fincore -b -n -o RES "$NS/$(blk 25)" 2>/dev/null || echo 0)
	[ "${res:-0}" -gt 0 ] && ok "sealed: its written pages stay cached" ||
		bad "sealed: its written pages were dropped (RES ${res:-?})"
	expect OK "and read back right" "$FE" check "$NS/$(blk 25)" 65536
fi

# ---- readdir ---------------------------------------------------------------
expect OK "mkdir ns2" "$FE" mkdir "$MNT/ns2"
: >"$tmp/names"
k=1
while [ $k -le 150 ]; do
	n=$(blk $((1000 + k)))
	"$FE" put "$MNT/ns2/$n" $k >/dev/null
	echo "$n" >>"$tmp/names"
	k=$((k + 1))
done
sort "$tmp/names" >"$tmp/want"
ls "$MNT/ns2" | sort >"$tmp/got"
cmp -s "$tmp/want" "$tmp/got" && ok "readdir lists exactly the 150 written" ||
	bad "readdir: $(wc -l <"$tmp/got") names listed"
[ "$(ls -l "$MNT/ns2" | grep -c '^-r--r--r--')" = 150 ] &&
	ok "ls -l stats each" || bad "ls -l"
[ "$(ls -A "$MNT" | sort | tr '\n' ' ')" = ".kvfs ns ns2 nsb " ] &&
	ok "the root lists the namespaces" || bad "root: $(ls -A "$MNT")"
[ "$(stat -c %h "$MNT")" = 6 ] && ok "root nlink = 2 + subdirectories" ||
	bad "root nlink $(stat -c %h "$MNT")"

# ---- xattrs ----------------------------------------------------------------
expect 200000 "user.kvfs.size" "$FE" getx "$B1" user.kvfs.size
"$FE" getx "$B1" user.kvfs.checksum | grep -Eq '^[0-9a-f]{8}$' &&
	ok "user.kvfs.checksum is 8 hex digits" || bad "user.kvfs.checksum"
expect 0 "user.kvfs.refs, unopened" "$FE" getx "$B1" user.kvfs.refs
expect 512 "user.kvfs.ntokens" "$FE" getx "$B1" user.kvfs.ntokens
expect ENODATA "user.kvfs.parent: none given" "$FE" getx "$B1" user.kvfs.parent
expect ENODATA "an unknown attribute" "$FE" getx "$B1" user.other
expect user.kvfs.size,user.kvfs.checksum,user.kvfs.refs,user.kvfs.ntokens \
	"listxattr of a block" "$FE" listx "$B1"
expect "$(cd "$STATE" && pwd -P)/ctl.sock" "user.kvfs.socket on the root" \
	"$FE" getx "$MNT" user.kvfs.socket
[ -S "$("$FE" getx "$MNT" user.kvfs.socket)" ] &&
	ok "the socket is there" || bad "no socket at user.kvfs.socket"
expect EPERM "user.kvfs.* are read-only" "$FE" setx "$B1" user.kvfs.size 1
expect EOPNOTSUPP "other attributes are not stored" "$FE" setx "$B1" user.x 1
if command -v getfattr >/dev/null 2>&1; then
	[ "$(getfattr --only-values -n user.kvfs.size "$B1")" = 200000 ] &&
		ok "getfattr reads user.kvfs.size" || bad "getfattr"
fi
helper "$tmp/h.out" "$FE" hold "$tmp/h.ready" "$tmp/h.go" 200000 "$B1"
wait_until 100 test -e "$tmp/h.ready" || bad "holder got ready"
expect 1 "user.kvfs.refs counts an open file" "$FE" getx "$B1" user.kvfs.refs

# ---- unlink, deferred while open ---------------------------------------------
expect OK "unlink a block held open" "$FE" unlink "$B1"
[ ! -e "$B1" ] && ok "its name is gone" || bad "its name is still there"
expect ENOENT "and it cannot be opened" "$FE" check "$B1" 200000
ls "$NS" | grep -q "$(blk 1)" && bad "unlinked: still listed" ||
	ok "unlinked: not listed"
touch "$tmp/h.go"
wait "$HPID" || true
[ "$(cat "$tmp/h.out")" = OK ] && ok "the holder reads it whole after unlink" ||
	bad "the holder after unlink: $(cat "$tmp/h.out")"
expect ENOENT "unlink again: ENOENT" "$FE" unlink "$B1"
expect OK "the name can be written again" "$FE" put "$B1" 200000
expect OK "and read" "$FE" check "$B1" 200000
expect OK "unlinked and written again while the old one is open" \
	"$FE" reput "$B1" 200000
expect OK "the new one is sealed" "$FE" check "$B1" 200000

# ---- rmdir -----------------------------------------------------------------
expect ENOTEMPTY "rmdir of a namespace with blocks: ENOTEMPTY" "$FE" rmdir "$NS"
expect OK "mkdir ns3" "$FE" mkdir "$MNT/ns3"
expect OK "rmdir of an empty namespace" "$FE" rmdir "$MNT/ns3"
expect ENOENT "rmdir again: ENOENT" "$FE" rmdir "$MNT/ns3"

# ---- statfs ----------------------------------------------------------------
# shellcheck disable=SC2046 # one positional parameter per field
set -- $(stat -f -c '%S %b %c %f %d' "$MNT")
[ "$1 $2 $3" = "4096 16384 256" ] &&
	ok "statfs: the pool (4 KiB x 16384, 256 files)" ||
	bad "statfs: $*"
[ "$5" -lt 256 ] && [ "$4" -lt 16384 ] &&
	ok "statfs: used slots are not free" ||
	bad "statfs free: $*"

# ---- .kvfs contents --------------------------------------------------------
grep -q '^kvfs_pool_slots 256$' "$MNT/.kvfs/metrics" &&
	grep -q '^kvfs_hits_total ' "$MNT/.kvfs/metrics" &&
	grep -q '^kvfs_seals_total ' "$MNT/.kvfs/metrics" &&
	grep -q '^# TYPE kvfs_blocks gauge' "$MNT/.kvfs/metrics" &&
	ok ".kvfs/metrics has the expected metrics" || bad ".kvfs/metrics"
if [ -n "$PYTHON3" ]; then
	cp "$MNT/.kvfs/stats" "$tmp/s1"
	"$FE" check "$B2" $SLOT >/dev/null
	"$FE" check "$B2" $SLOT >/dev/null
	cp "$MNT/.kvfs/stats" "$tmp/s2"
	if "$PYTHON3" - "$tmp/s1" "$tmp/s2" "$MNT/.kvfs/nodes" "$DPID" <<'EOF'
import json, sys
a = json.load(open(sys.argv[1]))
b = json.load(open(sys.argv[2]))
n = json.load(open(sys.argv[3]))
assert b["hits"] >= a["hits"] + 2, (a["hits"], b["hits"])
assert b["pool"]["slots"] == 256
names = [x["name"] for x in b["namespaces"]]
assert "ns" in names and "ns2" in names and "nsb" in names, names
assert len(n["nodes"]) == 1 and n["nodes"][0]["self"] is True
assert n["nodes"][0]["pid"] == int(sys.argv[4])
EOF
	then
		ok ".kvfs/stats and nodes parse; hits count reads"
	else
		bad ".kvfs/stats and nodes"
	fi
else
	grep -q '"hits":' "$MNT/.kvfs/stats" && ok ".kvfs/stats (grep)" ||
		bad ".kvfs/stats"
fi

# ---- a full pool of referenced blocks: ENOSPC, nothing lost ---------------
kvfsd_stop && ok "SIGTERM: exit 0" || bad "SIGTERM: exit status"
is_mounted "$MNT" && bad "SIGTERM: still mounted" || ok "SIGTERM: unmounted"
rm -rf "$POOL" "$POOL.d"
STATE=$tmp/state2
POOL=/dev/shm/kvfs-test-$T-$$-2.pool
kvfsd_start "slot_size=64K,slots=4"
E=$MNT/e
"$FE" mkdir "$E" >/dev/null
for k in 1 2 3 4; do "$FE" put "$E/$(blk $k)" 1000 >/dev/null; done
ls -l "$E" >/dev/null # the kernel caches all four entries
# three held by open descriptors, the fourth by a mapping alone
helper "$tmp/p.out" "$FE" hold "$tmp/p.ready" "$tmp/p.go" 1000 \
	"$E/$(blk 1)" "$E/$(blk 2)" "$E/$(blk 3)"
hold_pid=$HPID
helper "$tmp/m.out" "$FE" mhold "$tmp/m.ready" "$tmp/p.go" 1000 "$E/$(blk 4)"
wait_until 100 test -e "$tmp/p.ready" || bad "holder of three got ready"
wait_until 100 test -e "$tmp/m.ready" || bad "mapper got ready"
expect ENOSPC "every slot referenced (or mapped): ENOSPC" \
	"$FE" put "$E/$(blk 5)" 1000
touch "$tmp/p.go"
wait "$hold_pid" || true
wait "$HPID" || true
[ "$(cat "$tmp/p.out") $(cat "$tmp/m.out")" = "OK OK" ] &&
	ok "and all four are intact" ||
	bad "after ENOSPC: $(cat "$tmp/p.out") $(cat "$tmp/m.out")"
expect OK "released: the fifth evicts one" "$FE" put "$E/$(blk 5)" 1000
victim=
for k in 1 2 3 4; do
	[ "$("$FE" check "$E/$(blk $k)" 1000)" = ENOENT ] && victim=$(blk $k)
done
[ -n "$victim" ] && ok "one block was evicted" || bad "no block was evicted"
if [ -n "$victim" ]; then
	# its dentry was cached for an hour: the sweep must drop it
	wait_until 40 test ! -e "$E/$victim" &&
		ok "the evicted block's entry goes" ||
		bad "the evicted block still stats"
	expect OK "and its name can be written again" \
		"$FE" put "$E/$victim" 1000
fi

# ---- options and usage -----------------------------------------------------
rc=0
# a state and pool of the test's own even here: were the start not
# refused, nothing would be left under kvfsd's default names
"$KVFSD" -f -o "state=$tmp/s5,pool=$POOL-5,slot_size=5000" "$tmp" \
	>/dev/null 2>&1 || rc=$?
rm -rf "$POOL-5" "$POOL-5.d"
[ $rc = 2 ] && ok "a bad slot_size: exit 2" || bad "a bad slot_size: exit $rc"
rc=0
"$KVFSD" -f -o "state=$tmp/s3,pool=$POOL-3,slots=2,no_such_option" "$tmp" \
	>/dev/null 2>&1 || rc=$?
rm -rf "$POOL-3" "$POOL-3.d"
[ $rc = 2 ] && ok "an unknown option: exit 2" ||
	bad "an unknown option: exit $rc"
rc=0
"$KVFSD" >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] && ok "no mountpoint: exit 2" || bad "no mountpoint: exit $rc"
"$KVFSD" --help | grep -q 'slot_size=BYTES' && ok "--help" || bad "--help"
"$KVFSD" --version | grep -q '^kvfsd ' && ok "--version" || bad "--version"

# ---- mount.kvfs ------------------------------------------------------------
MK=$top_srcdir/fuse/mount.kvfs
line=$(sh "$MK" kvfs "$MNT" -f -o defaults,noauto,_netdev,nofail,slots=8 2>&1)
case $line in
*"-o fsname=kvfs,slots=8 $MNT") ok "mount.kvfs drops mount-only options" ;;
*) bad "mount.kvfs: $line" ;;
esac
kvfsd_stop || bad "SIGTERM: exit status"
# mount -t fuse.kvfs runs mount.fuse.kvfs from /sbin, else mount.fuse3,
# which runs "kvfs" from PATH: both calling conventions, without mount(8)
# (it clears PATH, so nothing but an installed kvfs could be found)
mkdir "$tmp/bin"
MKABS=$(cd "$(dirname "$MK")" && pwd)/mount.kvfs
ln -s "$MKABS" "$tmp/bin/kvfs"
ln -s "$MKABS" "$tmp/bin/mount.fuse.kvfs"
KVFSD=$(cd "$(dirname "$KVFSD")" && pwd)/kvfsd
export KVFSD
# mount.fuse3 adds dev,suid, which only root may use
M3=
if [ "$(id -u)" = 0 ]; then
	command -v mount.fuse3 >/dev/null 2>&1 && M3=mount.fuse3
	[ -n "$M3" ] || { [ -x /sbin/mount.fuse3 ] && M3=/sbin/mount.fuse3; } ||
		true
fi
for how in mount.fuse.kvfs mount.fuse3; do
	case $how in
	mount.fuse.kvfs) set -- "$tmp/bin/mount.fuse.kvfs" kvfs "$MNT" ;;
	*)
		[ -n "$M3" ] || continue
		set -- "$M3" kvfs "$MNT" -t fuse.kvfs
		;;
	esac
	rm -rf "$tmp/state4" "$POOL"
	o="state=$tmp/state4,pool=$POOL,slots=8,slot_size=64K,nofail,noauto"
	if PATH=$tmp/bin:$PATH "$@" -o "$o" 2>"$tmp/mount.err"; then
		grep -q "^kvfs $MNT fuse.kvfs " /proc/mounts &&
			ok "$how: mounted as fuse.kvfs" || bad "$how: type"
		DPID=$(sed -n 's/.*"pid":\([0-9]*\).*/\1/p' "$MNT/.kvfs/nodes")
		"$FE" mkdir "$MNT/m" >/dev/null
		expect OK "$how: serves blocks" "$FE" put "$MNT/m/$(blk 7)" 777
		fusermount3 -u "$MNT" && wait_until 100 gone "$DPID" &&
			ok "$how: unmount stops the daemon" ||
			bad "$how: unmount"
	else
		bad "$how: $(cat "$tmp/mount.err")"
	fi
done

exit $fail

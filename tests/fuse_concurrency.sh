#!/bin/sh
# kvfsd under concurrency: 4 writer and 16 reader processes on one
# namespace.  Writers race for a fifth of the names (exactly one create may
# win each); readers read by read, pread and mmap while blocks are being
# written, see whole sealed blocks or nothing, and check every byte (block
# bytes follow from block names, tests/fuse_pattern.h).
set -eu

T=fuse_concurrency
. "${top_srcdir:-.}/tests/fuse_lib.sh"
fuse_begin
ST=$top_builddir/tests/helpers/fuse_stress
[ -x "$ST" ] || {
	echo "$T: $ST not built" >&2
	exit 1
}

NBLOCKS=128
MAXSIZE=1048576
kvfsd_start "slot_size=1M,slots=160"
"$FE" mkdir "$MNT/c" >/dev/null

i=0
while [ $i -lt 16 ]; do
	helper "$tmp/r$i.out" timeout 60 \
		"$ST" reader "$MNT/c" $NBLOCKS $MAXSIZE 40
	eval "rpid$i=\$HPID"
	i=$((i + 1))
done
i=0
while [ $i -lt 4 ]; do
	helper "$tmp/w$i.out" timeout 60 \
		"$ST" writer "$MNT/c" $i 4 $NBLOCKS $MAXSIZE
	eval "wpid$i=\$HPID"
	i=$((i + 1))
done

written=0
exists=0
i=0
while [ $i -lt 4 ]; do
	p=
	eval "p=\$wpid$i"
	if wait "$p"; then
		# shellcheck disable=SC2046 # "written=N exists=M" -> N M
		set -- $(sed 's/[a-z]*=//g' "$tmp/w$i.out")
		written=$((written + $1))
		exists=$((exists + $2))
	else
		bad "writer $i: $(cat "$tmp/w$i.out")"
	fi
	i=$((i + 1))
done
# every block written once; each of the 26 shared ones lost by 3 writers
[ $written = $NBLOCKS ] && ok "every block written exactly once" ||
	bad "blocks written: $written, want $NBLOCKS"
[ $exists = 78 ] && ok "racing creates: EEXIST for all but one" ||
	bad "EEXIST count $exists, want 78"

i=0
while [ $i -lt 16 ]; do
	eval "p=\$rpid$i"
	wait "$p" || bad "reader $i: $(cat "$tmp/r$i.out")"
	i=$((i + 1))
done
[ $fail = 0 ] && ok "16 readers checked all $NBLOCKS blocks, every byte"

[ "$(ls "$MNT/c" | wc -l)" = $NBLOCKS ] && ok "all blocks listed" ||
	bad "listed: $(ls "$MNT/c" | wc -l)"
grep -q '"writing":0' "$MNT/.kvfs/stats" && ok "no block left half-written" ||
	bad "writing left: $(cat "$MNT/.kvfs/stats")"
kvfsd_stop && ok "clean stop" || bad "stop"
exit $fail

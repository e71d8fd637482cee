#!/bin/sh
# The layers' dependencies, measured on what the build produced
# (docs/ARCHITECTURE.md): libkvfs.so needs no RocksDB, FUSE, libibverbs or
# libcurl; kvfsd links no part of the scheduler; nothing outside kvstore/
# includes a kvstore/*_int.h; sched/cmd_bench.c includes sched.h and no
# private scheduler header.
T=deps
. "${top_srcdir:-.}/tests/lib.sh"

# ---- sources (needs nothing built) ------------------------------------------
leaks=$(cd "$top_srcdir" && grep -ln '#include "kvstore/[a-z_]*_int\.h"' \
	src/*/*.[ch] fuse/*.[ch] sched/*.[ch] tests/*.[ch] tests/helpers/*.[ch] \
	examples/*.c fuzz/*.c 2>/dev/null)
if [ -z "$leaks" ]; then
	ok "no kvstore/*_int.h outside kvstore/"
else
	bad "kvstore/*_int.h included from: $(echo $leaks)"
fi
priv=$(grep -n '#include "sched/[a-z_]*\.h"' "$top_srcdir/sched/cmd_bench.c" |
	grep -v 'sched/sched\.h\|sched/cli\.h')
if [ -z "$priv" ]; then
	ok "sched/cmd_bench.c uses sched.h (and cli.h) only"
else
	bad "sched/cmd_bench.c includes: $priv"
fi

# ---- binaries ---------------------------------------------------------------
command -v readelf >/dev/null 2>&1 || skip "no readelf (binutils)"
command -v nm >/dev/null 2>&1 || skip "no nm (binutils)"

so=$top_builddir/src/libkvfs/.libs/libkvfs.so
if [ -e "$so" ]; then
	needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
	case " $needed" in
	*" librocksdb"* | *" libfuse"* | *" libibverbs"* | *" libcurl"* | *" liburing"*)
		bad "libkvfs.so needs: $needed" ;;
	*) ok "libkvfs.so needs only: $needed" ;;
	esac
else
	bad "$so was not built"
fi

kvfsd=$top_builddir/fuse/.libs/kvfsd
[ -e "$kvfsd" ] || kvfsd=$top_builddir/fuse/kvfsd
if [ "${BUILD_DAEMON:-yes}" = no ]; then
	ok "kvfsd not built (--disable-daemon)"
elif [ -e "$kvfsd" ]; then
	sched=$(nm "$kvfsd" | awk '$3 ~ /^(sched_schedule|sched_open|sched_ev_apply|replay_)/ { print $3 }')
	if [ -z "$sched" ]; then
		ok "kvfsd links no scheduler code"
	else
		bad "kvfsd links: $(echo $sched)"
	fi
	if nm "$kvfsd" | grep -q ' sched_ev_encode$'; then
		ok "kvfsd has the event encoder"
	else
		bad "kvfsd lacks sched_ev_encode: is nm reading the right binary?"
	fi
else
	bad "$kvfsd was not built"
fi
exit "$fail"

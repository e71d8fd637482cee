#!/bin/sh
# kvfs.h's GPU calls against a real kvfsd: tests/check_gpu on a private
# mount.  Without a GPU it asserts the no-GPU answers (-ENODEV, or -ENOTSUP
# in a build without CUDA) on a live handle, which pass or fail here, and
# then SKIPs (77) for the device part it could not run.
set -eu

T=gpu
. "${top_srcdir:-.}/tests/fuse_lib.sh"

fuse_begin
CHECK=$top_builddir/tests/check_gpu

# check_gpu.c's POOL_SLOTS and SLOT_SIZE
kvfsd_start "slot_size=64K,slots=80"
mkdir "$MNT/t"

rc=0
KVFS_MNT=$MNT "$CHECK" >"$tmp/check.out" 2>&1 || rc=$?
cat "$tmp/check.out"
kvfsd_stop || bad "kvfsd exits 0"
case $rc in
0) ok "check_gpu, with the device part" ;;
77)
	ok "check_gpu without a device"
	[ "$fail" = 0 ] || exit 1
	skip "$(sed -n 's/^check_gpu: device part skipped: //p' "$tmp/check.out")"
	;;
*) bad "check_gpu (exit $rc)" ;;
esac
exit "$fail"

#!/bin/sh
# fuse/inode.c's unit test (tests/fuse_inode.c), run from the fuse tests
# so it needs no entry outside their section of Makefile.am.
set -eu

top_builddir=${top_builddir:-.}
prog=$top_builddir/tests/fuse_inode

if [ ! -x "$prog" ]; then
	echo "fuse_inode: $prog not built" >&2
	exit 1
fi
exec "$prog"

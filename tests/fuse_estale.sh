#!/bin/sh
# fuse_estale.sh - 200 processes rewrite published names of an open
# namespace at once with O_TRUNC and no retry, as llama.cpp's slot save
# does, while readers open them (kvfs(7), Publication): no open may fail
# with ESTALE (the kernel retries a redirected open only once) or any
# other error, no reader may see a short or mixed file, and every name
# ends as one whole version; with the write-back cache and with
# -o writethrough.  tests/fuse_estale.py drives one run.
set -eu

T=fuse_estale
. "${top_srcdir:-.}/tests/fuse_lib.sh"
PY=${PYTHON3:-python3}
command -v "$PY" >/dev/null 2>&1 || skip "python3 is missing"
SCRIPT=$top_srcdir/tests/fuse_estale.py
fuse_begin

for opts in "" writethrough; do
	rm -rf "$POOL" "$POOL.d"
	rm -rf "$STATE"
	KVFSD_LAYOUT=open kvfsd_start "slot_size=256K,slots=2048${opts:+,$opts}"
	mkdir "$MNT/ns"
	if "$PY" "$SCRIPT" "$MNT/ns" >"$tmp/out" 2>&1; then
		ok "${opts:-write-back}: $(tail -n 1 "$tmp/out" | sed "s/^ok *//")"
	else
		cat "$tmp/out" >&2
		bad "${opts:-write-back}: an open failed or a file was bad"
	fi
	kvfsd_stop || bad "kvfsd exits 0 at SIGTERM"
done
exit "$fail"

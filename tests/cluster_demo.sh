#!/bin/sh
# cluster_demo.sh - scripts/cluster-demo.sh, shortened: the whole flow on
# one machine (etcd, three kvfsd nodes, the conductor or two with a
# failover, emulated prefill and decode workers) on a 12-request trace.
# Checks that every request is accounted for, that requests completed
# with their blocks read on the decode node, that the prefill reused
# cached blocks, and, with two conductors, that the workers found the new
# leader after the old one was killed.  Timing is printed, not asserted.
#
# SKIP (77) without etcd, FUSE, python3 or kvconductor.  The demo's own
# trap stops and removes everything it started.
set -eu

T=cluster_demo
. "${top_srcdir:-.}/tests/lib.sh"
PY=${PYTHON3:-python3}
[ "${BUILD_CONDUCTOR:-yes}" != no ] && [ -x "$top_builddir/sched/kvconductor" ] ||
	skip "kvconductor was not built"
[ -x "$top_builddir/fuse/kvfsd" ] || skip "kvfsd was not built"
command -v etcd >/dev/null 2>&1 || skip "etcd not installed (Debian: etcd-server)"
[ -c /dev/fuse ] || skip "/dev/fuse is missing"
command -v fusermount3 >/dev/null 2>&1 || skip "fusermount3 not found"
command -v "$PY" >/dev/null 2>&1 || skip "python3 not found"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/$T.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP

rc=0
DEMO_REQUESTS=12 DEMO_RATE=3 DEMO_JSON="$tmp/m.json" \
	sh "$top_srcdir/scripts/cluster-demo.sh" "$top_builddir" \
	>"$tmp/out" 2>"$tmp/err" || rc=$?
cat "$tmp/out"
if [ $rc != 0 ]; then
	if grep -Eq 'fuse: |fusermount' "$tmp/err"; then
		skip "mounting is not possible here"
	fi
	cat "$tmp/err" >&2
	bad "cluster-demo.sh exited $rc"
	exit 1
fi
ok "cluster-demo.sh ran the trace and exited 0"

# check EXPR WHAT: a Python expression over m, the measured results
check() {
	if "$PY" -c "import json,sys; m=json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "$tmp/m.json"; then
		ok "$2"
	else
		bad "$2: $(cat "$tmp/m.json")"
	fi
}
check 'm["requests"] == 12' "12 requests arrived"
check 'm["completed"] + m["rejected"] + m["failed"] == 12' \
	"each request completed, was rejected or failed"
check 'm["errors"] == 0' "no worker error"
check 'm["completed"] >= 1 and len([1 for k in ("p50","p90","p99") if m["ttft"][k] is not None]) == 3' \
	"requests completed, with TTFT percentiles"
check 'm["written"] >= 1 and m["decode_local"] + m["decode_remote"] == m["blocks"]' \
	"prefills wrote new blocks, decodes read every block of theirs"
check 'm["reused_local"] + m["reused_remote"] >= 1' \
	"prefills reused cached blocks (the trace shares system prompts)"
check 'm["decode_missing"] == 0' "every decode read all its blocks"
if grep -q '^== 2 conductor' "$tmp/out"; then
	check 'm["failover"]["first_schedule_s"] is not None' \
		"after the leader's kill -9 a new leader scheduled"
else
	ok "one conductor (no leader election in this build): no failover"
fi
exit "$fail"

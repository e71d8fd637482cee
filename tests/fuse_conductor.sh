#!/bin/sh
# a single node feeds a conductor without etcd: kvfsd --conductor alone
# (node 0 by default) streams its blocks to a real `kvconductor serve` on
# loopback, which then indexes them.
set -eu

T=fuse_conductor
. "${top_srcdir:-.}/tests/fuse_lib.sh"
. "$top_srcdir/tests/conductor_lib.sh"
KVC=$top_builddir/sched/kvconductor
[ "${BUILD_CONDUCTOR:-yes}" != no ] && [ -x "$KVC" ] ||
	skip "kvconductor was not built"
[ -n "$PYTHON3" ] || skip "no python3"
fuse_begin

# not under timeout(1): the exit trap SIGKILLs the helpers it knows, and
# a SIGKILLed timeout would leave its child serving for good
conductor_start HELPERS kvc --events 127.0.0.1:0 --prefill 1 --decode 1 ||
	{ echo "FAIL kvconductor did not start: $(cat "$tmp/kvc.err")" >&2; exit 1; }
KPID=$CPID
port() { conductor_port kvc "$1"; }
HTTP=$(port listen)
EV=$(port events)
echo "conductor: http $HTTP, events $EV"

indexed() {
	"$PYTHON3" -c '
import json, sys, urllib.request
with urllib.request.urlopen("http://127.0.0.1:%s/v1/stats" % sys.argv[1],
                            timeout=5) as f:
    s = json.load(f)
sys.exit(0 if s["blocks_indexed"] == int(sys.argv[2]) else 1)' "$HTTP" "$1" 2>/dev/null
}

KVFSD_ARGS="--conductor 127.0.0.1:$EV" kvfsd_start "slot_size=64K,slots=16"
"$FE" mkdir "$MNT/m" >/dev/null
# the conductor keys a block by its hash's first 8 bytes (sched.h), so
# the two names differ there, not only in their last digits as blk's do
b1=$(printf '01%062x' 0)
b2=$(printf '02%062x' 0)
expect OK "block 1" "$FE" put "$MNT/m/$b1" 1000
expect OK "block 2" "$FE" put "$MNT/m/$b2" 2000
if wait_until 100 indexed 2; then
	ok "the conductor indexed both blocks of node 0"
else
	bad "the conductor did not index both blocks: $(tail -n 3 "$tmp/kvc.err")"
fi
grep -q "as node 0" "$tmp/kvfsd.log" && ok "kvfsd says it is node 0" ||
	bad "no 'as node 0' in the log"
kvfsd_stop && ok "SIGTERM: exit 0" || bad "SIGTERM: exit status"

# ---- a conductor with the cluster secret takes authenticated streams only
kill "$KPID" 2>/dev/null; wait "$KPID" 2>/dev/null || true
printf 'conductor-test-secret-0123456789\n' >"$tmp/secret"
printf 'some-other-secret-9876543210xyz\n' >"$tmp/wrong"
chmod 600 "$tmp/secret" "$tmp/wrong"
conductor_start HELPERS kvc --events 127.0.0.1:0 --prefill 1 --decode 1 \
	--secret-file "$tmp/secret" ||
	{ echo "FAIL kvconductor did not start: $(cat "$tmp/kvc.err")" >&2; exit 1; }
KPID=$CPID
HTTP=$(port listen)
EV=$(port events)
auth_failed() {
	"$PYTHON3" -c '
import json, sys, urllib.request
with urllib.request.urlopen("http://127.0.0.1:%s/v1/stats" % sys.argv[1],
                            timeout=5) as f:
    s = json.load(f)
sys.exit(0 if s["events"]["auth_failures"] >= int(sys.argv[2]) and
         s["blocks_indexed"] == 0 else 1)' "$HTTP" "$1" 2>/dev/null
}
KVFSD_ARGS="--conductor 127.0.0.1:$EV" kvfsd_start ""
wait_until 100 auth_failed 1 &&
	ok "a plain stream is refused: nothing indexed" ||
	bad "a plain stream was not refused"
kvfsd_stop || bad "SIGTERM: exit status"
KVFSD_ARGS="--conductor 127.0.0.1:$EV --secret-file $tmp/wrong" kvfsd_start ""
wait_until 100 auth_failed 2 &&
	ok "a stream with another secret is refused: nothing indexed" ||
	bad "a stream with another secret was not refused"
kvfsd_stop || bad "SIGTERM: exit status"
KVFSD_ARGS="--conductor 127.0.0.1:$EV --secret-file $tmp/secret" kvfsd_start ""
if wait_until 100 indexed 2; then
	ok "an authenticated stream of node 0 is indexed"
else
	bad "the authenticated stream was not indexed: $(tail -n 3 "$tmp/kvc.err")"
fi
kvfsd_stop && ok "SIGTERM: exit 0" || bad "SIGTERM: exit status"
exit "$fail"

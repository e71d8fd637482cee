#!/bin/sh
# kvbench: a short store benchmark (JSON well formed, every rate positive),
# a short demo (hit rate and the restart check printed), exit 2 on bad
# usage, no '\r' or escape in a log, the store's target verdicts
# consistent with its figures, and no pool file of these runs left in
# /dev/shm.
set -eu

T=kvbench_smoke
. "${top_srcdir:-.}/tests/lib.sh"
KVBENCH=$top_builddir/src/kvbench/kvbench

if [ ! -x "$KVBENCH" ]; then
	echo "kvbench_smoke: $KVBENCH not built" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvbench_smoke.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
# kvbench makes its own temporaries under TMPDIR: keep them in ours
TMPDIR=$tmp
export TMPDIR

shm_pools() {
	find /dev/shm -maxdepth 1 -name 'kvbench-*.pool' 2>/dev/null | sort
}
shm_pools >"$tmp/shm.before"

# ---- store ---------------------------------------------------------------
if "$KVBENCH" store --blocks 20000 --lookups 50000 --json \
	>"$tmp/store.json" 2>"$tmp/store.err"; then
	ok "store --json exits 0"
else
	bad "store --json exits 0: $(cat "$tmp/store.err")"
fi

OPS="seal lookup_hit lookup_miss match match_lease get_put"
if [ -n "$PYTHON3" ]; then
	# shellcheck disable=SC2086 # one argument per op
	if "$PYTHON3" - "$tmp/store.json" $OPS <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
for op in sys.argv[2:]:
    r = doc["ops"][op]
    assert r["n"] > 0, op
    assert r["kvfs_ops_s"] > 0 and r["rocksdb_ops_s"] > 0, op
    assert r["ratio"] > 0, op
assert doc["blocks"] == 20000 and doc["lookups"] == 50000
assert isinstance(doc["pass"], bool)
EOF
	then
		ok "store JSON parses, every op has positive rates"
	else
		bad "store JSON parses, every op has positive rates"
	fi
else
	good=1
	[ "$(grep -c . "$tmp/store.json")" = 1 ] || good=0
	for op in $OPS; do
		grep -Eq "\"$op\":\\{\"n\":[1-9][0-9]*,\"kvfs_ops_s\":[1-9][0-9]*,\"rocksdb_ops_s\":[1-9]" \
			"$tmp/store.json" || good=0
	done
	if [ $good = 1 ]; then
		ok "store JSON (grep) has positive rates for every op"
	else
		bad "store JSON (grep) has positive rates for every op"
	fi
fi

# ---- xfer ----------------------------------------------------------------
if "$KVBENCH" xfer --size 64k,1m --blocks 8 --rounds 1 --json \
	>"$tmp/xfer.json" 2>"$tmp/xfer.err"; then
	ok "xfer --json exits 0"
	if [ -n "$PYTHON3" ]; then
		if "$PYTHON3" - "$tmp/xfer.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
rs = doc["results"]
assert [r["size"] for r in rs] == [65536, 1048576], rs
for r in rs:
    assert r["blocks"] == 8 and r["transport"] in ("tcp", "rdma"), r
    assert r["engine_gbs"] > 0 and r["socket_gbs"] > 0 and r["ratio"] > 0, r
EOF
		then
			ok "xfer JSON: both sizes, positive rates"
		else
			bad "xfer JSON: both sizes, positive rates"
		fi
	fi
else
	bad "xfer --json exits 0: $(cat "$tmp/xfer.err")"
fi
# progress on a file: whole lines at most, never '\r' or an escape
if tr -d '\r\033' <"$tmp/xfer.err" | cmp -s - "$tmp/xfer.err"; then
	ok "xfer's stderr in a file has no '\\r' and no escape"
else
	bad "xfer's stderr in a file has '\\r' or an escape"
fi
xrc=0
"$KVBENCH" xfer --size 1000 >/dev/null 2>&1 || xrc=$?
if [ $xrc = 2 ]; then
	ok "xfer --size 1000 (not a multiple of 4096): usage error"
else
	bad "xfer --size 1000: exit 2 expected, got $xrc"
fi

# ---- demo ----------------------------------------------------------------
if "$KVBENCH" demo --requests 50 >"$tmp/demo.out" 2>"$tmp/demo.err"; then
	ok "demo exits 0"
else
	bad "demo exits 0: $(cat "$tmp/demo.err")"
fi
if grep -Eq 'block hit rate +[0-9.]+%' "$tmp/demo.out"; then
	ok "demo prints a hit rate"
else
	bad "demo prints a hit rate"
fi
if grep -Eq 'recovered [1-9][0-9]* sealed blocks, dropped 0' "$tmp/demo.out" &&
	grep -Eq 'verified ([0-9]+) of \1 byte-for-byte' "$tmp/demo.out"; then
	ok "demo restart recovers and verifies every block"
else
	bad "demo restart recovers and verifies every block"
fi

# ---- usage ---------------------------------------------------------------
for args in "store --no-such-option" "demo --slots" "demo --slot-size 5000" \
	"store --blocks x" "no-such-command"; do
	rc=0
	# shellcheck disable=SC2086
	"$KVBENCH" $args >/dev/null 2>"$tmp/usage.err" || rc=$?
	if [ $rc = 2 ] && [ "$(grep -c . "$tmp/usage.err")" = 1 ]; then
		ok "'$args' exits 2 with one line"
	else
		bad "'$args' exits 2 with one line (got $rc)"
	fi
done
if "$KVBENCH" store --help | grep -q -- '--block-bytes' &&
	"$KVBENCH" demo -h | grep -q -- '--slot-size'; then
	ok "subcommand help"
else
	bad "subcommand help"
fi

for o in -h --help -V --version "help store"; do
	# shellcheck disable=SC2086
	"$KVBENCH" $o >"$tmp/o.out" 2>"$tmp/o.err" && [ -s "$tmp/o.out" ] &&
		[ ! -s "$tmp/o.err" ] && ok "kvbench $o" || bad "kvbench $o"
done
"$KVBENCH" store --block-bytes 4K --help >/dev/null &&
	! "$KVBENCH" store --block-bytes 5K --help >/dev/null 2>&1 &&
	ok "--block-bytes takes a K suffix" || bad "--block-bytes K suffix"

# ---- targets: the verdict the store run printed ---------------------------
# Whether a target is met is a benchmark's verdict on a full run
# (docs/BENCHMARKS.md), never a timed test's: this short run on a shared
# machine proves nothing about speed.  What it checks is the verdict
# itself: every op with a target carries one, each agrees with the rates
# and the ratio beside it, and the run's "pass" is the AND of them.
if [ -n "$PYTHON3" ]; then
	if "$PYTHON3" - "$tmp/store.json" >"$tmp/verdict.out" 2>&1 <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
unit = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}
n = 0
allpass = True
for name, op in d["ops"].items():
    t = op.get("target")
    if t is None:
        assert op.get("pass") is None, name + ": a verdict without a target"
        continue
    want = True
    for part in t.split(","):
        m = re.fullmatch(r"\s*>=\s*([0-9.]+)([kMG]?)(/s|x)\s*", part)
        assert m, name + ": target not understood: " + t
        v = float(m.group(1)) * unit[m.group(2)]
        got = op["kvfs_ops_s"] if m.group(3) == "/s" else op["ratio"]
        want = want and got >= v
    assert op["pass"] == want, "%s: pass %s, but %s gives %s" % (
        name, op["pass"], t, want)
    allpass = allpass and want
    n += 1
assert n >= 3, "only %d targets" % n
assert d["pass"] == allpass, "run pass %s, ops say %s" % (d["pass"], allpass)
print("%d targets, each verdict agrees with its figures (met: %s)" % (n, allpass))
PY
	then
		ok "store: $(cat "$tmp/verdict.out")"
	else
		bad "store: target verdicts: $(tail -n 2 "$tmp/verdict.out")"
	fi
fi

# ---- leftovers -------------------------------------------------------------
shm_pools >"$tmp/shm.after"
if cmp -s "$tmp/shm.before" "$tmp/shm.after"; then
	ok "no pool left in /dev/shm"
else
	bad "pool left in /dev/shm: $(comm -13 "$tmp/shm.before" "$tmp/shm.after")"
fi
if [ -z "$(ls -d "$tmp"/kvbench-* 2>/dev/null || true)" ]; then
	ok "no temporary directory left"
else
	bad "temporary directory left: $(ls -d "$tmp"/kvbench-*)"
fi

exit "$fail"

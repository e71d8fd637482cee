#!/bin/sh
# kvbench engine on the Mooncake trace: its block hit rate, served by a
# real kvfsd whose pool holds every block, must equal the infinite-cache
# prefix hit rate computed here, independently, from the trace file alone
# (same integer counts, not a tolerance).
#
# The independent rule (trace.h, kvbench(1)): request by request, in file
# order, a request of input_length L names its first floor(L / 512)
# hash_ids; its hits are the longest prefix of them all named by earlier
# requests; then all of them count as named.  hit rate = hits / named.
set -eu

T=engine_trace
. "${top_srcdir:-.}/tests/fuse_lib.sh"

KVBENCH=$top_builddir/src/kvbench/kvbench
TRACE=$top_srcdir/../shared/traces/synthetic_trace.jsonl
BLOCK=4096

[ -r "$TRACE" ] || skip "no trace at $TRACE"
[ -n "$PYTHON3" ] || skip "python3 is needed for the independent count"
[ -x "$KVBENCH" ] || {
	echo "$T: $KVBENCH not built" >&2
	exit 1
}
fuse_begin

# ---- the expected counts, from the trace alone ----------------------------
"$PYTHON3" - "$TRACE" >"$tmp/expect" <<'EOF'
import json, sys
seen = set()
named = hits = 0
for line in open(sys.argv[1]):
    if not line.strip():
        continue
    r = json.loads(line)
    ids = r["hash_ids"][: r["input_length"] // 512]
    k = 0
    while k < len(ids) and ids[k] in seen:
        k += 1
    named += len(ids)
    hits += k
    seen.update(ids)
print(named, hits, len(seen))
EOF
read -r named hits unique <"$tmp/expect"
echo "trace: $named named blocks, $hits prefix hits, $unique distinct"

# a pool with room for every distinct block and some to spare: no eviction
slots=$((unique + 256))
KVFSD_TIMEOUT=900
kvfsd_start "slot_size=$BLOCK,slots=$slots"

if timeout 600 "$KVBENCH" engine "$MNT" --trace "$TRACE" \
	--block-bytes $BLOCK --json >"$tmp/out.json" 2>"$tmp/err"; then
	ok "engine served the trace"
else
	bad "engine served the trace: $(tail -n 3 "$tmp/err")"
	exit 1
fi
tail -n 1 "$tmp/err"

if "$PYTHON3" - "$tmp/out.json" "$named" "$hits" "$unique" <<'EOF'; then
import json, sys
doc = json.load(open(sys.argv[1]))
named, hits, unique = (int(x) for x in sys.argv[2:5])
got = (doc["blocks_named"], doc["blocks_hit"], doc["blocks_written"])
print("engine: %d named, %d hit, %d written; hit rate %.6f, expected %.6f"
      % (got + (doc["hit_rate"], hits / named)))
assert doc["evictions"] == 0, doc["evictions"]
assert doc["blocks_raced"] == 0
assert got == (named, hits, unique), (got, (named, hits, unique))
assert doc["bytes_read"] == hits * 4096
assert doc["requests"] == sum(1 for l in open(doc["trace"]) if l.strip())
EOF
	ok "hit rate equals the infinite-cache prefix hit rate ($hits/$named)"
else
	bad "hit rate equals the infinite-cache prefix hit rate"
fi

# the daemon agrees: every distinct block sealed once, in the namespace
if "$PYTHON3" - "$MNT/.kvfs/stats" "$unique" <<'EOF'; then
import json, sys
doc = json.load(open(sys.argv[1]))
ns = [n for n in doc["namespaces"] if n["name"] == "kvbench-engine"][0]
assert ns["blocks"] == int(sys.argv[2]), ns
assert ns["evictions"] == 0, ns
EOF
	ok "kvfsd holds $unique blocks, evicted none"
else
	bad "kvfsd holds $unique blocks, evicted none"
fi

exit $fail

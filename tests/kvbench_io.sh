#!/bin/sh
# kvbench io: a tiny run on a real mount, checking the shape of its output
# (table and JSON) and that it leaves no block and no tmpfs file behind.
# The numbers are not judged here: they are the benchmark's result.
set -eu

T=kvbench_io
. "${top_srcdir:-.}/tests/fuse_lib.sh"

KVBENCH=$top_builddir/src/kvbench/kvbench
[ -x "$KVBENCH" ] || {
	echo "$T: $KVBENCH not built" >&2
	exit 1
}
fuse_begin

shm_dirs() {
	find /dev/shm -maxdepth 1 -name 'kvbench-*' -type d 2>/dev/null | sort
}
shm_dirs >"$tmp/shm.before"

kvfsd_start "slot_size=64K,slots=64"

# ---- the table --------------------------------------------------------------
if timeout 120 "$KVBENCH" io "$MNT" --blocks 4 --rounds 2 \
	>"$tmp/io.out" 2>"$tmp/io.err"; then
	ok "io exits 0"
else
	bad "io exits 0: $(cat "$tmp/io.err")"
fi
for row in "write\+seal" "first read" "cold read" "warm read" "mmap read"; do
	num='[0-9]+\.[0-9]+'
	if grep -Eq "^$row +$num +$num +tmpfs [a-z]+ +[0-9.]+x" "$tmp/io.out"
	then
		ok "table row '$row'"
	else
		bad "table row '$row': $(cat "$tmp/io.out")"
	fi
done
[ "$(grep -Ec ' (PASS|MISS)$' "$tmp/io.out")" = 4 ] &&
	ok "four targets, each PASS or MISS" || bad "four targets"
for row in kvfs_map_batch kvfs_map memcpy "read\(\)"; do
	if grep -Eq "^$row +[0-9]+\.[0-9]+ +([0-9]+\.[0-9]+x|-)  [a-z]" \
		"$tmp/io.out"; then
		ok "map path row '$row'"
	else
		bad "map path row '$row': $(cat "$tmp/io.out")"
	fi
done
grep -Eq '^ratio map_batch/memcpy [0-9.]+x, target >= 0\.9x: (PASS|MISS)$' \
	"$tmp/io.out" && ok "map/memcpy ratio line" || bad "map ratio line"
grep -Eq '^[0-4] of 4 targets met\.$' "$tmp/io.out" && ok "targets line" ||
	bad "targets line"
grep -q 'posix_fadvise(DONTNEED)' "$tmp/io.out" &&
	ok "says how the cold read was made cold" || bad "cold method"

# ---- JSON ------------------------------------------------------------------
if timeout 120 "$KVBENCH" io "$MNT" --size 16k --blocks 3 --rounds 1 --json \
	>"$tmp/io.json" 2>"$tmp/io.err"; then
	ok "io --json exits 0"
else
	bad "io --json exits 0: $(cat "$tmp/io.err")"
fi
if [ -n "$PYTHON3" ]; then
	if "$PYTHON3" - "$tmp/io.json" <<'EOF'; then
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["block_bytes"] == 16384 and doc["blocks"] == 3, doc
assert doc["rounds"] == 1
assert 0 <= doc["cold_resident"] <= 1
for op in ("write_seal", "first_read", "cold_read", "warm_read", "mmap_read"):
    r = doc["ops"][op]
    assert r["kvfs_gb_s"] > 0 and r["tmpfs_gb_s"] > 0, op
    assert r["ratio"] > 0, op
    assert (r["target"] is None) == (op in ("mmap_read", "first_read")), op
    assert r["pass"] in (True, False, None), op
m = doc["map"]
assert m["map_batch_gb_s"] > 0 and m["map_gb_s"] > 0, m
assert m["memcpy_gb_s"] > 0 and m["read_gb_s"] > 0, m
assert m["baseline"] == "memcpy" and m["target"] == 0.9, m
assert abs(m["ratio"] - m["map_batch_gb_s"] / m["memcpy_gb_s"]) < 0.01, m
assert abs(m["ratio_map"] - m["map_gb_s"] / m["memcpy_gb_s"]) < 0.01, m
assert isinstance(m["pass"], bool)
assert isinstance(doc["pass"], bool)
EOF
		ok "io JSON has every op with positive rates"
	else
		bad "io JSON has every op with positive rates"
	fi
fi

# ---- errors, leftovers ------------------------------------------------------
rc=0
"$KVBENCH" io "$MNT" --size 128k >/dev/null 2>"$tmp/big.err" || rc=$?
[ $rc = 1 ] && grep -q 'slot size' "$tmp/big.err" &&
	ok "--size above the slot size: exit 1" ||
	bad "--size above the slot size: exit $rc"
rc=0
"$KVBENCH" io "$MNT" --blocks 65 >/dev/null 2>"$tmp/many.err" || rc=$?
[ $rc = 1 ] && grep -q 'do not fit' "$tmp/many.err" &&
	ok "more blocks than free slots: exit 1" ||
	bad "more blocks than free slots: exit $rc"
rc=0
"$KVBENCH" io >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] && ok "io without MOUNT: exit 2" || bad "io without MOUNT: $rc"

[ -z "$(ls -A "$MNT/kvbench-io")" ] && ok "no block left on the mount" ||
	bad "blocks left: $(ls "$MNT/kvbench-io" | head -n 3)"
shm_dirs >"$tmp/shm.after"
cmp -s "$tmp/shm.before" "$tmp/shm.after" && ok "no tmpfs directory left" ||
	bad "left in /dev/shm: $(comm -13 "$tmp/shm.before" "$tmp/shm.after")"

exit $fail

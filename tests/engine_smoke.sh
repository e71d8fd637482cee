#!/bin/sh
# kvconductor gen-trace and kvbench engine: the generated trace has the
# Mooncake fields and rules and is reproducible; the engine serves a
# trace kvconductor generated on a real mount with the hit rate the trace implies; a
# bad trace is exit 2 naming its line, and touches nothing; bad usage is
# exit 2 with one line.  The gen-trace checks run without a mount; the
# rest skip (77) where mounting is impossible.
set -eu

T=engine_smoke
. "${top_srcdir:-.}/tests/fuse_lib.sh"

KVBENCH=$top_builddir/src/kvbench/kvbench
[ -x "$KVBENCH" ] || {
	echo "$T: $KVBENCH not built" >&2
	exit 1
}
# the trace generator is kvconductor's (kvbench has none of its own)
[ "${BUILD_CONDUCTOR:-yes}" != no ] || skip "kvconductor not built"
gen() { "$top_builddir/sched/kvconductor" gen-trace "$@"; }
fuse_begin

# one line on stderr and exit status want
usage_is() {
	want=$1
	desc=$2
	shift 2
	rc=0
	"$@" >/dev/null 2>"$tmp/usage.err" || rc=$?
	if [ $rc = "$want" ] && [ "$(grep -c . "$tmp/usage.err")" = 1 ]; then
		ok "$desc"
	else
		bad "$desc: exit $rc, stderr: $(cat "$tmp/usage.err")"
	fi
}

# ---- gen-trace -------------------------------------------------------------
G=$tmp/gen.jsonl
if gen --requests 300 --seed 3 >"$G" &&
	[ "$(wc -l <"$G")" -eq 300 ]; then
	ok "gen-trace writes 300 lines"
else
	bad "gen-trace writes 300 lines"
fi
gen --requests 300 --seed 3 --output "$tmp/gen2.jsonl"
cmp -s "$G" "$tmp/gen2.jsonl" && ok "the same seed, the same bytes" ||
	bad "the same seed, the same bytes"
gen --requests 300 --seed 4 >"$tmp/gen4.jsonl"
cmp -s "$G" "$tmp/gen4.jsonl" && bad "another seed, another trace" ||
	ok "another seed, another trace"

if [ -n "$PYTHON3" ]; then
	if "$PYTHON3" - "$G" <<'EOF'; then
import json, sys
last = 0
pos = {}
for n, line in enumerate(open(sys.argv[1]), 1):
    r = json.loads(line)
    assert sorted(r) == ["hash_ids", "input_length", "output_length",
                         "timestamp"], (n, sorted(r))
    assert all(type(r[k]) is int and r[k] >= 0
               for k in ("timestamp", "input_length", "output_length"))
    assert len(r["hash_ids"]) == -(-r["input_length"] // 512), n
    assert r["timestamp"] >= last, n
    last = r["timestamp"]
    for i, h in enumerate(r["hash_ids"]):
        # prefix-chained: an id has one position and one parent
        key = (i, r["hash_ids"][i - 1] if i else None)
        assert pos.setdefault(h, key) == key, (n, h)
EOF
		ok "gen-trace lines have the four fields and keep the rules"
	else
		bad "gen-trace lines have the four fields and keep the rules"
	fi
else
	n='[0-9]+'
	shape="^\\{\"timestamp\": 0, \"input_length\": $n, \"output_length\": $n,"
	shape="$shape \"hash_ids\": \\[[0-9, ]*\\]\\}\$"
	head -n 1 "$G" | grep -Eq "$shape" && ok "gen-trace line shape (grep)" ||
		bad "gen-trace line shape (grep)"
fi
usage_is 2 "kvbench gen-trace is gone: exit 2" "$KVBENCH" gen-trace

# ---- bad traces: exit 2, the line named, the mount untouched ---------------
BADNS=badtrace
good=$(head -n 2 "$G")
bad_trace() {
	desc=$1
	line=$2
	want=$3
	printf '%s\n%s\n' "$good" "$line" >"$tmp/bad.jsonl"
	rc=0
	"$KVBENCH" engine "$tmp/nomount" --namespace $BADNS \
		--trace "$tmp/bad.jsonl" >/dev/null 2>"$tmp/bad.err" || rc=$?
	if [ $rc = 2 ] && [ "$(grep -c . "$tmp/bad.err")" = 1 ] &&
		grep -q "bad.jsonl:3: $want" "$tmp/bad.err"; then
		ok "bad trace, $desc: exit 2 naming line 3"
	else
		bad "bad trace, $desc: exit $rc: $(cat "$tmp/bad.err")"
	fi
}
# checked before the mount is looked at, so no mount is needed for these
bad_trace "bad JSON" '{"timestamp": 1, "input_length": 5' "bad JSON"
bad_trace "missing field" \
	'{"timestamp": 1, "input_length": 5, "hash_ids": [1]}' \
	'missing field "output_length"'
bad_trace "negative length" \
	'{"timestamp": 1, "input_length": -5, "output_length": 1, "hash_ids": []}' \
	"input_length is negative"
short='{"timestamp": 1, "input_length": 1025, "output_length": 1,'
bad_trace "ids against the length" "$short \"hash_ids\": [1, 2]}" \
	"2 hash_ids, but input_length 1025 needs 3"

# ---- usage -----------------------------------------------------------------
usage_is 2 "engine without MOUNT: exit 2" "$KVBENCH" engine
usage_is 2 "engine --lease-ms x: exit 2" "$KVBENCH" engine m --lease-ms x
usage_is 2 "engine --namespace .x: exit 2" "$KVBENCH" engine m --namespace .x
usage_is 1 "engine on a directory that is no mount: exit 1" \
	"$KVBENCH" engine "$tmp" --requests 1
"$KVBENCH" engine --help | grep -q -- '--lease-ms' && ok "engine --help" ||
	bad "engine --help"

# ---- on a mount --------------------------------------------------------------
kvfsd_start "slot_size=8K,slots=8192"

[ ! -e "$MNT/$BADNS" ] && ok "a bad trace made no namespace" ||
	bad "a bad trace made no namespace"
usage_is 1 "--block-bytes above the slot size: exit 1" \
	"$KVBENCH" engine "$MNT" --block-bytes 9000 --requests 1

# the generated file, with the hit rate its ids imply (no eviction here)
if timeout 300 "$KVBENCH" engine "$MNT" --trace "$G" --namespace gen \
	--block-bytes 8k --json >"$tmp/gen.json" 2>"$tmp/gen.err"; then
	ok "engine serves a generated trace file"
else
	bad "engine serves a generated trace file: $(tail -n 2 "$tmp/gen.err")"
fi
if [ -n "$PYTHON3" ]; then
	if "$PYTHON3" - "$tmp/gen.json" "$G" <<'EOF'; then
import json, sys
doc = json.load(open(sys.argv[1]))
seen, named, hits = set(), 0, 0
for line in open(sys.argv[2]):
    r = json.loads(line)
    ids = r["hash_ids"][: r["input_length"] // 512]
    k = 0
    while k < len(ids) and ids[k] in seen:
        k += 1
    named, hits = named + len(ids), hits + k
    seen.update(ids)
for key in ("requests", "blocks_named", "blocks_hit", "hit_rate",
            "bytes_read", "bytes_written", "requests_per_s", "read_mb_s",
            "write_mb_s", "elapsed_s", "evictions"):
    assert key in doc, key
assert doc["requests"] == 300
assert (doc["blocks_named"], doc["blocks_hit"]) == (named, hits), doc
assert doc["blocks_written"] == len(seen)
assert doc["bytes_written"] == len(seen) * 8192
EOF
		ok "engine JSON: the counts the generated trace implies"
	else
		bad "engine JSON: the counts the generated trace implies"
	fi
fi
# progress: plain lines on a pipe, the last one final
grep -q '^engine: 300/300 requests' "$tmp/gen.err" &&
	ok "progress ends with the final count" ||
	bad "progress ends with the final count: $(tail -n 1 "$tmp/gen.err")"
# and no terminal control in a file: no carriage return, no escape
if tr -d '\r\033' <"$tmp/gen.err" | cmp -s - "$tmp/gen.err"; then
	ok "progress in a file has no '\\r' and no escape"
else
	bad "progress in a file has '\\r' or an escape"
fi

# the default: a trace generated in the process, the table for people
if timeout 300 "$KVBENCH" engine "$MNT" --requests 50 --block-bytes 4k \
	>"$tmp/def.out" 2>"$tmp/def.err"; then
	ok "engine with its own generated trace"
else
	bad "engine with its own generated trace: $(tail -n 2 "$tmp/def.err")"
fi
for key in requests "blocks named" "block hit rate" "bytes reused" \
	"bytes written" throughput elapsed; do
	grep -q "^  $key  " "$tmp/def.out" || bad "summary lacks '$key'"
done
grep -Eq 'block hit rate +[0-9.]+%' "$tmp/def.out" &&
	ok "summary has every line" || bad "summary hit rate"

# a second run of the same requests finds every block cached
"$KVBENCH" engine "$MNT" --requests 50 --block-bytes 4k --json \
	>"$tmp/again.json" 2>/dev/null
grep -q '"hit_rate":1.000000' "$tmp/again.json" &&
	ok "the same requests again: every block hits" ||
	bad "the same requests again: $(cat "$tmp/again.json")"

# a block that is not what its name says is an error, exit 1: replace
# one with zeros (python3 for the O_EXCL create a shell cannot make)
if [ -n "$PYTHON3" ]; then
	name=$(ls "$MNT/kvbench-engine" | head -n 1)
	"$PYTHON3" - "$MNT/kvbench-engine/$name" <<'EOF'
import os, sys
os.unlink(sys.argv[1])
fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o444)
os.write(fd, bytes(4096))
os.close(fd)
EOF
	rc=0
	"$KVBENCH" engine "$MNT" --requests 50 --block-bytes 4k >/dev/null \
		2>"$tmp/corrupt.err" || rc=$?
	if [ $rc = 1 ] &&
		grep -q "$name differs from its KV bytes at offset 0" \
			"$tmp/corrupt.err"; then
		ok "a block with the wrong bytes: exit 1, named"
	else
		why=$(tail -n 1 "$tmp/corrupt.err")
		bad "a block with the wrong bytes: exit $rc: $why"
	fi
fi

exit $fail

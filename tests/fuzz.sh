#!/bin/sh
# fuzz.sh - build each libFuzzer target of fuzz/ with clang straight from
# the sources and run it for FUZZ_TIME seconds (default 10); a crash
# fails.  The targets: the transfer engine's frame parser and handshake
# (fuzz_wire), the block-event stream decoder and the FETCH frame's
# checks (fuzz_event), the conductor's request bodies (fuzz_body, when
# json-c is there), vLLM's
# KV event batches (fuzz_kvev, when msgpack-c is there), and the
# control socket's server over a real store (fuzz_ctl, when RocksDB is;
# a few command lines seed it).  SKIP (77)
# without a clang that links -fsanitize=fuzzer (Debian 12: clang +
# libclang-rt-14-dev).
set -u
srcdir=${top_srcdir:-.}
builddir=${top_builddir:-.}
CLANG=${CLANG:-clang}
FUZZ_TIME=${FUZZ_TIME:-10}

command -v "$CLANG" >/dev/null 2>&1 || { echo "SKIP: no $CLANG"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvfs-fuzz.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM

printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n)\n{ return 0; }\n' >"$tmp/probe.c"
if ! "$CLANG" -fsanitize=fuzzer "$tmp/probe.c" -o "$tmp/probe" \
	>"$tmp/probe.log" 2>&1; then
	echo "SKIP: $CLANG cannot link -fsanitize=fuzzer" \
		"(Debian: install libclang-rt-14-dev)"
	sed 's/^/  /' "$tmp/probe.log" | head -5
	exit 77
fi
crypto=$(pkg-config --cflags --libs libcrypto 2>/dev/null || echo -lcrypto)
s=$srcdir
fail=0

# run NAME SOURCES... [-- FLAGS...]
run() {
	name=$1
	shift
	# shellcheck disable=SC2068 # the sources and flags are lists
	if ! "$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined \
		-I"$builddir" -I"$srcdir" "$@" -o "$tmp/$name" \
		>"$tmp/$name.build" 2>&1; then
		echo "FAIL: cannot build $name"
		head -20 "$tmp/$name.build"
		fail=1
		return
	fi
	mkdir -p "$tmp/corpus-$name"
	TMPDIR=$tmp "$tmp/$name" -max_total_time="$FUZZ_TIME" -max_len=4096 \
		-artifact_prefix="$tmp/$name-" "$tmp/corpus-$name" \
		>"$tmp/$name.log" 2>&1
	rc=$?
	echo "$name: $(tail -1 "$tmp/$name.log")"
	if [ $rc -ne 0 ]; then
		echo "FAIL: $name exited $rc"
		grep -A20 'ERROR\|SUMMARY' "$tmp/$name.log" | head -40
		for a in "$tmp/$name"-crash-* "$tmp/$name"-leak-* \
			"$tmp/$name"-timeout-*; do
			[ -f "$a" ] && od -A x -t x1z "$a" | head -20
		done
		fail=1
	else
		echo "ok   $name: no crash in $FUZZ_TIME s"
	fi
}

# shellcheck disable=SC2086 # crypto is a list of flags
run fuzz_wire "$s/fuzz/fuzz_wire.c" "$s/kvstore/wire.c" "$s/kvstore/auth.c" \
	$crypto
# shellcheck disable=SC2086 # crypto is a list of flags
run fuzz_event "$s/fuzz/fuzz_event.c" "$s/sched/event.c" \
	"$s/sched/event_fetch.c" \
	"$s/src/common/crc32c.c" "$s/src/common/hash.c" \
	"$s/src/common/tokens.c" $crypto
if pkg-config --exists json-c 2>/dev/null; then
	# shellcheck disable=SC2046,SC2086 # lists of flags
	run fuzz_body "$s/fuzz/fuzz_body.c" "$s/sched/serve_body.c" \
		"$s/src/common/hash.c" "$s/src/common/tokens.c" \
		$(pkg-config --cflags --libs json-c) $crypto
else
	echo "SKIP part: no json-c, so no fuzz_body"
fi
# vLLM's KV event batches: msgpack-c is msgpack-c, or msgpack (Debian 12)
mp=""
for m in msgpack-c msgpack; do
	pkg-config --exists "$m" 2>/dev/null && mp=$m && break
done
if [ -n "$mp" ]; then
	mkdir -p "$tmp/corpus-fuzz_kvev"
	# seeds: [ts, [["AllBlocksCleared"], ["BlockRemoved", [h"0102", 5]]]]
	# and the same event as a map
	printf '\222\001\222\221\260AllBlocksCleared\222\254BlockRemoved\222\304\002\001\002\005' \
		>"$tmp/corpus-fuzz_kvev/seed1"
	printf '\222\001\221\202\244type\254BlockRemoved\254block_hashes\221\320\375' \
		>"$tmp/corpus-fuzz_kvev/seed2"
	# shellcheck disable=SC2046 # a list of flags
	run fuzz_kvev "$s/fuzz/fuzz_kvev.c" "$s/sched/kvev.c" \
		$(pkg-config --cflags --libs "$mp")
else
	echo "SKIP part: no msgpack-c, so no fuzz_kvev"
fi
if pkg-config --exists rocksdb 2>/dev/null; then
	mkdir -p "$tmp/corpus-fuzz_ctl"
	i=0
	for line in 'status' 'ns list' 'ns create x 16' 'ls m 0 10' \
		"match m $(printf '%064d' 1)" 'lease list' 'unpin 1' \
		'stat m 00' 'evict m'; do
		i=$((i + 1))
		printf '%s\n' "$line" >"$tmp/corpus-fuzz_ctl/seed$i"
	done
	# shellcheck disable=SC2046,SC2086 # lists of flags
	run fuzz_ctl "$s/fuzz/fuzz_ctl.c" "$s/fuse/ctl.c" "$s/fuse/ctl_cmd.c" \
		"$s/fuse/render.c" "$s/kvstore/pool.c" "$s/kvstore/index.c" \
		"$s/kvstore/store.c" "$s/kvstore/store_block.c" \
		"$s/kvstore/store_tab.c" "$s/kvstore/store_match.c" \
		"$s/kvstore/store_open.c" "$s/src/common/hash.c" \
		"$s/src/common/log.c" "$s/src/common/crc32c.c" \
		"$s/src/common/tokens.c" "$s/src/common/json.c" \
		"$s/src/common/ctlproto.c" "$s/src/common/net.c" \
		"$s/src/common/node_id.c" \
		$(pkg-config --cflags --libs rocksdb) $crypto -lpthread
else
	echo "SKIP part: no RocksDB, so no fuzz_ctl"
fi
exit $fail

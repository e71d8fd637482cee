#!/bin/sh
# Build fuzz/fuzz_wire.c with clang's libFuzzer straight from the sources
# and run it for ten seconds; a crash fails.  SKIP (77) without a clang
# that links -fsanitize=fuzzer (Debian 12: clang + libclang-rt-14-dev).
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

# shellcheck disable=SC2086 # crypto is a list of flags
"$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined \
	-I"$builddir" -I"$srcdir" \
	"$srcdir/fuzz/fuzz_wire.c" "$srcdir/kvstore/wire.c" \
	"$srcdir/kvstore/auth.c" $crypto -o "$tmp/fuzz_wire" || {
	echo "FAIL: cannot build the fuzzer"; exit 1; }

mkdir "$tmp/corpus"
"$tmp/fuzz_wire" -max_total_time="$FUZZ_TIME" -max_len=4096 \
	-artifact_prefix="$tmp/" "$tmp/corpus" >"$tmp/run.log" 2>&1
rc=$?
tail -3 "$tmp/run.log"
if [ $rc -ne 0 ]; then
	echo "FAIL: fuzz_wire exited $rc"
	grep -A20 'ERROR\|SUMMARY' "$tmp/run.log" | head -40
	for a in "$tmp"/crash-* "$tmp"/leak-* "$tmp"/timeout-*; do
		[ -f "$a" ] && od -A x -t x1z "$a" | head -20
	done
	exit 1
fi
exit 0

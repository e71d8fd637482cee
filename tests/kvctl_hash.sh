#!/bin/sh
# kvctl hash: input forms, output forms, and the exit status of bad input,
# for both schemes (kvfs, the default, and sglang).  Names are pinned in
# tests/check_hash.c (computed with tests/hash_ref.py).
set -eu

T=kvctl_hash
. "${top_srcdir:-.}/tests/lib.sh"
KVCTL=$top_builddir/src/kvctl/kvctl

if [ ! -x "$KVCTL" ]; then
	echo "kvctl_hash: $KVCTL not built" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvctl_hash.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# hash_ref.py llama3-8b 4 1 2 3 4 5 6 7 8 9 10
cat >"$tmp/want" <<'EOF'
1619866375d4acda39d6312b1e05d85f50a7be1171b26c088f2c354f8de51f34
ca36b31ae4aec98828ba4565de41684c91db58094045e2f5cdf37838006adf5a
EOF

kvh() { "$KVCTL" hash --namespace llama3-8b --block-tokens 4 "$@"; }

# check NAME: compare $tmp/out with $tmp/want
check() {
	if cmp -s "$tmp/out" "$tmp/want"; then ok "$1"; else bad "$1"; fi
}

kvh 1 2 3 4 5 6 7 8 9 10 >"$tmp/out"
check "argv tokens give the pinned names"

printf '1 2 3 4\n5 6 7 8\n9 10\n' | kvh >"$tmp/out"
check "stdin gives the same names as argv"

printf '1,2, 3\t4\n\n5,,6 ,7\r\n8, 9,10,' | kvh >"$tmp/out"
check "stdin mixing commas and whitespace"

kvh 1,2,3 "4 5" 6,7,8 9 >"$tmp/out"
check "argv mixing commas and whitespace"

kvh 1 2 3 4 5 6 7 8 >"$tmp/out"
check "a trailing partial block changes nothing"

"$KVCTL" hash -n llama3-8b -b 4 -- 1 2 3 4 5 6 7 8 >"$tmp/out"
check "short options and --"

: >"$tmp/want"
kvh </dev/null >"$tmp/out"
check "empty stdin gives no names"
kvh 1 2 3 >"$tmp/out"
check "fewer tokens than one block give no names"

# ---- --scheme: kvfs is the default, sglang has no seed --------------------
"$KVCTL" hash -c kvfs -n llama3-8b -b 4 1 2 3 4 5 6 7 8 9 10 >"$tmp/out"
printf '%s\n' 1619866375d4acda39d6312b1e05d85f50a7be1171b26c088f2c354f8de51f34 \
	ca36b31ae4aec98828ba4565de41684c91db58094045e2f5cdf37838006adf5a \
	>"$tmp/want"
check "-c kvfs is the default scheme"

# hash_ref.py --sglang 4 1 2 3 4 5 6 7 8 9 10
printf '%s\n' cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72 \
	4ebfa8a1f3c341517621838c6e1b9aa350307e3f00b3cbd1a07ef740f54396d6 \
	>"$tmp/want"
"$KVCTL" hash --scheme=sglang --block-tokens 4 1 2 3 4 5 6 7 8 9 10 \
	>"$tmp/out"
check "--scheme=sglang gives the pinned keys"
printf '1,2,3,4\n5 6 7 8\n9' | "$KVCTL" hash -c sglang -b 4 >"$tmp/out"
check "-c sglang from stdin"
# hash_ref.py --sglang 1 0: SHA256 of four 0x00 bytes, nothing before them
echo df3f619804a92fdb4057192dc43dd748ea778adc52bc498ce80524c014b81119 \
	>"$tmp/want"
"$KVCTL" hash -c sglang -b 1 0 >"$tmp/out"
check "-c sglang: page 0 hashes its tokens alone"
: >"$tmp/want"
"$KVCTL" hash -c sglang -b 4 1 2 3 >"$tmp/out"
check "-c sglang: fewer tokens than one page give no keys"

"$KVCTL" hash -c sglang -b 4 -j 1 2 3 4 5 6 7 8 9 >"$tmp/json"
if grep -q '^{"scheme":"sglang","block_tokens":4,"tokens":9,"blocks":\["cf97adeedb59[0-9a-f]*","4ebfa8a1f3c3[0-9a-f]*"\]}$' "$tmp/json"
then ok "-c sglang --json"; else bad "-c sglang --json: $(cat "$tmp/json")"; fi

# expect_fail NAME WANT_RC STDERR_PATTERN CMD...: exit code and message
expect_fail() {
	name=$1 want=$2 pat=$3
	shift 3
	rc=0
	"$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	if [ "$rc" -ne "$want" ]; then
		bad "$name: exit $rc, want $want"
	elif ! grep -q -e "$pat" "$tmp/err"; then
		bad "$name: stderr lacks '$pat':"
		cat "$tmp/err" >&2
	elif [ -s "$tmp/out" ]; then
		bad "$name: wrote to stdout"
	else
		ok "$name"
	fi
}

expect_fail "bad token abc (argv)" 2 'bad token "abc"' kvh 1 2 abc 4
expect_fail "bad token 99999999999 (argv)" 2 '"99999999999"' \
	kvh 1 99999999999
expect_fail "bad token 4294967296 (argv)" 2 '"4294967296".*out of range' \
	kvh 4294967296
expect_fail "bad token -1 (after --)" 2 'bad token "-1"' kvh -- -1

printf '1 2 abc 4\n' >"$tmp/in"
expect_fail "bad token abc (stdin)" 2 'bad token "abc"' sh -c \
	'"$1" hash -n ns -b 4 <"$2"' sh "$KVCTL" "$tmp/in"
printf '1\n99999999999\n' >"$tmp/in"
expect_fail "bad token 99999999999 (stdin)" 2 '"99999999999"' sh -c \
	'"$1" hash -n ns -b 4 <"$2"' sh "$KVCTL" "$tmp/in"

expect_fail "missing --namespace" 2 'namespace' \
	"$KVCTL" hash --block-tokens 4 1 2 3 4
expect_fail "missing --block-tokens" 2 'block-tokens' \
	"$KVCTL" hash --namespace ns 1 2 3 4
expect_fail "--block-tokens 0" 2 'block-tokens' "$KVCTL" hash -n ns -b 0 1
expect_fail "--block-tokens too large" 2 'block-tokens' \
	"$KVCTL" hash -n ns -b 1048577 1
expect_fail "--block-tokens abc" 2 'block-tokens' "$KVCTL" hash -n ns -b x 1
expect_fail "namespace with /" 2 'bad namespace' "$KVCTL" hash -n a/b -b 1 1
expect_fail "namespace .kvfs" 2 'bad namespace' "$KVCTL" hash -n .kvfs -b 1 1
expect_fail "empty namespace" 2 'bad namespace' "$KVCTL" hash -n '' -b 1 1
expect_fail "unknown option" 2 "unknown option '--frob'" \
	"$KVCTL" hash -n ns -b 1 --frob
expect_fail "unknown scheme" 2 'unknown --scheme "vllm" (kvfs or sglang)' \
	"$KVCTL" hash -c vllm -n ns -b 4 1 2 3 4
expect_fail "empty scheme" 2 'unknown --scheme ""' \
	"$KVCTL" hash --scheme= -n ns -b 4 1 2 3 4
expect_fail "scheme name is case-sensitive" 2 'unknown --scheme "SGLang"' \
	"$KVCTL" hash --scheme SGLang -b 4 1 2 3 4
expect_fail "-c without a value" 2 'hash' "$KVCTL" hash -n ns -b 4 -c
expect_fail "-c sglang refuses --namespace" 2 \
	'--namespace does not apply to --scheme=sglang' \
	"$KVCTL" hash -c sglang -n ns -b 4 1 2 3 4
expect_fail "-c sglang: missing --block-tokens" 2 'missing --block-tokens' \
	"$KVCTL" hash -c sglang 1 2 3 4
expect_fail "-c sglang: --block-tokens 0" 2 'block-tokens' \
	"$KVCTL" hash -c sglang -b 0 1
expect_fail "-c sglang: bad token" 2 'bad token "x"' \
	"$KVCTL" hash -c sglang -b 1 1 x
expect_fail "-c kvfs still needs --namespace" 2 'missing --namespace' \
	"$KVCTL" hash -c kvfs -b 4 1 2 3 4
expect_fail "unknown command" 2 'unknown command' "$KVCTL" frob
expect_fail "no command" 2 'usage' "$KVCTL"

# run-time failures are exit 1, not 2
expect_fail "unreadable stdin" 1 'reading tokens' sh -c \
	'"$1" hash -n ns -b 4 <"$2"' sh "$KVCTL" "$tmp"
if [ -w /dev/full ]; then
	rc=0
	kvh 1 2 3 4 >/dev/full 2>"$tmp/err" || rc=$?
	if [ "$rc" -eq 1 ] && grep -q 'writing output' "$tmp/err"
	then ok "write error"; else bad "write error: exit $rc"; fi
fi

# --json: same names, and it parses
kvh --json 1 2 3 4 5 6 7 8 9 10 >"$tmp/json"
if grep -q '"blocks":\["1619866375d4[0-9a-f]*","ca36b31ae4ae' "$tmp/json"
then ok "--json carries the names"; else bad "--json carries the names"; fi
if [ -n "$PYTHON3" ]; then
	if "$PYTHON3" -c 'import json,sys
d = json.load(sys.stdin)
assert d["namespace"] == "llama3-8b" and d["block_tokens"] == 4
assert d["tokens"] == 10 and len(d["blocks"]) == 2' <"$tmp/json"
	then ok "--json parses"; else bad "--json parses"; fi
	"$KVCTL" hash -n "$(printf 'q"\\\tü')" -b 1 -j 7 >"$tmp/json"
	if "$PYTHON3" -c 'import json,sys
d = json.load(sys.stdin)
assert d["namespace"] == "q\"\\\t\u00fc", d' <"$tmp/json"
	then ok "--json escapes the namespace"
	else bad "--json escapes the namespace"; fi
	"$KVCTL" hash -n ns -b 4 -j </dev/null >"$tmp/json"
	if "$PYTHON3" -c 'import json,sys
assert json.load(sys.stdin)["blocks"] == []' <"$tmp/json"
	then ok "--json with no blocks"; else bad "--json with no blocks"; fi
else
	echo "skip --json parsing (PYTHON3 not set)"
fi

if "$KVCTL" --help | grep -q 'hash' && "$KVCTL" hash --help |
	grep -q -e '--block-tokens'
then ok "--help"; else bad "--help"; fi
if "$KVCTL" help hash | grep -q -e '--namespace'
then ok "help hash"; else bad "help hash"; fi
if "$KVCTL" hash --help | grep -q -e '--scheme=scheme'
then ok "hash --help names --scheme"; else bad "hash --help names --scheme"; fi
if "$KVCTL" version | grep -q '^kvctl (kvfs) '
then ok "version"; else bad "version"; fi

# --help must say what kvctl(1) says: same synopsis, same option lines
MANDOC=${MANDOC:-}
top_srcdir=${top_srcdir:-.}
if [ -n "$MANDOC" ]; then
	bs=$(printf '\b')
	"$MANDOC" -Tascii "$top_srcdir/man/kvctl.1" | sed "s/.$bs//g" \
		>"$tmp/man"
	sed -n '/^SYNOPSIS/,/^DESCRIPTION/s/^ *kvctl /kvctl /p' "$tmp/man" \
		>"$tmp/man_syn"
	"$KVCTL" --help | sed -n 's/^\(usage:\)\{0,1\} *kvctl /kvctl /p' \
		>"$tmp/help_syn"
	if cmp -s "$tmp/man_syn" "$tmp/help_syn"; then
		ok "--help synopsis matches kvctl(1)"
	else
		bad "--help synopsis matches kvctl(1)"
		diff "$tmp/man_syn" "$tmp/help_syn" >&2 || :
	fi
	"$KVCTL" hash --help | sed -n 's/^ *\(-[a-z].*, --.*\)$/\1/p' \
		>"$tmp/help_opt"
	sed -n 's/^ *\(-[a-z].*, --.*\)$/\1/p' "$tmp/man" >"$tmp/man_opt"
	if [ -s "$tmp/help_opt" ] && cmp -s "$tmp/man_opt" "$tmp/help_opt"
	then ok "hash --help options match kvctl(1)"
	else
		bad "hash --help options match kvctl(1)"
		diff "$tmp/man_opt" "$tmp/help_opt" >&2 || :
	fi
else
	echo "skip --help vs kvctl(1) (MANDOC not set)"
fi

exit $fail

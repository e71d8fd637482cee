#!/bin/sh
# kvctl hash against tests/hash_ref.py, an independent implementation, on
# pseudo-random cases drawn with a fixed seed (the same cases every run):
# each case through both schemes, the kvfs chain and SGLang's page keys
# (-c sglang, the same tokens and B, no namespace).
set -eu

top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
KVCTL=$top_builddir/src/kvctl/kvctl
REF=$top_srcdir/tests/hash_ref.py
PYTHON3=${PYTHON3:-}
NCASES=50
SEED=20250101

if [ -z "$PYTHON3" ]; then
	echo "hash_crosscheck: SKIP: python3 not found (PYTHON3 is empty)"
	exit 77
fi
if [ ! -x "$KVCTL" ]; then
	echo "hash_crosscheck: $KVCTL not built" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hash_crosscheck.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# One case per line: ns TAB block_tokens TAB how TAB tokens.  The alphabet
# has multi-byte UTF-8 and a space but no tab or newline (the separators
# here); the first byte is never '.', which kvfs_ns_valid refuses.
"$PYTHON3" - "$SEED" "$NCASES" >"$tmp/cases" <<'EOF'
import random, sys
rng = random.Random(int(sys.argv[1]))
alpha = ["a", "z", "Q", "0", "9", "-", "_", ".", ":", " ",
         "\u00fc", "\u00e9", "\u2014", "\u4e2d", "\U0001f600"]
def token():
    r = rng.random()
    if r < 0.2:
        return rng.choice([0, 1, 255, 256, 65535, 65536, 2**31, 2**32 - 1])
    if r < 0.5:
        return rng.randrange(2**32 - 1024, 2**32)
    return rng.randrange(0, 2**32)
for i in range(int(sys.argv[2])):
    ns = "".join(rng.choice(alpha) for _ in range(rng.randint(1, 24)))
    if ns.startswith("."):
        ns = "n" + ns
    b = rng.randint(1, 64)
    toks = [str(token()) for _ in range(rng.randint(0, 300))]
    how = "stdin" if i % 2 else "argv"
    line = "%s\t%d\t%s\t%s\n" % (ns, b, how, " ".join(toks))
    sys.stdout.buffer.write(line.encode("utf-8"))
EOF

# SGLang's keys of every case, from the reference in one run (one python
# start, not fifty): $tmp/sg.N holds case N's keys, one per line.
"$PYTHON3" - "$REF" "$tmp" <<'EOF'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("hash_ref", sys.argv[1])
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
for n, line in enumerate(open(sys.argv[2] + "/cases", "rb"), 1):
    _, b, _, toks = line.rstrip(b"\n").split(b"\t")
    keys = ref.sglang_chain(int(b), [int(t) for t in toks.split()])
    with open("%s/sg.%d" % (sys.argv[2], n), "w") as f:
        f.write("".join(k + "\n" for k in keys))
EOF

n=0
named=0
fail=0
tab=$(printf '\t')
set -f # tokens are split on spaces below, never globbed
while IFS=$tab read -r ns b how toks; do
	n=$((n + 1))
	# shellcheck disable=SC2086
	"$PYTHON3" "$REF" "$ns" "$b" $toks >"$tmp/want"
	if [ "$how" = stdin ]; then
		# commas on stdin, to cross the stream parser as well
		echo "$toks" | tr ' ' ',' |
			"$KVCTL" hash -n "$ns" -b "$b" >"$tmp/got"
	else
		# shellcheck disable=SC2086
		"$KVCTL" hash -n "$ns" -b "$b" -- $toks >"$tmp/got"
	fi
	if ! cmp -s "$tmp/want" "$tmp/got"; then
		echo "FAIL case $n: ns='$ns' B=$b via $how" >&2
		diff "$tmp/want" "$tmp/got" >&2 || :
		fail=1
	fi
	# sglang: the other input path than the kvfs run above took
	cp "$tmp/sg.$n" "$tmp/want"
	if [ "$how" = stdin ]; then
		# shellcheck disable=SC2086
		"$KVCTL" hash -c sglang -b "$b" -- $toks >"$tmp/got"
	else
		echo "$toks" | "$KVCTL" hash --scheme=sglang -b "$b" >"$tmp/got"
	fi
	if ! cmp -s "$tmp/want" "$tmp/got"; then
		echo "FAIL case $n (sglang): B=$b" >&2
		diff "$tmp/want" "$tmp/got" >&2 || :
		fail=1
	fi
	# a case that names nothing proves nothing: count those that do
	[ ! -s "$tmp/want" ] || named=$((named + 1))
done <"$tmp/cases"

if [ "$n" -ne "$NCASES" ]; then
	echo "hash_crosscheck: ran $n cases, want $NCASES" >&2
	exit 1
fi
if [ "$named" -lt $((NCASES / 2)) ]; then
	echo "hash_crosscheck: only $named of $n cases name a page" >&2
	exit 1
fi
[ "$fail" -eq 0 ] && echo "hash_crosscheck: $n cases agree, both schemes"
exit $fail

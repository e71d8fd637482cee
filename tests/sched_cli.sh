#!/bin/sh
# kvconductor's interface: exit codes and one-line errors in the shared
# message style (src/common/cli.h), -h/--help and -V/--version for the
# program and every command, every option of every subcommand's help in
# kvconductor(8) and back, gen-trace (same seed, same bytes) replayed, a
# malformed trace line named by its number and exit 2 (--skip-bad counts
# it), no '\r' or escape in progress output to a file, fit writing a
# config replay reads with early rejection on, and a small bench whose
# naive decisions all match the index's.
set -eu
T=sched_cli
. "${top_srcdir:-.}/tests/lib.sh"

KVC=$top_builddir/sched/kvconductor
MAN=$top_srcdir/man/kvconductor.8

if [ ! -x "$KVC" ]; then
	echo "sched_cli: $KVC not built" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sched_cli.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# err2 WHAT ARGS...: exit status 2 and exactly one line on stderr, and
# nothing on stdout
err2() {
	shift
	rc=0
	"$KVC" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	if [ $rc = 2 ] && [ "$(grep -c . "$tmp/err")" = 1 ] &&
		[ ! -s "$tmp/out" ]; then
		return 0
	fi
	bad "'$*' exits 2 with one line (got $rc: $(cat "$tmp/err"))"
	return 1
}

# usage2 ARGS...: a usage error: err2, and the line is
# "kvconductor[ CMD]: MSG (see 'kvconductor[ CMD] --help')", CMD being
# the command when ARGS start with a known one
usage2() {
	err2 usage "$@" || return 0
	case ${1:-} in
	replay | gen-trace | fit | bench | serve | leader | help)
		pre="kvconductor $1" ;;
	*) pre=kvconductor ;;
	esac
	line=$(cat "$tmp/err")
	case $line in
	"$pre: "*" (see '$pre --help')")
		ok "'$*': usage error, exit 2: $line" ;;
	*) bad "'$*': not \"$pre: MSG (see '$pre --help')\": $line" ;;
	esac
}

# input2 CMD ARGS...: bad input: err2, and the line is "kvconductor CMD:
# MSG" naming the file, without a pointer to --help
input2() {
	err2 input "$@" || return 0
	line=$(cat "$tmp/err")
	case $line in
	*"--help"*) bad "'$*': bad input, yet points at --help: $line" ;;
	"kvconductor $1: "*) ok "'$*': bad input, exit 2: $line" ;;
	*) bad "'$*': not \"kvconductor $1: MSG\": $line" ;;
	esac
}

# ---- usage ------------------------------------------------------------------
usage2
usage2 no-such-command
usage2 --no-such-option
usage2 replay
usage2 replay --trace x --no-such-option
usage2 replay --trace x --prefill 0
usage2 replay --trace x --policy fastest
usage2 replay --trace x --compare --policy load
usage2 replay --trace x --reject sometimes
usage2 replay --trace x --speed 2 --speeds 1,2
usage2 replay --trace x --speeds 1,fast
usage2 replay --trace x --set no_such_key=1
usage2 replay --trace x --set cpp_max=9
usage2 gen-trace --burst 0.5
usage2 gen-trace --long-frac 0.1 --long-max 200000
usage2 fit
usage2 bench --blocks x
usage2 gen-trace --follow 2
usage2 help no-such-command
usage2 serve --prefill 2
usage2 serve --policy fastest
usage2 serve --reject sometimes
usage2 serve --handoff maybe
usage2 serve --max-body 1
usage2 serve --election-ttl 5
usage2 serve --election etcd://127.0.0.1/x
usage2 serve --election etcd://127.0.0.1:2379/x --etcd-ca ca.pem
usage2 serve --etcd-user u
usage2 leader
usage2 leader etcd://127.0.0.1:2379
usage2 leader --etcd-user u etcd://127.0.0.1:2379/x
usage2 fit --reject sometimes x.csv
usage2 help replay fit

# help0 WHAT ARGS...: exit 0, stdout starting with WHAT, stderr empty
help0() {
	want=$1
	shift
	rc=0
	"$KVC" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	if [ $rc = 0 ] && [ ! -s "$tmp/err" ] &&
		head -n 1 "$tmp/out" | grep -q "^$want"; then
		ok "'$*': exit 0, '$want...' on stdout"
	else
		bad "'$*': exit 0, '$want...' on stdout (got $rc:" \
			"$(head -n 1 "$tmp/out") $(cat "$tmp/err"))"
	fi
}
for h in -h --help; do
	help0 'usage: kvconductor COMMAND' "$h"
	help0 'usage: kvconductor COMMAND' help "$h"
	for cmd in replay gen-trace fit bench serve leader; do
		help0 "usage: kvconductor $cmd " "$cmd" "$h"
	done
done
for v in -V --version; do
	help0 'kvconductor (kvfs) [0-9]' "$v"
done
if "$KVC" --help | grep -q '^  gen-trace '; then
	ok "--help lists gen-trace"
else
	bad "--help lists gen-trace"
fi
if "$KVC" --help | grep -q '^  serve '; then
	ok "serve is listed"
else
	bad "serve is listed"
fi

# ---- help and the man page agree ---------------------------------------------
# long options of `kvconductor help CMD`, and those the man page gives in
# CMD's subsection (".Ss kvconductor CMD" up to the next .Ss or .Sh)
help_opts() {
	"$KVC" help "$1" | grep -o -- '--[a-z][a-z-]*' | grep -v -- '^--help$' |
		sort -u
}
man_opts() {
	awk -v s=".Ss kvconductor $1" '
		$0 == s { on = 1; next }
		on && /^\.S[sh] / { on = 0 }
		on' "$MAN" | grep -o 'Fl -[a-z][a-z-]*' | sed 's/^Fl /-/' |
		sort -u
}
# and the short forms: "-x, --long" in help, ".It Fl x , Fl -long" there
help_short() {
	"$KVC" help "$1" | sed -n 's/^  \(-[a-zA-Z], --[a-z-]*\).*/\1/p' |
		grep -v -- '--help$' | sort
}
man_short() {
	awk -v s=".Ss kvconductor $1" '
		$0 == s { on = 1; next }
		on && /^\.S[sh] / { on = 0 }
		on' "$MAN" |
		sed -n 's/^\.It Fl \([a-zA-Z]\) , Fl -\([a-z-]*\).*/-\1, --\2/p' |
		sort
}
for cmd in replay gen-trace fit bench serve; do
	help_short "$cmd" >"$tmp/hs.$cmd"
	man_short "$cmd" >"$tmp/ms.$cmd"
	if [ -s "$tmp/hs.$cmd" ] && cmp -s "$tmp/hs.$cmd" "$tmp/ms.$cmd"; then
		ok "help $cmd and kvconductor(8) give the same short options"
	else
		bad "help $cmd and kvconductor(8) short options differ:" \
			"$(diff "$tmp/hs.$cmd" "$tmp/ms.$cmd" | grep '^[<>]' |
				tr '\n' ' ')"
	fi
	help_opts "$cmd" >"$tmp/help.$cmd"
	man_opts "$cmd" >"$tmp/man.$cmd"
	if [ -s "$tmp/help.$cmd" ] && cmp -s "$tmp/help.$cmd" "$tmp/man.$cmd"
	then
		ok "help $cmd and kvconductor(8) list the same options"
	else
		bad "help $cmd and kvconductor(8) differ: $(diff "$tmp/help.$cmd" \
			"$tmp/man.$cmd" | grep '^[<>]' | tr '\n' ' ')"
	fi
done
# leader has long options only
help_opts leader >"$tmp/help.leader"
man_opts leader >"$tmp/man.leader"
if [ -s "$tmp/help.leader" ] && cmp -s "$tmp/help.leader" "$tmp/man.leader"
then
	ok "help leader and kvconductor(8) list the same options"
else
	bad "help leader and kvconductor(8) differ: $(diff "$tmp/help.leader" \
		"$tmp/man.leader" | grep '^[<>]' | tr '\n' ' ')"
fi
for p in random round-robin load longest-prefix cache-aware \
	kvcache-centric lookahead queue; do
	if "$KVC" help replay | grep -q "^  $p " &&
		grep -q "^\.It Cm $p\$" "$MAN"; then
		ok "policy $p in help and kvconductor(8)"
	else
		bad "policy $p in help and kvconductor(8)"
	fi
done

# ---- gen-trace, replayed ------------------------------------------------------
"$KVC" gen-trace --requests 300 --rate 20 --seed 3 -o "$tmp/a.jsonl"
"$KVC" gen-trace --requests 300 --rate 20 --seed 3 >"$tmp/b.jsonl"
if [ "$(grep -c . "$tmp/a.jsonl")" = 300 ] &&
	cmp -s "$tmp/a.jsonl" "$tmp/b.jsonl"; then
	ok "gen-trace: 300 lines, the same for the same seed"
else
	bad "gen-trace: 300 lines, the same for the same seed"
fi
if "$KVC" replay --trace "$tmp/a.jsonl" --prefill 2 --decode 2 --json \
	>"$tmp/a.json" 2>"$tmp/err" &&
	grep -q '"requests":300,' "$tmp/a.json" &&
	grep -q '"served":300,' "$tmp/a.json"; then
	ok "a generated trace replays"
else
	bad "a generated trace replays: $(cat "$tmp/err")"
fi
if "$KVC" replay --trace - --prefill 2 --decode 2 <"$tmp/a.jsonl" |
	grep -q 'TTFT  *mean'; then
	ok "replay of standard input prints the table"
else
	bad "replay of standard input prints the table"
fi
# one table for a sweep: a row per speed and policy, kvcache-centric +0%
npol=$("$KVC" help replay | sed -n '/^Policies:/,$p' | grep -c '^  [a-z]')
"$KVC" replay --trace "$tmp/a.jsonl" --prefill 2 --decode 2 --compare \
	--speeds 1,2 --set chunk_tokens=1024 >"$tmp/sw.out" 2>"$tmp/err"
n1=$(grep -c '^1  *[a-z-]*  *[0-9]' "$tmp/sw.out" || :)
n2=$(grep -c '^2  *[a-z-]*  *[0-9]' "$tmp/sw.out" || :)
if [ "$npol" -ge 8 ] && [ "$n1" = "$npol" ] && [ "$n2" = "$npol" ] &&
	grep -q '^2  *queue ' "$tmp/sw.out" &&
	grep -q '^1  *kvcache-centric .* +0% ' "$tmp/sw.out"; then
	ok "replay --compare --speeds 1,2: one table, $npol policies at each"
else
	bad "replay --compare --speeds 1,2 ($npol policies):" \
		"$(cat "$tmp/sw.out" "$tmp/err")"
fi
# bursts: idle windows (a gap of 0.9 s or more at 10/s is e^-9 rare in
# plain Poisson), the mean rate kept; a long tail: long prompts
"$KVC" gen-trace --requests 400 --rate 10 --burst 4 --burst-window 1 \
	--seed 2 >"$tmp/bu.jsonl"
"$KVC" gen-trace --requests 400 --long-frac 0.2 --long-min 20000 \
	--long-max 30000 --max-input 100000 >"$tmp/lo.jsonl"
gaps() {
	sed 's/.*"timestamp": \([0-9]*\).*/\1/' "$1" |
		awk 'NR > 1 && $1 - p >= 900 { n++ } { p = $1 } END { print n + 0 }'
}
span=$(tail -n 1 "$tmp/bu.jsonl" | sed 's/.*"timestamp": \([0-9]*\).*/\1/')
long=$(grep -c '"input_length": [2-9][0-9][0-9][0-9][0-9],' "$tmp/lo.jsonl" ||
	:)
if [ "$(gaps "$tmp/bu.jsonl")" -ge 3 ] && [ "$(gaps "$tmp/a.jsonl")" = 0 ] &&
	[ "$span" -gt 20000 ] && [ "$span" -lt 80000 ] && [ "$long" -gt 40 ]
then
	ok "gen-trace --burst: idle gaps, $span ms for 400 at 10/s;" \
		"--long-frac: $long long prompts"
else
	bad "gen-trace --burst ($(gaps "$tmp/bu.jsonl") gaps, $span ms)," \
		"--long-frac ($long long prompts)"
fi

# ---- bad input -----------------------------------------------------------------
{
	sed -n 1,2p "$tmp/a.jsonl"
	echo '{"timestamp": 9, "input_length": "many"}'
	sed -n 3p "$tmp/a.jsonl"
} >"$tmp/bad.jsonl"
input2 replay --trace "$tmp/bad.jsonl"
if grep -q 'bad.jsonl:3:' "$tmp/err"; then
	ok "a malformed line: its line number named"
else
	bad "a malformed line: its line number named: $(cat "$tmp/err")"
fi
if "$KVC" replay --trace "$tmp/bad.jsonl" --skip-bad --json >"$tmp/s.json" &&
	grep -q '"requests":3,"skipped":1,' "$tmp/s.json"; then
	ok "--skip-bad skips and counts it"
else
	bad "--skip-bad skips and counts it: $(cat "$tmp/s.json")"
fi

# ---- fit -> config -> replay -----------------------------------------------------
{
	echo "tokens,cached,seconds"
	awk 'BEGIN { for (i = 1; i <= 40; i++) { n = 1024 * i; c = 512 * (i % 3)
		printf "%d,%d,%.9f\n", n, c,
			3e-9 * (n * n - c * c) + 1e-4 * (n - c) + 0.01 } }'
} >"$tmp/p.csv"
# conf KEY: its value in p.conf
conf() { sed -n "s/^$1 *= *\([^ 	]*\).*/\1/p" "$tmp/p.conf"; }
near() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d
	exit !(d <= 1e-6 * b) }'; }
if "$KVC" fit "$tmp/p.csv" -o "$tmp/p.conf" >"$tmp/fit.out" &&
	near "$(conf prefill_quad)" 3e-9 && near "$(conf prefill_lin)" 1e-4 &&
	near "$(conf prefill_const)" 0.01 &&
	grep -q '^fit: 40 rows' "$tmp/fit.out"; then
	ok "fit recovers the coefficients"
else
	bad "fit recovers the coefficients: $(cat "$tmp/p.conf")"
fi
# the documented flow, fit then --config, keeps early rejection on: the
# replay takes the config's reject key, and with a TTFT SLO no prefill
# can meet it rejects
# rejected JSON: the first result's rejected count
rejected() { sed -n 's/.*"rejected":\([0-9]*\),.*/\1/p' "$1"; }
if [ "$(conf reject)" = early ] &&
	"$KVC" replay --trace "$tmp/a.jsonl" --config "$tmp/p.conf" --json \
		--prefill 2 --decode 2 --slo-ttft 0.001 >"$tmp/r.json" &&
	grep -q '"reject":"early"' "$tmp/r.json" &&
	[ "$(rejected "$tmp/r.json")" -gt 0 ]; then
	ok "fit's config keeps rejection on: replay --config rejects" \
		"$(rejected "$tmp/r.json") of 300"
else
	bad "fit's config keeps rejection on: reject = $(conf reject):" \
		"$(cat "$tmp/r.json")"
fi
"$KVC" fit "$tmp/p.csv" --reject off -o "$tmp/p.conf" >/dev/null
if [ "$(conf reject)" = off ] &&
	"$KVC" replay --trace "$tmp/a.jsonl" --config "$tmp/p.conf" --json \
		--prefill 2 --decode 2 --slo-ttft 0.001 >"$tmp/r.json" &&
	[ "$(rejected "$tmp/r.json")" = 0 ]; then
	ok "fit --reject off writes off, and replay then admits all"
else
	bad "fit --reject off: reject = $(conf reject): $(cat "$tmp/r.json")"
fi
echo 'reject = predict' >"$tmp/base.conf"
"$KVC" fit "$tmp/p.csv" --config "$tmp/base.conf" -o "$tmp/p.conf" >/dev/null
if [ "$(conf reject)" = predict ]; then
	ok "fit keeps BASE's reject key"
else
	bad "fit keeps BASE's reject key: reject = $(conf reject)"
fi

# progress to a file (not a terminal): whole lines, no '\r', no escapes
"$KVC" replay --trace "$tmp/a.jsonl" --prefill 2 --decode 2 --compare \
	>/dev/null 2>"$tmp/prog.err"
if [ "$(tr -d '\r\033' <"$tmp/prog.err" | wc -c)" = \
	"$(wc -c <"$tmp/prog.err")" ]; then
	ok "no '\\r' or escape on a stderr that is not a terminal"
else
	bad "'\\r' or escape on a stderr that is not a terminal"
fi

printf 'tokens,cached,seconds\n1000,0,1\n2000,0,2\n3000,x,3\n' >"$tmp/q.csv"
input2 fit "$tmp/q.csv"
if grep -q 'q.csv:4:' "$tmp/err"; then
	ok "a bad CSV row is named by its line"
else
	bad "a bad CSV row is named by its line: $(cat "$tmp/err")"
fi
echo 'slo_ttft = soon' >"$tmp/bad.conf"
input2 replay --trace "$tmp/a.jsonl" --config "$tmp/bad.conf"
if grep -q 'bad.conf:1:' "$tmp/err"; then
	ok "a bad config line is named by its line"
else
	bad "a bad config line is named by its line: $(cat "$tmp/err")"
fi

# ---- a small bench ------------------------------------------------------------------
if "$KVC" bench --blocks 20000 --prefill 8 --decisions 2000 --naive 50 \
	--json >"$tmp/bench.json" 2>"$tmp/err" &&
	grep -q '"naive scan":{"n":50,' "$tmp/bench.json" &&
	grep -q '"mismatches":0}}' "$tmp/bench.json"; then
	ok "bench: naive decisions match the index's"
else
	bad "bench: naive decisions match the index's: $(cat "$tmp/bench.json" "$tmp/err")"
fi

exit "$fail"

#!/bin/sh
# kvconductor replay on the Mooncake synthetic trace, 8 prefill + 8 decode
# instances: mean TTFT must order random > load > cache-aware >
# kvcache-centric >= lookahead; under 1.5x the arrival rate lookahead must
# beat kvcache-centric outright; prediction-based rejection must raise SLO
# attainment at 2x; one replay must take under 1 s of CPU; the queue
# policy must beat kvcache-centric's mean TTFT at 1x and 1.5x under the
# same admission mode, rejecting no more and meeting the SLOs as often.
# SKIP (77) when ../shared/traces is not beside the source tree.
set -eu
T=sched_replay
. "${top_srcdir:-.}/tests/lib.sh"

KVC=$top_builddir/sched/kvconductor
TRACE=$top_srcdir/../shared/traces/synthetic_trace.jsonl

[ -r "$TRACE" ] || skip "$TRACE not found"
if [ ! -x "$KVC" ]; then
	echo "sched_replay: $KVC not built" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sched_replay.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# field FILE POLICY KEY: KEY of POLICY's result in a --json line (each
# result object is flat, so splitting at '{' puts one on a line)
field() {
	tr '{' '\n' <"$1" | grep "^\"policy\":\"$2\"" |
		sed "s/.*\"$3\":\([-0-9.eE+]*\).*/\1/"
}

# lt A B: A < B as numbers
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }

replay() {
	out=$1
	shift
	if ! "$KVC" replay --trace "$TRACE" --prefill 8 --decode 8 --json \
		"$@" >"$out" 2>"$out.err"; then
		bad "replay $*: $(cat "$out.err")"
		return 1
	fi
}

# ---- the order of the paper's Figure 5 -------------------------------------
if replay "$tmp/cmp.json" --compare; then
	r=$(field "$tmp/cmp.json" random ttft_mean)
	l=$(field "$tmp/cmp.json" load ttft_mean)
	c=$(field "$tmp/cmp.json" cache-aware ttft_mean)
	k=$(field "$tmp/cmp.json" kvcache-centric ttft_mean)
	o=$(field "$tmp/cmp.json" lookahead ttft_mean)
	echo "     mean TTFT: random $r, load $l, cache-aware $c," \
		"kvcache-centric $k, lookahead $o"
	if lt "$l" "$r" && lt "$c" "$l" && lt "$k" "$c"; then
		ok "random > load > cache-aware > kvcache-centric"
	else
		bad "random > load > cache-aware > kvcache-centric"
	fi
	if ! lt "$k" "$o"; then
		ok "lookahead at or below kvcache-centric"
	else
		bad "lookahead at or below kvcache-centric"
	fi
	n=$(field "$tmp/cmp.json" kvcache-centric served)
	if [ "$n" = 3993 ]; then
		ok "every request of the trace served"
	else
		bad "every request of the trace served (got $n)"
	fi
	cpu=$(field "$tmp/cmp.json" kvcache-centric cpu_s)
	if lt "$cpu" 1; then
		ok "a replay in under 1 s of CPU ($cpu s)"
	else
		bad "a replay in under 1 s of CPU ($cpu s)"
	fi
fi

# ---- more load: lookahead ahead outright ------------------------------------
if replay "$tmp/fast.json" --compare --speed 1.5; then
	k=$(field "$tmp/fast.json" kvcache-centric ttft_mean)
	o=$(field "$tmp/fast.json" lookahead ttft_mean)
	if lt "$o" "$k"; then
		ok "at 1.5x, lookahead $o s < kvcache-centric $k s"
	else
		bad "at 1.5x, lookahead $o s < kvcache-centric $k s"
	fi
fi

# ---- the queue policy: held queues, preemption, stealing, CPP ----------------
for mode in "1 off" "1.5 off" "1.5 early"; do
	set -- $mode
	sp=$1
	rj=$2
	if replay "$tmp/k.json" --policy kvcache-centric --speed "$sp" \
		--reject "$rj" &&
		replay "$tmp/q.json" --policy queue --speed "$sp" \
			--reject "$rj"; then
		k=$(field "$tmp/k.json" kvcache-centric ttft_mean)
		q=$(field "$tmp/q.json" queue ttft_mean)
		kr=$(field "$tmp/k.json" kvcache-centric rejected)
		qr=$(field "$tmp/q.json" queue rejected)
		ka=$(field "$tmp/k.json" kvcache-centric attainment)
		qa=$(field "$tmp/q.json" queue attainment)
		what="at ${sp}x, reject $rj: queue $q s < kvcache-centric $k s,"
		what="$what rejected $qr <= $kr, SLO $qa >= $ka"
		if lt "$q" "$k" && [ "$qr" -le "$kr" ] && ! lt "$qa" "$ka"; then
			ok "$what"
		else
			bad "$what"
		fi
	fi
done

# ---- overload: rejecting early serves more within the SLOs ------------------
if replay "$tmp/off.json" --policy kvcache-centric --speed 2 &&
	replay "$tmp/pred.json" --policy kvcache-centric --speed 2 \
		--reject predict; then
	a0=$(field "$tmp/off.json" kvcache-centric attainment)
	a1=$(field "$tmp/pred.json" kvcache-centric attainment)
	rj=$(field "$tmp/pred.json" kvcache-centric rejected)
	if lt "$a0" "$a1" && [ "$rj" -gt 0 ]; then
		ok "at 2x, --reject predict: attainment $a0 -> $a1 ($rj rejected)"
	else
		bad "at 2x, --reject predict: attainment $a0 -> $a1 ($rj rejected)"
	fi
fi

exit "$fail"

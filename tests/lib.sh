# lib.sh - sourced by every shell test: reporting and waiting.
#
# The test sets T (its name) before sourcing.  Then:
#   ok DESC / bad DESC      report; bad makes the test fail at the end
#                           (exit "$fail")
#   skip REASON             SKIP (77) with the reason, at once
#   expect WORD DESC CMD... run CMD, compare its output (stdout and stderr,
#                           one line) with WORD
#   wait_until TENTHS CMD...  CMD succeeds within TENTHS tenths of a second
#   gone PID                the process is gone

top_builddir=${top_builddir:-.}
top_srcdir=${top_srcdir:-.}
PYTHON3=${PYTHON3:-}

# shellcheck disable=SC2034 # fail is the sourcing test's exit status
fail=0

ok() { echo "ok   $1"; }
bad() {
	echo "FAIL $1" >&2
	# shellcheck disable=SC2034 # read by the sourcing test
	fail=1
}
skip() {
	echo "${T:-test}: SKIP: $*"
	exit 77
}

expect() {
	want=$1
	desc=$2
	shift 2
	got=$("$@" 2>&1) || got="exit $?: $got"
	if [ "$got" = "$want" ]; then
		ok "$desc"
	else
		bad "$desc: want '$want', got '$got'"
	fi
}

wait_until() {
	n=$1
	shift
	while [ "$n" -gt 0 ]; do
		"$@" && return 0
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}

gone() { ! kill -0 "$1" 2>/dev/null; }

#!/bin/sh
# The test command of README.md: install what is missing, build, and run
# the whole suite twice, plainly and under ASan+UBSan, then the engine
# image's build (libkvfs + kvctl only, no Check), then distcheck.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
scripts/deps.sh

jobs=$(nproc)
status=0
summary=""

# run make check in $1; fold its automake summary into $summary
run_check() {
	name=$1
	shift
	echo "== $name: build"
	scripts/build.sh "build/$name" "$@"
	echo "== $name: make check"
	if ! make -C "build/$name" -s -j"$jobs" check >"build/$name.check.out" 2>&1; then
		status=1
	fi
	grep -E '^(PASS|FAIL|SKIP|XFAIL|XPASS|ERROR):' "build/$name.check.out" || true
	if [ -f "build/$name/test-suite.log" ] && grep -q '^FAIL\|^ERROR' "build/$name.check.out"; then
		cat "build/$name/test-suite.log"
	fi
	summary="$summary $(sed -n 's/^# \(PASS\|FAIL\|SKIP\|ERROR\|XPASS\):  *\([0-9]*\)/\1=\2/p' \
		"build/$name.check.out" | tr '\n' ' ')"
}

run_check plain
run_check sanitizers --enable-sanitizers
# what an engine image builds: libkvfs and kvctl with libcrypto alone, and
# no Check (the unit tests say they were skipped; the rest still runs)
run_check engine --disable-daemon --disable-conductor --without-check

echo "== distcheck"
if ! make -C build/plain -s -j"$jobs" distcheck >build/distcheck.out 2>&1; then
	tail -50 build/distcheck.out
	# the failing tests' own logs, which distcheck removes with its tree
	# only when it passes
	find build/plain -path '*/_build/*' -name test-suite.log \
		-exec cat {} \; 2>/dev/null | head -400 || true
	echo "distcheck: FAILED"
	status=1
else
	grep -E '^=+$|archives ready|kvfs-.*tar' build/distcheck.out | tail -3 || true
fi

pass=0 fail=0 skip=0
for kv in $summary; do
	n=${kv#*=}
	case $kv in
	PASS=*) pass=$((pass + n)) ;;
	FAIL=* | ERROR=* | XPASS=*) fail=$((fail + n)) ;;
	SKIP=*) skip=$((skip + n)) ;;
	esac
done
[ "$status" -eq 0 ] || [ "$fail" -gt 0 ] || fail=1
echo "tests: $pass passed, $fail failed, $skip skipped"
exit "$status"

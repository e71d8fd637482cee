#!/bin/sh
# mandoc -Tlint on every page in man/: any message at warning level or
# above fails (style notes, such as pages of kvfsd(8) not written yet, pass).
set -eu

top_srcdir=${top_srcdir:-.}
MANDOC=${MANDOC:-}

if [ -z "$MANDOC" ]; then
	echo "manlint: SKIP: mandoc not found (MANDOC is empty)"
	exit 77
fi

fail=0
n=0
for page in "$top_srcdir"/man/*.[0-9]; do
	[ -e "$page" ] || continue # the glob matched nothing
	n=$((n + 1))
	rc=0
	out=$("$MANDOC" -Tlint -W warning "$page" 2>&1) || rc=$?
	if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
		echo "FAIL $page (mandoc exit $rc)" >&2
		[ -z "$out" ] || printf '%s\n' "$out" >&2
		fail=1
	else
		echo "ok   $page"
	fi
done

if [ "$n" -eq 0 ]; then
	echo "manlint: no pages in $top_srcdir/man" >&2
	exit 1
fi
exit $fail

#!/bin/sh
# mandoc -Tlint on every page in man/: any message at warning level or
# above fails (style notes, such as pages of kvfsd(8) not written yet, pass).
# A page that is a single ".so man3/X.3" line (the second name of a page
# documenting two functions) is not linted itself, since mandoc calls any
# .so fragile: its target must be a page here, which is linted in turn.
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
	if [ "$(wc -l <"$page")" -eq 1 ] &&
		grep -q '^\.so man[0-9]/' "$page"; then
		target=$top_srcdir/man/$(sed 's|^\.so man[0-9]/||' "$page")
		if [ -f "$target" ]; then
			echo "ok   $page (.so $(basename "$target"))"
		else
			echo "FAIL $page: .so target $target is missing" >&2
			fail=1
		fi
		continue
	fi
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

#!/bin/sh
# manlint.sh - every page in man/ through both formatters a reader may
# have: mandoc -Tlint (any message at warning level or above fails; style
# notes pass) and man(1) with groff's warnings (any warning fails), at 80
# columns.
#
# The pages are linted from a copy laid out as installed, MANROOT/manN/,
# with the formatters run in MANROOT: that is how man(1) resolves a
# ".so man3/X.3" alias page (the second name of a page documenting two
# functions) once installed, so an alias whose target is missing or
# broken fails here as it would there.  mandoc calls any .so "fragile";
# that one warning is expected on alias pages and nowhere else.
#
# SKIP (77) only when neither formatter is installed; one missing is said.
set -eu

T=manlint
. "${top_srcdir:-.}/tests/lib.sh"

MANDOC=${MANDOC:-}
[ -n "$MANDOC" ] || MANDOC=$(command -v mandoc 2>/dev/null || true)
MAN=$(command -v man 2>/dev/null || true)
command -v groff >/dev/null 2>&1 || MAN=
[ -n "$MANDOC" ] || [ -n "$MAN" ] || skip "neither mandoc nor man/groff found"
[ -n "$MANDOC" ] || echo "$T: mandoc not found: groff only"
[ -n "$MAN" ] || echo "$T: man or groff not found: mandoc only"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/$T.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP

n=0
for page in "$top_srcdir"/man/*.[0-9]; do
	[ -e "$page" ] || continue # the glob matched nothing
	sec=${page##*.}
	mkdir -p "$tmp/man$sec"
	cp "$page" "$tmp/man$sec/"
	n=$((n + 1))
done
[ "$n" -gt 0 ] || { bad "no pages in $top_srcdir/man"; exit 1; }

cd "$tmp"
for page in man*/*; do
	name=${page#*/}
	alias=no
	pf=0
	if [ "$(wc -l <"$page")" -eq 1 ] && grep -q '^\.so man[0-9]/' "$page"
	then
		alias=yes
	fi
	if [ -n "$MANDOC" ]; then
		rc=0
		out=$("$MANDOC" -Tlint -W warning "$page" 2>&1) || rc=$?
		if [ $alias = yes ]; then
			out=$(printf '%s\n' "$out" |
				grep -v 'WARNING: \.so is fragile' || true)
			# the fragile warning alone makes the exit status 2
			[ -n "$out" ] || rc=0
		fi
		if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
			bad "$name: mandoc -Tlint (exit $rc)"
			pf=1
			printf '%s\n' "$out" >&2
		fi
	fi
	if [ -n "$MAN" ]; then
		rc=0
		out=$(MANWIDTH=80 MANPAGER=cat PAGER=cat LC_ALL=C.UTF-8 \
			"$MAN" --warnings -l "$page" 2>&1 >/dev/null) || rc=$?
		if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
			bad "$name: man --warnings (exit $rc)"
			pf=1
			printf '%s\n' "$out" >&2
		fi
	fi
	[ $pf = 1 ] || ok "$name$([ $alias = no ] || echo ' (alias)')"
done

exit $fail

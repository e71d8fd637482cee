#!/bin/sh
# Every C file of the tree is formatted as .clang-format says: a file
# whose clang-format output differs fails, with the first lines of the
# difference.  SKIP (77) without clang-format (Debian: clang-format); the
# style is pinned to Debian 12's version 14, whose output other versions
# may not match.
T=format
. "${top_srcdir:-.}/tests/lib.sh"

CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
command -v "$CLANG_FORMAT" >/dev/null 2>&1 || skip "no $CLANG_FORMAT"
[ -f "$top_srcdir/.clang-format" ] || skip "no .clang-format in $top_srcdir"

n=0
for f in $(cd "$top_srcdir" && find src kvstore fuse sched tests examples \
	fuzz -name '*.[ch]' | sort); do
	n=$((n + 1))
	# --style=file finds .clang-format above the file; stdin keeps the
	# source read-only (distcheck's tree is)
	if ! "$CLANG_FORMAT" --style=file --assume-filename="$top_srcdir/$f" \
		<"$top_srcdir/$f" | cmp -s - "$top_srcdir/$f"; then
		bad "$f is not clang-formatted (run: clang-format -i $f)"
		"$CLANG_FORMAT" --style=file --assume-filename="$top_srcdir/$f" \
			<"$top_srcdir/$f" | diff -u "$top_srcdir/$f" - | sed -n '1,12p' >&2
	fi
done
[ "$n" -gt 0 ] || bad "no C files found under $top_srcdir"
[ "$fail" -eq 0 ] && ok "$n files clang-formatted"
exit "$fail"

#!/bin/sh
# wire_doc.sh - the peer protocol is written once, in kvstore/wire.h's
# comment, beside the codec; kvfs(7) keeps a copy of the frame layout for
# readers without the source.  This test holds the two together: it
# extracts, from both, the header table (offset, size, field), the type
# table (name, code, and the offset/size pairs of each meta) and the
# 56-byte block description, and fails on any difference.  It also holds
# the comment to the code: the enum's codes and KV_WIRE_HDR_LEN /
# KV_WIRE_BLK_LEN must be what the tables say.
#
# Only numbers and names are compared: the prose of a field may be worded
# differently in the two places.
set -eu

T=wire_doc
. "${top_srcdir:-.}/tests/lib.sh"

H=$top_srcdir/kvstore/wire.h
M=$top_srcdir/man/kvfs.7
[ -f "$H" ] || { bad "$H missing"; exit 1; }
[ -f "$M" ] || { bad "$M missing"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/$T.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP

# The tables as plain text, one per source, in the same shape: a blank
# line ends a table.  wire.h: the first comment, its " * " taken off.
# kvfs(7): the Protocol subsection, its .Bd/.Ed/.Pp made blank lines.
sed -n '1,/\*\//p' "$H" | sed -e 's/^ \*\/.*//' -e 's/^ \* \{0,1\}//' \
	-e 's/^ \*$//' -e 's/^\/\*.*//' >"$tmp/h.txt"
sed -n '/^\.Ss Protocol/,/^\.S[hs] /p' "$M" |
	sed -e 's/^\.Bd.*//' -e 's/^\.Ed.*//' -e 's/^\.Pp.*//' >"$tmp/m.txt"

# normalized table rows:
#   hdr OFF SIZE NAME     the header
#   type NAME CODE META   META: "OFF SIZE" pairs, "ns", "data", "as X",
#                         "empty", joined by commas
#   blk OFF SIZE          the block description; blklen N its length
extract() {
	awk '
	function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
	# one meta segment (between semicolons) in normal form, or ""
	function seg(s,   a) {
		s = trim(s)
		if (s ~ /^\(?empty\)?$/) return "empty"
		if (s ~ /^[0-9]+ +[0-9]+( |$)/) {
			split(s, a, / +/); return a[1] " " a[2]
		}
		if (s ~ /bytes of block data/) return "data"
		if (match(s, /^as [A-Z_]+/)) return substr(s, 1, RLENGTH)
		if (s ~ /^[0-9]+ +ns( |$)/) { split(s, a, / +/); return a[1] " ns" }
		return ""
	}
	function meta(s,   n, a, i, out, x) {
		n = split(s, a, /;/); out = ""
		for (i = 1; i <= n; i++) {
			x = seg(a[i])
			if (x != "") out = out (out == "" ? "" : ",") x
		}
		return out
	}
	function flush() {
		if (tname != "") print "type", tname, tcode, meta(tmeta)
		tname = ""
	}
	/^[ \t]*$/ {
		if (st == "type") flush()
		if (st == "hdr" || st == "type" || (st == "blk" && nblk)) st = ""
		next
	}
	st == "" && /^Header:?$/ { st = "hdrwait"; next }
	st == "hdrwait" && /^ *offset +size +field/ { st = "hdr"; next }
	st == "hdr" {
		# "0 4 magic ..." -> hdr 0 4 magic; the name is the first word
		name = $3; sub(/[^a-z_]+$/, "", name)
		print "hdr", $1, $2, name; next
	}
	st == "" && /^ *type +(code +)?meta \(offset size field\)/ {
		st = "type"; tname = ""; next
	}
	st == "type" && /^ *[A-Z][A-Z_]* +[0-9]+ / {
		flush()
		tname = $1; tcode = $2
		s = $0; sub(/^ *[A-Z][A-Z_]* +[0-9]+ +/, "", s); tmeta = s
		next
	}
	st == "type" { tmeta = tmeta " " $0; next }
	st == "" && /blk.*[0-9]+ bytes/ {
		s = $0; match(s, /[0-9]+ bytes/)
		print "blklen", substr(s, RSTART, RLENGTH - 6)
		st = "blk"; nblk = 0; next
	}
	st == "blk" && /^ *offset +size +field/ { next }
	st == "blk" {
		n = split($0, a, /;/)
		for (i = 1; i <= n; i++) {
			x = seg(a[i])
			if (x ~ /^[0-9]+ [0-9]+$/) { print "blk", x; nblk++ }
		}
		next
	}
	END { if (st == "type") flush() }
	' "$1"
}

extract "$tmp/h.txt" >"$tmp/h.tab"
extract "$tmp/m.txt" >"$tmp/m.tab"

# each source must have yielded whole tables, or the comparison proves
# nothing (a renamed heading would make both sides empty)
for f in h m; do
	src=$H
	[ $f = h ] || src=$M
	nh=$(grep -c '^hdr ' "$tmp/$f.tab" || true)
	nt=$(grep -c '^type ' "$tmp/$f.tab" || true)
	nb=$(grep -c '^blk ' "$tmp/$f.tab" || true)
	if [ "$nh" -ge 8 ] && [ "$nt" -ge 22 ] && [ "$nb" -ge 6 ]; then
		ok "$src: $nh header fields, $nt types, $nb blk fields"
	else
		bad "$src: found $nh header fields, $nt types, $nb blk fields"
	fi
done

if diff -u "$tmp/h.tab" "$tmp/m.tab" >"$tmp/diff"; then
	ok "kvfs(7)'s frame layout agrees with kvstore/wire.h"
else
	bad "kvfs(7) and kvstore/wire.h disagree (- wire.h, + kvfs.7):"
	cat "$tmp/diff" >&2
fi

# the comment against the code: enum codes, header and blk lengths
sed -n 's/^[[:space:]]*KV_WIRE_\([A-Z_]*\) = \([0-9]*\),.*/type \1 \2/p' "$H" |
	sort >"$tmp/enum"
awk '$1 == "type" { print "type", $2, $3 }' "$tmp/h.tab" | sort >"$tmp/doc"
if [ -s "$tmp/enum" ] && diff -u "$tmp/enum" "$tmp/doc" >"$tmp/diff"; then
	ok "the type table matches enum kv_wire_type"
else
	bad "wire.h's type table and enum kv_wire_type disagree (- enum):"
	cat "$tmp/diff" >&2
fi
# the last field of a table ends where the table's length says
end_of() {
	awk -v k="$1" '$1 == k { e = $2 + $3 } END { print e + 0 }' "$tmp/h.tab"
}
def() { sed -n "s/^#define $1 \([0-9]*\)u\{0,1\}\$/\1/p" "$H"; }
hl=$(def KV_WIRE_HDR_LEN)
bl=$(def KV_WIRE_BLK_LEN)
if [ -n "$hl" ] && [ "$(end_of hdr)" = "$hl" ]; then
	ok "header table ends at KV_WIRE_HDR_LEN ($hl)"
else
	bad "header table ends at $(end_of hdr), KV_WIRE_HDR_LEN is '$hl'"
fi
if [ -n "$bl" ] && [ "$(end_of blk)" = "$bl" ] &&
	grep -qx "blklen $bl" "$tmp/h.tab"; then
	ok "blk table ends at KV_WIRE_BLK_LEN ($bl)"
else
	bad "blk table ends at $(end_of blk), KV_WIRE_BLK_LEN is '$bl'"
fi

exit $fail

#!/bin/sh
# systemd.sh - the units make generates (systemd/*.service, from
# systemd/*.service.in) pass systemd-analyze verify: every directive
# known, every path absolute, every program executable.
#
# The units name the install paths, where nothing is installed yet, so a
# copy is verified whose program directory is a temporary one holding
# the built programs (or, when one was not built, a stand-in script:
# verify checks that a program can be run, not what it does).
# kvfsd@.service is a template: it is verified as an instance, a mount
# point escaped as systemd-escape --path does.
#
# SKIP (77) without systemd-analyze, or where it cannot verify even a
# trivial unit (some containers), or when no unit was generated (neither
# kvfsd nor kvconductor built).
set -eu

T=systemd
. "${top_srcdir:-.}/tests/lib.sh"

SA=$(command -v systemd-analyze 2>/dev/null || true)
[ -n "$SA" ] || skip "systemd-analyze not found"
ESC=$(command -v systemd-escape 2>/dev/null || true)
[ -n "$ESC" ] || skip "systemd-escape not found"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/$T.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM HUP

# --man=no: the pages are not installed; --generators=no: nothing of this
# machine's configuration is wanted
verify() { "$SA" verify --man=no --generators=no "$@"; }

printf '[Unit]\nDescription=probe\n[Service]\nExecStart=%s\n' \
	"$(command -v true)" >"$tmp/kvfs-probe.service"
if ! out=$(verify "$tmp/kvfs-probe.service" 2>&1) || [ -n "$out" ]; then
	skip "systemd-analyze verify does not work here: $out"
fi

mkdir "$tmp/sbin" "$tmp/mnt" "$tmp/units"
n=0
for pair in kvfsd@.service:fuse/kvfsd kvconductor.service:sched/kvconductor
do
	unit=${pair%%:*}
	built=$top_builddir/${pair#*:}
	prog=${built##*/}
	src=$top_builddir/systemd/$unit
	[ -f "$src" ] || continue
	n=$((n + 1))
	if [ -x "$built" ]; then
		ln -s "$(cd "${built%/*}" && pwd)/$prog" "$tmp/sbin/$prog"
	else
		printf '#!/bin/sh\nexit 0\n' >"$tmp/sbin/$prog"
		chmod +x "$tmp/sbin/$prog"
	fi
	# the directory the unit runs its program from: sbindir
	dir=$(sed -n "s|^ExecStart=\\(/[^ ]*\\)/$prog .*|\\1|p" "$src")
	if [ -z "$dir" ]; then
		bad "$unit: no ExecStart=SBINDIR/$prog ..."
		continue
	fi
	if grep -q '@[a-z_]*@' "$src"; then
		bad "$unit: a @variable@ left unsubstituted"
		grep '@[a-z_]*@' "$src" >&2
	fi
	case $unit in
	*@.service) name=${unit%@.service}@$("$ESC" --path "$tmp/mnt").service ;;
	*) name=$unit ;;
	esac
	sed "s|$dir/$prog|$tmp/sbin/$prog|g" "$src" >"$tmp/units/$name"
	rc=0
	out=$(verify "$tmp/units/$name" 2>&1) || rc=$?
	if [ $rc -eq 0 ] && [ -z "$out" ]; then
		ok "$unit verifies (as $name)"
	else
		bad "$unit: systemd-analyze verify (exit $rc)"
		printf '%s\n' "$out" >&2
	fi
done
[ $n -gt 0 ] || skip "no units in $top_builddir/systemd (nothing to run)"

exit $fail

#!/bin/sh
# kvctl's daemon commands against tests/ctl_serve (a store behind a control
# socket, no FUSE): human and --json output, errors, exit codes, and the
# help texts against kvctl(1).
set -eu

T=ctl_kvctl
. "${top_srcdir:-.}/tests/lib.sh"
KVCTL=$top_builddir/src/kvctl/kvctl
SERVE=$top_builddir/tests/helpers/ctl_serve
MANDOC=${MANDOC:-}

for p in "$KVCTL" "$SERVE"; do
	if [ ! -x "$p" ]; then
		echo "ctl_kvctl: $p not built" >&2
		exit 1
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ctl_kvctl.XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ]; then
		kill -s KILL "$pid" 2>/dev/null || :
		wait "$pid" 2>/dev/null || :
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

NS=llama3-8b
TOKS="1 2 3 4 5 6 7 8 9 10 11 12"
SOCK=$tmp/srv/ctl.sock

# start: ctl_serve in $tmp/srv with three blocks of $NS
start() {
	mkdir -p "$tmp/srv"
	rm -f "$tmp/srv/ready"
	# shellcheck disable=SC2086
	"$SERVE" "$tmp/srv" "$NS" 4 $TOKS 2>"$tmp/serve.err" &
	pid=$!
	i=0
	while [ ! -e "$tmp/srv/ready" ]; do
		i=$((i + 1))
		if [ "$i" -gt 100 ] || ! kill -0 "$pid" 2>/dev/null; then
			echo "ctl_kvctl: ctl_serve did not start" >&2
			cat "$tmp/serve.err" >&2
			exit 1
		fi
		sleep 0.1
	done
}

# stop [SIGNAL]: signal ctl_serve (TERM by default) and reap it, with
# SIGKILL after 5 s so that a wedged server cannot hang the suite
stop() {
	kill -s "${1:-TERM}" "$pid" 2>/dev/null || :
	i=0
	while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 50 ]; do
		i=$((i + 1))
		sleep 0.1
	done
	kill -s KILL "$pid" 2>/dev/null || :
	wait "$pid" 2>/dev/null || :
	pid=
}

kv() { "$KVCTL" -s "$SOCK" "$@"; }

# has NAME PATTERN FILE: grep for a fixed string
has() {
	if grep -q -F -e "$2" "$3"; then ok "$1"; else
		bad "$1: no '$2' in:"
		cat "$3" >&2
	fi
}

# expect_fail NAME WANT_RC PATTERN CMD...: exit code, one stderr line,
# nothing on stdout
expect_fail() {
	name=$1 want=$2 pat=$3
	shift 3
	rc=0
	"$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	if [ "$rc" -ne "$want" ]; then
		bad "$name: exit $rc, want $want"
		cat "$tmp/err" >&2
	elif ! head -n 1 "$tmp/err" | grep -q -e "$pat"; then
		bad "$name: stderr lacks '$pat':"
		cat "$tmp/err" >&2
	elif [ "$want" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
		bad "$name: more than one line on stderr:"
		cat "$tmp/err" >&2
	elif [ -s "$tmp/out" ]; then
		bad "$name: wrote to stdout"
	else
		ok "$name"
	fi
}

# json NAME PYTHON-ASSERTIONS FILE: d is the first line's object
json() {
	if [ -z "$PYTHON3" ]; then
		if grep -q '^{"ok":true' "$3"; then ok "$1 (grep)"; else
			bad "$1"; fi
		return
	fi
	if "$PYTHON3" -c 'import json, sys
lines = open(sys.argv[1]).read().splitlines()
d = json.loads(lines[0])
assert d["ok"] is True, d
'"$2" "$3"; then ok "$1"; else bad "$1"; cat "$3" >&2; fi
}

start
# shellcheck disable=SC2086
"$KVCTL" hash -n "$NS" -b 4 $TOKS >"$tmp/names"
h0=$(sed -n 1p "$tmp/names")
h1=$(sed -n 2p "$tmp/names")
h2=$(sed -n 3p "$tmp/names")
hz=$(printf '%064d' 0)	# never cached

# ---- status
kv status >"$tmp/out"
has "status: pool" "pool      64 slots of 4.0 KiB (256.0 KiB), 61 free" \
	"$tmp/out"
has "status: blocks" "blocks    3 (96 B)" "$tmp/out"
has "status: daemon" "program=ctl_serve" "$tmp/out"
if grep -q "^$NS  *4  *chain  *3  *96 B " "$tmp/out"; then
	ok "status: namespace table"
else bad "status: namespace table"; cat "$tmp/out" >&2; fi
kv status --json >"$tmp/out"
json "status --json" 'assert d["stats"]["pool"]["slots"] == 64
assert d["stats"]["namespaces"][0]["name"] == "llama3-8b"
assert d["daemon"]["program"] == "ctl_serve"
assert len(lines) == 1' "$tmp/out"
KVFS_SOCKET=$SOCK "$KVCTL" status -j >"$tmp/out"
json "KVFS_SOCKET names the daemon" 'pass' "$tmp/out"
"$KVCTL" --socket="$SOCK" status -j >"$tmp/out"
json "--socket=PATH" 'pass' "$tmp/out"

# -m: a directory whose user.kvfs.socket names the socket, as kvfsd's
# mount root does
mkdir "$tmp/mnt"
if [ -n "$PYTHON3" ] && "$PYTHON3" -c 'import os, sys
os.setxattr(sys.argv[1], "user.kvfs.socket", sys.argv[2].encode())' \
	"$tmp/mnt" "$SOCK" 2>/dev/null; then
	"$KVCTL" -m "$tmp/mnt" status -j >"$tmp/out"
	json "-m MOUNT reads user.kvfs.socket" 'pass' "$tmp/out"
else
	echo "skip -m with an xattr (no python3 or no user xattrs here)"
fi
mkdir "$tmp/plain"
expect_fail "-m on a directory without a daemon" 1 \
	"^kvctl status: no kvfs daemon behind $tmp/plain\$" \
	"$KVCTL" -m "$tmp/plain" status

# ---- ns
kv ns list >"$tmp/out"
has "ns list" "NAMESPACE  BLOCK_TOKENS" "$tmp/out"
kv ns create -b 16 "a b" >"$tmp/out"
has "ns create" "created namespace a b (block_tokens 16, layout chain)" "$tmp/out"
kv ns create "dflt" >"$tmp/out"
has "ns create: default block_tokens" "(block_tokens 512, layout chain)" "$tmp/out"
kv ns create -y open "eng" >"$tmp/out"
has "ns create --layout open" "(block_tokens 512, layout open)" "$tmp/out"
expect_fail "ns create: bad layout" 2 "neither chain nor open" \
	kv ns create --layout=flat "x"
kv ns list >"$tmp/out"
if grep -Eq '^eng +512 +open ' "$tmp/out"; then ok "ns list: the layout column"
else bad "ns list: no layout column in: $(cat "$tmp/out")"; fi
kv ns list -j >"$tmp/out"
json "ns list --json" 'n = {x["name"]: x for x in d["namespaces"]}
assert n["a b"]["block_tokens"] == 16 and n["a b"]["name_pct"] == "a%20b"
assert n["a b"]["layout"] == "chain" and n["eng"]["layout"] == "open"
assert n["dflt"]["block_tokens"] == 512' "$tmp/out"
expect_fail "ns create: exists" 1 'exists' kv ns create -b 16 "a b"
kv ns rm "a b" >"$tmp/out"
has "ns rm" "removed namespace a b" "$tmp/out"
kv ns rm -j dflt >"$tmp/out"
json "ns rm --json" 'assert list(d) == ["ok"]' "$tmp/out"
expect_fail "ns rm: unknown" 1 'unknown namespace' kv ns rm "a b"
expect_fail "ns rm: not empty" 1 'still holds blocks' kv ns rm "$NS"
expect_fail "ns: no verb" 2 'missing' kv ns
expect_fail "ns: bad verb" 2 'unknown verb' kv ns frob
expect_fail "ns create: bad name" 2 'bad namespace' kv ns create .x
expect_fail "ns create: -b 0" 2 'block-tokens' kv ns create -b 0 x
expect_fail "ns list: -b is not its option" 2 "unknown option '-b'" \
	kv ns list -b 4

# ---- ls
kv ls "$NS" | sort >"$tmp/out"
sort "$tmp/names" >"$tmp/want"
if cmp -s "$tmp/out" "$tmp/want"; then ok "ls lists the sealed blocks"
else bad "ls lists the sealed blocks"; fi
kv ls -l "$NS" >"$tmp/out"
has "ls -l header" "SIZE  REFS  SEALED" "$tmp/out"
if grep -q "^$h0  *32 B  *0  [0-9-]*T[0-9:]*Z\$" "$tmp/out"; then
	ok "ls -l row"
else bad "ls -l row"; cat "$tmp/out" >&2; fi
kv ls -j "$NS" >"$tmp/out"
json "ls --json" 'assert len(d["blocks"]) == 3 and d["end"] is True' \
	"$tmp/out"
expect_fail "ls: unknown namespace" 1 'unknown namespace "nope"' kv ls nope
expect_fail "ls: no namespace" 2 'missing operand' kv ls

# ---- stat
kv stat "$NS" "$h1" >"$tmp/out"
has "stat: size" "size      32 B (32 bytes)" "$tmp/out"
has "stat: parent" "parent    $h0" "$tmp/out"
# a block without a recorded parent is not called the first of its chain:
# blocks written through a mount have none recorded either
kv stat "$NS" "$h0" >"$tmp/out"
has "stat: no parent recorded" "parent    none recorded" "$tmp/out"
if grep -q "first block" "$tmp/out"; then
	bad "stat: claims a first block"
else ok "stat: claims no first block"; fi
kv stat -j "$NS" "$h0" >"$tmp/out"
json "stat --json" 'assert d["parent"] is None and d["size"] == 32
assert len(d["checksum"]) == 8' "$tmp/out"
expect_fail "stat: bad hash" 2 'bad hash' kv stat "$NS" xyz
expect_fail "stat: uppercase hash" 2 'bad hash' kv stat "$NS" \
	"$(echo "$h0" | tr a-f A-F)"
expect_fail "stat: absent block" 1 'no such block' kv stat "$NS" "$hz"

# ---- lookup
kv lookup "$NS" "$h0" "$h1" >"$tmp/out"
has "lookup: names" "2 of 2 blocks cached" "$tmp/out"
# shellcheck disable=SC2086
kv lookup -t "$NS" $TOKS 13 14 15 16 17 >"$tmp/out"
has "lookup -t" "3 of 4 blocks cached (12 of 17 tokens)" "$tmp/out"
"$KVCTL" hash -n "$NS" -b 4 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 |
	kv lookup "$NS" >"$tmp/out"
has "lookup: names from stdin" "3 of 4 blocks cached" "$tmp/out"
printf '1 2 3 4\n5 6 7 8\n' | kv lookup --tokens "$NS" >"$tmp/out"
has "lookup: tokens from stdin" "2 of 2 blocks cached (8 of 8 tokens)" \
	"$tmp/out"
kv lookup -j "$NS" "$hz" "$h0" >"$tmp/out"
json "lookup --json" 'assert d["count"] == 0 and d["n"] == 2' "$tmp/out"
expect_fail "lookup: bad token" 2 'bad token "x"' kv lookup -t "$NS" 1 x
expect_fail "lookup -t: unknown namespace" 1 'unknown namespace' \
	kv lookup -t nope 1 2 3 4
expect_fail "lookup: unknown option" 2 "unknown option '--frob'" \
	kv lookup --frob "$NS"
expect_fail "lookup: --lease is not its option" 2 "unknown option" \
	kv lookup --lease=5 "$NS"

# ---- pin, renew, unpin, evict
kv pin -t "$NS" 1 2 3 4 5 6 7 8 >"$tmp/out"
lease=$(sed -n 's/^lease  *\([0-9][0-9]*\)$/\1/p' "$tmp/out")
if [ -n "$lease" ] && [ "$lease" != 0 ]; then ok "pin prints a lease"
else bad "pin prints a lease"; cat "$tmp/out" >&2; fi
has "pin: count" "pinned    2 of 2 blocks for 600000 ms" "$tmp/out"
# the lease outlived kvctl's connection
kv status -j >"$tmp/out"
json "pin outlives kvctl" 'assert d["stats"]["leases"] == 1
assert d["stats"]["pinned"] == 2' "$tmp/out"
expect_fail "evict: pinned" 1 'referenced' kv evict "$NS" "$h1"
kv renew -L 30000 "$lease" >"$tmp/out"
has "renew" "lease $lease renewed for 30000 ms" "$tmp/out"
kv unpin "$lease" >"$tmp/out"
has "unpin" "released lease $lease" "$tmp/out"
expect_fail "unpin: twice" 1 "no lease $lease" kv unpin "$lease"
expect_fail "renew: released" 1 "no lease $lease" kv renew "$lease"
expect_fail "unpin: bad id" 2 "lease: '0' is outside" kv unpin 0
expect_fail "pin: bad --lease" 2 '^kvctl pin: --lease' kv pin -L 0 "$NS" "$h0"
expect_fail "pin: --lease too long" 2 '^kvctl pin: --lease' \
	kv pin -L 86400001 "$NS" "$h0"
kv pin -j -L 5000 "$NS" "$h0" "$hz" "$h2" >"$tmp/out"
json "pin --json" 'assert d["count"] == 1 and d["lease_ms"] == 5000
assert int(d["lease"]) > 0' "$tmp/out"
kv pin "$NS" "$hz" "$h2" >"$tmp/out"
has "pin: nothing cached" "lease     0" "$tmp/out"
kv evict "$NS" "$h2" >"$tmp/out"
has "evict" "$h2" "$tmp/out"
kv evict -j "$NS" "$h1" >"$tmp/out"
json "evict --json" 'assert list(d) == ["ok"]' "$tmp/out"
expect_fail "evict: gone" 1 'no such block' kv evict "$NS" "$h1"
kv ls "$NS" >"$tmp/out"
if [ "$(wc -l <"$tmp/out")" -eq 1 ]; then ok "ls after evict"
else bad "ls after evict"; fi

# ---- usage errors and a missing daemon
# without -m, -s or KVFS_SOCKET, kvctl looks for the one kvfs mounted
nmounts=$(grep -c ' fuse\.kvfs ' /proc/mounts || :)
if [ "$nmounts" = 0 ]; then
	expect_fail "no daemon given, none mounted" 2 \
		"^kvctl status: no daemon given and no kvfs mounted" \
		env -u KVFS_SOCKET "$KVCTL" status
else
	echo "skip 'none mounted' ($nmounts kvfs mounts here)"
fi
# global options after the command, as before it
kv status -j >"$tmp/out"
"$KVCTL" status -j -s "$SOCK" >"$tmp/out"
json "status -s SOCKET (after the command)" 'pass' "$tmp/out"
"$KVCTL" lookup --socket="$SOCK" "$NS" "$h0" >"$tmp/out"
has "lookup --socket=SOCKET (after the command)" "1 of 1 blocks" "$tmp/out"
expect_fail "-m before and -s after" 2 'give one' \
	"$KVCTL" -m "$tmp" status -s "$SOCK"
# help after a command prints the help and nothing else, exit 0
for c in lookup pin; do
	rc=0
	kv "$c" -h "$NS" "$h0" >"$tmp/out" 2>"$tmp/err" || rc=$?
	"$KVCTL" help "$c" >"$tmp/want"
	if [ $rc = 0 ] && [ ! -s "$tmp/err" ] &&
		head -n 1 "$tmp/out" | grep -q "^usage: kvctl .* $c " &&
		cmp -s "$tmp/out" "$tmp/want"; then
		ok "$c -h: the help alone"
	else
		bad "$c -h: exit $rc:"
		cat "$tmp/out" "$tmp/err" >&2
	fi
done
for c in status ls stat lookup pin unpin renew evict ns nodes prefetch \
	hash version help; do
	rc=0
	"$KVCTL" "$c" -h >"$tmp/out" 2>"$tmp/err" || rc=$?
	if [ $rc = 0 ] && [ ! -s "$tmp/err" ] && grep -q '^usage: kvctl' "$tmp/out"
	then ok "$c -h"; else bad "$c -h: exit $rc"; fi
done
for o in -V --version; do
	if "$KVCTL" "$o" >"$tmp/out" && grep -q '^kvctl (kvfs) ' "$tmp/out"
	then ok "$o"; else bad "$o"; fi
done
expect_fail "-m and -s" 2 'give one' "$KVCTL" -m "$tmp" -s "$SOCK" status
expect_fail "global: unknown option" 2 "unknown option '--frob'" \
	"$KVCTL" --frob status
expect_fail "status: operand" 2 'too many operands' kv status x
expect_fail "not a socket" 1 'neither a socket nor a kvfs mount' \
	"$KVCTL" -s "$tmp/names" status

stop KILL	# leaves a stale socket file behind
expect_fail "dead daemon: stale socket" 1 \
	"^kvctl status: no kvfs daemon at $SOCK (connection refused)\$" \
	kv status
start		# takes the stale socket over
kv status -j >"$tmp/out"
json "restart over a stale socket" 'pass' "$tmp/out"
stop
if [ -e "$SOCK" ]; then bad "stop removes the socket"
else ok "stop removes the socket"; fi
expect_fail "dead daemon: no socket" 1 \
	"^kvctl lookup: no kvfs daemon at $SOCK (no such file or directory)\$" \
	kv lookup "$NS" "$h0"

# ---- help texts say what kvctl(1) says
if "$KVCTL" help pin | grep -q -e '--lease'; then ok "help pin"
else bad "help pin"; fi
if [ -n "$MANDOC" ]; then
	bs=$(printf '\b')
	"$MANDOC" -Tascii "$top_srcdir/man/kvctl.1" | sed "s/.$bs//g" |
		sed 's/^ *//' >"$tmp/man"
	for c in status ls stat lookup pin unpin renew evict ns; do
		"$KVCTL" "$c" --help >"$tmp/help"
		sed -n 's/^\(usage:\)\{0,1\} *kvctl \[-m mount | -s socket\] //p' \
			"$tmp/help" >"$tmp/syn"
		sed -n 's/^ *\(-[a-zA-Z].* | --.*\)$/\1/p' "$tmp/help" \
			>>"$tmp/syn"
		miss=0
		while IFS= read -r line; do
			grep -q -x -F -e "$line" "$tmp/man" || {
				echo "  not in kvctl(1): $line" >&2
				miss=1
			}
		done <"$tmp/syn"
		if [ "$miss" -eq 0 ] && [ -s "$tmp/syn" ]; then
			ok "$c --help matches kvctl(1)"
		else bad "$c --help matches kvctl(1)"; fi
	done
	"$KVCTL" --help | sed -n 's/^ *\(-[a-z].* | --.*\)$/\1/p' >"$tmp/syn"
	miss=0
	while IFS= read -r line; do
		grep -q -x -F -e "$line" "$tmp/man" || miss=1
	done <"$tmp/syn"
	if [ "$miss" -eq 0 ] && [ -s "$tmp/syn" ]; then
		ok "--help's -m/-s match kvctl(1)"
	else bad "--help's -m/-s match kvctl(1)"; fi
else
	echo "skip --help vs kvctl(1) (MANDOC not set)"
fi

exit $fail

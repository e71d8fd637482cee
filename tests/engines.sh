#!/bin/sh
# engines: every engine file backend of tests/engines/ (SGLang HiCache
# file, LMCache local disk and FS, vLLM offload FS tier and
# ExampleConnector, llama.cpp slots, Mooncake FilePerKey), each doing its
# engine's exact file operations with concurrent writers racing on shared
# keys and concurrent readers checking every byte, on a kvfs mount in
# layout=open with a pool small enough that kvfs evicts while they run
# (a miss is allowed, a wrong or partial file is not).  Then kvfsd is
# killed with SIGKILL in the middle of one workload, restarted on the
# same state and pool, and every file still visible must be intact.
# Last, the backends at real models' file sizes (2 MiB to 256 MiB) on a
# mount with kvfsd's defaults.
#
# ENGINES_DIR=DIR runs the same programs in a fresh directory under DIR
# instead of a mount (a check of the harness on tmpfs or ext4): no kvfsd,
# POSIX semantics (reads torn by in-place writers counted, not failed),
# and the SIGKILL goes to the workload instead of the daemon.
set -eu

T=engines
. "${top_srcdir:-.}/tests/fuse_lib.sh"

PY=${PYTHON3:-}
[ -n "$PY" ] || PY=$(command -v python3 2>/dev/null || true)
[ -n "$PY" ] || skip "python3 not found"
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 8))' 2>/dev/null ||
	skip "$PY is older than 3.8"
ENG=$top_srcdir/tests/engines

SIZE=65536
FILES=32
SECS=120
# every backend, with the variants of its engine worth running
RUNS="lmcache_local_disk:lmcache_local_disk:
lmcache_local_disk:lmcache_odirect:--odirect --capacity 12
sglang_file:sglang_file:--evict 16
sglang_file:sglang_ns:--variant namespace
lmcache_fs:lmcache_fs:--capacity 12
lmcache_fs:lmcache_fs_sib:--tmp-sibling
vllm_offload_fs:vllm_offload_fs:
vllm_example:vllm_example:--files 12
llamacpp_slots:llamacpp_slots:
mooncake_fileperkey:mooncake_fileperkey:--capacity 12"

if [ -n "${ENGINES_DIR:-}" ]; then
	[ -d "$ENGINES_DIR" ] || {
		echo "FAIL ENGINES_DIR=$ENGINES_DIR is no directory" >&2
		exit 1
	}
	tmp=$(mktemp -d "$ENGINES_DIR/$T.XXXXXX")
	D=$tmp/engines
	SEM=posix
	dir_cleanup() {
		rc=$?
		set +e
		for h in $HELPERS; do kill -KILL "$h" 2>/dev/null; done
		wait 2>/dev/null
		rm -rf "$tmp"
		exit "$rc"
	}
	trap dir_cleanup EXIT
	trap 'exit 1' INT TERM HUP
else
	fuse_begin
	# 40 slots of 128 KiB: about a third of what the runs below store,
	# so kvfs evicts while they run; statvfs still says 4 KiB blocks
	OPTS="layout=open,slot_size=128K,slots=40"
	kvfsd_start "$OPTS"
	D=$MNT/engines
	SEM=kvfs
fi
mkdir "$D" # on the mount: a namespace, in which any names and subdirectories
mkdir -p "$D/a/b/c/d" && rmdir "$D/a/b/c/d" "$D/a/b/c" "$D/a/b" "$D/a" &&
	ok "mkdir -p, four levels, and rmdir" || bad "mkdir -p, four levels"

# ---- every backend, one after the other -------------------------------------
run() {
	prog=$1
	dir=$2
	shift 2
	# shellcheck disable=SC2086 # $extra: options, split on blanks
	if timeout $((SECS + 60)) "$PY" "$ENG/$prog.py" "$D/$dir" \
		--files "$FILES" --size "$SIZE" --writers 2 --readers 2 \
		--seconds "$SECS" --semantics "$SEM" "$@" \
		>"$tmp/$dir.out" 2>&1; then
		ok "$dir: $(tail -n 1 "$tmp/$dir.out")"
	else
		bad "$dir: $(tail -n 3 "$tmp/$dir.out")"
	fi
}

echo "$RUNS" | while IFS=: read -r prog dir extra; do
	# shellcheck disable=SC2086 # $extra: options, split on blanks
	run "$prog" "$dir" $extra
	[ "$fail" = 0 ] || exit 1
done || fail=1

# ---- six writers racing on few names, six readers -------------------------
# LMCache's local disk backend writes in place (open "wb", no rename), so
# every racing writer's O_TRUNC open makes a new version: a reader must
# never see a version cut to 0 bytes by another writer's O_TRUNC, nor get
# ESTALE when the name was replaced twice between its lookup and its open
# (either failed one round in ten before they were fixed)
if [ "$fail" = 0 ]; then
	r=0
	while [ $r -lt 20 ]; do
		r=$((r + 1))
		if ! timeout $((SECS + 60)) "$PY" "$ENG/lmcache_local_disk.py" \
			"$D/race$r" --files 30 --size "$SIZE" --writers 6 \
			--readers 6 --seconds "$SECS" --semantics "$SEM" \
			>"$tmp/race.out" 2>&1; then
			bad "racing writers, round $r: $(tail -n 3 "$tmp/race.out")"
			break
		fi
		rm -rf "$D/race$r"
	done
	if [ "$fail" = 0 ]; then
		ok "six writers racing on 30 names, 20 rounds: $(tail -n 1 "$tmp/race.out")"
	fi
fi

if [ -z "${ENGINES_DIR:-}" ]; then
	st=$(stat -f -c %S "$D")
	[ "$st" = 4096 ] && ok "statvfs: f_bsize 4096" ||
		bad "statvfs: f_bsize $st"
	grep -Eq '"evictions":[1-9]' "$MNT/.kvfs/stats" &&
		ok "kvfs evicted while the engines ran" ||
		bad "no eviction: the pool was not under pressure"
fi

# ---- SIGKILL in the middle of a workload -----------------------------------
# llama.cpp: many small writes in place under the final name, the worst
# case for a half-written file
helper "$tmp/kill.out" "$PY" "$ENG/llamacpp_slots.py" "$D/kill" \
	--files 400 --size 100000 --writers 2 --readers 2 --seconds "$SECS" \
	--semantics "$SEM"
work=$HPID
count() { [ "$(find "$D/kill" -type f 2>/dev/null | wc -l)" -ge "$1" ]; }
wait_until 300 count 8 || bad "the workload to kill wrote nothing"
if [ -n "${ENGINES_DIR:-}" ]; then
	# its workers, mid-write, see their parent gone and _exit at once
	kill -KILL "$work" 2>/dev/null
	wait "$work" 2>/dev/null || true
	ok "SIGKILL of the workload in the middle"
else
	kvfsd_kill9
	# its requests fail (ENOTCONN) now: it may only end, with any status
	wait_until 300 gone "$work" && ok "the workload ends after kill -9" ||
		bad "the workload hangs after kvfsd was killed"
	wait "$work" 2>/dev/null || true
	kvfsd_start "$OPTS"
	ok "kvfsd restarted on the same state and pool"
fi

# ---- every file still visible is whole -------------------------------------
verify() {
	prog=$1
	dir=$2
	[ -d "$D/$dir" ] || {
		ok "$dir: gone (all evicted)"
		return
	}
	if timeout $((SECS + 60)) "$PY" "$ENG/$prog.py" "$D/$dir" --verify \
		--seconds "$SECS" --semantics "$SEM" >"$tmp/$dir.v" 2>&1; then
		ok "after the kill, $dir: $(tail -n 1 "$tmp/$dir.v" | sed 's/^[^:]*: verify: //')"
	else
		bad "after the kill, $dir: $(tail -n 3 "$tmp/$dir.v")"
	fi
}
echo "$RUNS
llamacpp_slots:kill:" | while IFS=: read -r prog dir extra; do
	verify "$prog" "$dir"
	[ "$fail" = 0 ] || exit 1
done || fail=1

# ---- and the engines run on the restarted mount ------------------------------
run sglang_file sglang_file --evict 16
run vllm_offload_fs vllm_offload_fs

# ---- real models' sizes, on a mount with kvfsd's defaults ---------------------
# 2 MiB slots; an SGLang page of Llama-3.1-8B is 8 MiB, an LMCache chunk
# 32 MiB, a vLLM block of Llama-3.1-70B 5 MiB, a llama.cpp state hundreds
# of MiB (ENGINES): files bigger than a slot spill (kvfsd(8), slot_size)
if [ -z "${ENGINES_DIR:-}" ]; then
	kvfsd_stop || bad "kvfsd exits 0 at SIGTERM"
	rm -rf "$POOL" "$POOL.d" "$STATE"
	kvfsd_start "layout=open"
	D=$MNT/real
fi
mkdir -p "$D"
real() {
	prog=$1
	dir=$2
	size=$3
	files=$4
	shift 4
	if timeout $((SECS + 60)) "$PY" "$ENG/$prog.py" "$D/$dir" \
		--files "$files" --size "$size" --seconds "$SECS" \
		--semantics "$SEM" "$@" >"$tmp/$dir.out" 2>&1; then
		ok "$dir, $((size / 1048576)) MiB files: $(tail -n 1 "$tmp/$dir.out")"
	else
		bad "$dir, $((size / 1048576)) MiB files: $(tail -n 3 "$tmp/$dir.out")"
	fi
}
real sglang_file sglang_8m 8388608 6 --writers 2 --readers 2
real lmcache_local_disk lmcache_32m 33554432 3 --writers 2 --readers 2
real vllm_offload_fs vllm_5m 5242880 6 --writers 2 --readers 2
real llamacpp_slots llamacpp_256m 268435456 1 --writers 1 --readers 1 \
	--iterations 1

exit "$fail"

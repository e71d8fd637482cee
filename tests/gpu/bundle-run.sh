#!/bin/sh
# run.sh [OUTDIR] - the GPU checks, from a bundle that scripts/gpu-bundle.sh
# made, on a machine with a GPU and none of kvfs's build dependencies:
#
#   1. check_gpu against a kvfsd of 80 slots of 64 KiB: round trip, a
#      batch of 32, all or nothing, references dropped at wait, errors
#   2. torch_roundtrip.py: a PyTorch tensor into kvfs from the device and
#      back (when python3 has torch)
#   3. kvbench gpu: pool <-> device GB/s against cudaMemcpy from pinned
#      memory, 2 MiB and 32 MiB blocks, on a pool of 32 MiB slots
#
# All three run twice: on a mount where /dev/fuse works (else once more
# with --no-mount), then with --no-mount, the checks on its control socket
# (KVFS_GPU_MODES="mount socket" by default).  Each step is under timeout(1); logs go
# to OUTDIR (default ./gpu-out).  Exit 0: all passed, 1: one failed,
# 77: no GPU.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$PWD/gpu-out}
mkdir -p "$out"
LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
bin=$here/bin
start=$(date +%s)
say() { echo "== $* ($(($(date +%s) - start)) s)"; }

if ! nvidia-smi --query-gpu=name,driver_version,memory.total \
	--format=csv,noheader; then
	echo "run.sh: SKIP: nvidia-smi finds no GPU"
	exit 77
fi
uname -sr
grep -m1 'model name' /proc/cpuinfo || true

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvfs-gpu.XXXXXX")
# kvctl for Python, whose own library path is PyTorch's
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$here/lib" "$bin/kvctl" \
	>"$tmp/kvctl"
chmod +x "$tmp/kvctl"
pool=/dev/shm/kvfs-gpu-$$.pool
kpid=
fail=0
stop_kvfsd() {
	[ -n "$kpid" ] || return 0
	kill -TERM "$kpid" 2>/dev/null
	n=0
	while kill -0 "$kpid" 2>/dev/null && [ $n -lt 100 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	kill -KILL "$kpid" 2>/dev/null
	wait "$kpid" 2>/dev/null
	kpid=
	grep -q " $tmp/mnt fuse" /proc/mounts && umount -l "$tmp/mnt"
	rm -rf "$pool" "$pool.d"
	rm -rf "$tmp/state"
}
cleanup() {
	rc=$?
	stop_kvfsd
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# start_kvfsd OPTIONS: sets $target (the mount, or the control socket)
start_kvfsd() {
	mkdir -p "$tmp/mnt"
	target=
	if [ $mode = mount ] && [ -c /dev/fuse ]; then
		timeout -s TERM 300 "$bin/kvfsd" -f \
			-o "state=$tmp/state,pool=$pool,layout=chain,$1" \
			"$tmp/mnt" >>"$out/kvfsd.log" 2>&1 &
		kpid=$!
		n=0
		while [ $n -lt 100 ] && kill -0 "$kpid" 2>/dev/null; do
			if grep -q " $tmp/mnt fuse" /proc/mounts; then
				target=$tmp/mnt
				mkdir "$target/t"
				return 0
			fi
			sleep 0.1
			n=$((n + 1))
		done
		echo "kvfsd did not mount (see kvfsd.log): --no-mount instead"
		stop_kvfsd
	fi
	timeout -s TERM 300 "$bin/kvfsd" -f --no-mount \
		-o "state=$tmp/state,pool=$pool,$1" "$tmp/mnt" \
		>>"$out/kvfsd.log" 2>&1 &
	kpid=$!
	n=0
	while [ ! -S "$tmp/state/ctl.sock" ] && [ $n -lt 100 ]; do
		sleep 0.1
		n=$((n + 1))
	done
	[ -S "$tmp/state/ctl.sock" ] || {
		echo "FAIL kvfsd --no-mount did not start:"
		tail -n 5 "$out/kvfsd.log"
		exit 1
	}
	target=$tmp/state/ctl.sock
	"$bin/kvctl" -s "$target" ns create t >/dev/null
}

steps() {
	say "check_gpu, kvfsd $mode"
	start_kvfsd "slot_size=64K,slots=80"
	echo "kvfsd serves $target"
	rc=0
	KVFS_MNT=$target timeout 180 "$bin/check_gpu" >"$out/check_gpu.log" 2>&1 ||
		rc=$?
	cat "$out/check_gpu.log"
	[ $rc = 0 ] && echo "ok   check_gpu" || {
		echo "FAIL check_gpu (exit $rc)"
		fail=1
	}
	stop_kvfsd

	start_kvfsd "slot_size=32M,slots=40"
	say "torch_roundtrip.py"
	py=$(command -v python3 || true)
	if [ -n "$py" ]; then
		rc=0
		KVCTL=$tmp/kvctl PYTHONPATH=$here/python${PYTHONPATH:+:$PYTHONPATH} \
			KVFS_LIB=$here/pylib/libkvfs.so.0 LD_LIBRARY_PATH=$here/pylib \
			timeout 180 "$py" "$here/torch_roundtrip.py" "$target" t \
			>"$out/torch.log" 2>&1 || rc=$?
		cat "$out/torch.log"
		case $rc in
		0) echo "ok   torch_roundtrip" ;;
		77) echo "SKIP torch_roundtrip" ;;
		*)
			echo "FAIL torch_roundtrip (exit $rc)"
			fail=1
			;;
		esac
	else
		echo "SKIP torch_roundtrip: no python3"
	fi

	say "kvbench gpu"
	rc=0
	timeout 240 "$bin/kvbench" gpu "$target" >"$out/kvbench.log" 2>&1 || rc=$?
	cat "$out/kvbench.log"
	[ $rc = 0 ] && echo "ok   kvbench gpu" || {
		echo "FAIL kvbench gpu (exit $rc)"
		fail=1
	}
	stop_kvfsd
}

# each way kvfsd can serve here: mounted where /dev/fuse works, and
# always with --no-mount (libkvfs on the control socket)
for mode in ${KVFS_GPU_MODES:-mount socket}; do
	steps
done
say "done"
[ $fail = 0 ] && echo "run.sh: PASS" || echo "run.sh: FAIL"
exit $fail

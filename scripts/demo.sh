#!/bin/sh
# The main job of README.md: install what is missing, build, mount kvfs on
# the embedded single-node default in a temporary directory, and run the
# engine emulator on it: every request's KV blocks are looked up, reused
# from files when cached (every byte verified) and written as files when
# not.  Everything made here is removed at the end, even on failure.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
scripts/deps.sh
echo "== building kvfs"
scripts/build.sh build/plain
bin=$top/build/plain

echo
echo "== block names: kvctl hash of 10 tokens in blocks of 4 (the last 2"
echo "   tokens are a partial block and get no name)"
"$bin/src/kvctl/kvctl" hash --namespace llama3-8b --block-tokens 4 1 2 3 4 5 6 7 8 9 10

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvfs-demo.XXXXXX")
pool=/dev/shm/kvfs-demo-$$.pool
mnt=$tmp/mnt
pid=""
cleanup() {
	if grep -q " $mnt fuse" /proc/mounts 2>/dev/null; then
		fusermount3 -u "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	fi
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$pool" "$pool.d"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
mkdir -p "$mnt"

if [ ! -c /dev/fuse ]; then
	echo "no /dev/fuse here: showing the store without the mount instead"
	"$bin/src/kvbench/kvbench" demo
	exit 0
fi

echo
echo "== mounting kvfs on $mnt (pool $pool: 2048 slots of 256 KiB)"
"$bin/fuse/kvfsd" -f -o "state=$tmp/state,pool=$pool,slots=2048,slot_size=256K" "$mnt" &
pid=$!
i=0
until [ -f "$mnt/.kvfs/stats" ]; do
	i=$((i + 1))
	if [ "$i" -gt 100 ] || ! kill -0 "$pid" 2>/dev/null; then
		echo "kvfsd did not come up" >&2
		exit 1
	fi
	sleep 0.1
done

echo
echo "== kvbench engine: an emulated LLM engine serving a generated"
echo "   Mooncake-format trace through the mount"
"$bin/src/kvbench/kvbench" engine "$mnt" --requests 1000 "$@"

echo
echo "== the node after the run (kvctl status)"
"$bin/src/kvctl/kvctl" -m "$mnt" status

echo
echo "== unmounting"
kill "$pid"
wait "$pid" || true
pid=""
echo "done: kvfsd stopped cleanly and the mount is gone"

#!/bin/sh
# Install what kvfs needs to build and test on Debian 12, as root.
# Only missing packages are installed; nothing is done when all are there.
set -eu

PKGS="build-essential autoconf automake libtool pkg-config
libfuse3-dev fuse3 librocksdb-dev liburing-dev libssl-dev check
libibverbs-dev mandoc python3 libmicrohttpd-dev libjson-c-dev libcurl4-openssl-dev etcd-server clang libclang-rt-14-dev
clang-format binutils
libzmq3-dev libmsgpack-dev python3-zmq python3-msgpack"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
		grep -q '^install ok installed' || missing="$missing $p"
done
if [ -z "$missing" ]; then
	echo "deps: all packages present"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing:$missing; run this as root (or: sudo $0)" >&2
	exit 1
fi
echo "deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086 # word splitting is wanted
apt-get install -y -qq --no-install-recommends $missing

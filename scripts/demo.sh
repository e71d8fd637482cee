#!/bin/sh
# The main job of README.md: install what is missing, build, and show kvfs
# on the embedded single-node default.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
scripts/deps.sh
echo "== building kvfs"
scripts/build.sh build/plain
bin=build/plain/src

echo
echo "== kvctl hash: block names of 10 tokens in blocks of 4 (the last 2 tokens"
echo "   are a partial block and get no name)"
echo "\$ kvctl hash --namespace llama3-8b --block-tokens 4 1 2 3 4 5 6 7 8 9 10"
"$bin/kvctl" hash --namespace llama3-8b --block-tokens 4 1 2 3 4 5 6 7 8 9 10

echo
echo "== kvbench demo: an emulated engine reusing KV blocks through the store"
"$bin/kvbench" demo "$@"

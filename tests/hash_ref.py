#!/usr/bin/env python3
"""Reference implementation of the kvfs v1 hash chain, kept independent of
src/hash.c on purpose (hashlib + struct, nothing shared), so a bug in one is
caught by the other.  See kvfs(7), HASH CHAIN.

usage: hash_ref.py NS B [TOKEN ...]     one name per full block, like kvctl
       hash_ref.py --seed NS B          the chain's seed, in hex
       hash_ref.py --sglang B [TOKEN ...]
                                        SGLang HiCache page keys (kvfs(7),
                                        "SGLang chain"), like kvctl hash
                                        -c sglang

Tokens are decimal 0..4294967295, one or more per argument, separated by
whitespace and/or commas.  Exit status: 0 ok, 2 bad arguments.
"""

import hashlib
import os
import re
import struct
import sys

NS_MAX = 255
BLOCK_TOKENS_MAX = 1 << 20


def die(msg):
    sys.stderr.write("hash_ref.py: error: %s\n" % msg)
    sys.exit(2)


def ns_check(ns):
    """ns is bytes; the rules are those of kvfs_ns_valid()."""
    if not 1 <= len(ns) <= NS_MAX:
        die("namespace must be 1..%d bytes" % NS_MAX)
    if b"/" in ns or b"\0" in ns or ns.startswith(b"."):
        die("namespace must not contain '/' or start with '.'")


def seed(ns, block_tokens):
    msg = b"kvfs-v1" + b"\x00" + ns + b"\x00" + struct.pack("<I", block_tokens)
    return hashlib.sha256(msg).digest()


def chain(ns, block_tokens, tokens):
    """Names of the full blocks; a trailing partial block is ignored."""
    prev = seed(ns, block_tokens)
    names = []
    for i in range(len(tokens) // block_tokens):
        block = tokens[i * block_tokens:(i + 1) * block_tokens]
        prev = hashlib.sha256(
            prev + struct.pack("<%dI" % block_tokens, *block)).digest()
        names.append(prev.hex())
    return names


def sglang_chain(page_tokens, tokens):
    """SGLang's page keys, written as SGLang's get_hash_str() does it: one
    hasher per page, the previous page's digest (none for page 0) then
    every token as 4 little-endian bytes; only full pages get a key."""
    keys = []
    prior = None
    for start in range(0, len(tokens) - page_tokens + 1, page_tokens):
        hasher = hashlib.sha256()
        if prior is not None:
            hasher.update(bytes.fromhex(prior))
        for t in tokens[start:start + page_tokens]:
            hasher.update(t.to_bytes(4, byteorder="little", signed=False))
        prior = hasher.hexdigest()
        keys.append(prior)
    return keys


def parse_tokens(args):
    tokens = []
    for arg in args:
        for field in re.split(r"[\s,]+", arg):
            if field == "":
                continue
            if not re.fullmatch(r"[0-9]+", field) or int(field) > 0xFFFFFFFF:
                die('bad token "%s"' % field)
            tokens.append(int(field))
    return tokens


def parse_block_tokens(text):
    if not re.fullmatch(r"[0-9]+", text) or \
            not 1 <= int(text) <= BLOCK_TOKENS_MAX:
        die("block_tokens must be 1..%d" % BLOCK_TOKENS_MAX)
    return int(text)


def main(argv):
    if len(argv) > 0 and argv[0] == "--sglang":
        if len(argv) < 2:
            die("usage: hash_ref.py --sglang B [TOKEN ...]")
        page_tokens = parse_block_tokens(argv[1])
        for key in sglang_chain(page_tokens, parse_tokens(argv[2:])):
            print(key)
        return 0
    want_seed = len(argv) > 0 and argv[0] == "--seed"
    if want_seed:
        argv = argv[1:]
    if len(argv) < 2 or (want_seed and len(argv) != 2):
        die("usage: hash_ref.py [--seed] NS B [TOKEN ...]")
    # the namespace's bytes exactly as given, whatever the locale
    ns = os.fsencode(argv[0])
    ns_check(ns)
    block_tokens = parse_block_tokens(argv[1])
    if want_seed:
        print(seed(ns, block_tokens).hex())
        return 0
    for name in chain(ns, block_tokens, parse_tokens(argv[2:])):
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

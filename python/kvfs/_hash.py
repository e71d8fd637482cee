"""The two hash chains of kvfs(7), HASH CHAIN: no daemon needed."""

import array
import ctypes
import os

from . import _lib


# array('I') is a C unsigned int: 4 bytes on every Linux ABI kvfs builds for
assert array.array("I").itemsize == 4


def tokens_array(tokens):
    """tokens as an array('I') of 32-bit unsigned ints (0..4294967295),
    copied unless it is one already."""
    if isinstance(tokens, array.array) and tokens.typecode == "I":
        return tokens
    try:
        return array.array("I", tokens)
    except OverflowError as e:
        raise ValueError("a token is outside 0..4294967295: %s" % e) from None
    except TypeError as e:
        raise TypeError("tokens must be integers: %s" % e) from None


def ns_bytes(ns):
    """A namespace as the bytes hashed: str through os.fsencode (UTF-8,
    as the file system names it), bytes as they are."""
    if isinstance(ns, str):
        return os.fsencode(ns)
    if isinstance(ns, (bytes, bytearray)):
        return bytes(ns)
    raise TypeError("namespace must be str or bytes, not %s"
                    % type(ns).__name__)


def _block_tokens(n, what):
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError("%s must be an int" % what)
    if not 1 <= n <= _lib.BLOCK_TOKENS_MAX:
        raise ValueError("%s must be 1..%d, not %d"
                         % (what, _lib.BLOCK_TOKENS_MAX, n))
    return n


def _chain(call, b, tokens, what):
    tok = tokens_array(tokens)
    n = len(tok)
    count = n // b
    if count == 0:
        return []
    out = bytearray(count * _lib.HASH_LEN)
    cout = (ctypes.c_ubyte * len(out)).from_buffer(out)
    addr = tok.buffer_info()[0]
    got = _lib.check(call(addr, n, cout, count), what)
    return [bytes(out[i * _lib.HASH_LEN:(i + 1) * _lib.HASH_LEN])
            for i in range(got)]


def hash_chain(ns, block_tokens, tokens):
    """The kvfs v1 names of every full block of block_tokens tokens, as a
    list of 32-byte hashes (a trailing partial block has none).  The same
    code as ``kvctl hash``; ValueError for a bad namespace."""
    nsb = ns_bytes(ns)
    b = _block_tokens(block_tokens, "block_tokens")
    if not 1 <= len(nsb) <= 255 or b"/" in nsb or b"\0" in nsb or \
            nsb.startswith(b"."):
        raise ValueError("bad namespace %r: 1..255 bytes, no '/', not "
                         "starting with '.'" % (ns,))
    lib = _lib.lib()
    return _chain(lambda t, n, o, m: lib.kvfs_hash_chain(nsb, b, t, n, o, m),
                  b, tokens, "kvfs_hash_chain")


def hash_chain_sglang(page_tokens, tokens):
    """SGLang HiCache's page keys of every full page of page_tokens
    tokens: the kvfs chain with no seed (no namespace).  The same code
    as ``kvctl hash -c sglang``."""
    b = _block_tokens(page_tokens, "page_tokens")
    lib = _lib.lib()
    return _chain(lambda t, n, o, m: lib.kvfs_hash_chain_sglang(b, t, n, o,
                                                                  m),
                  b, tokens, "kvfs_hash_chain_sglang")


def hash_tokens(tokens, block_tokens, ns=None, scheme="kvfs"):
    """hash_chain or hash_chain_sglang by name: scheme "kvfs" needs ns,
    "sglang" refuses one (it would not enter the keys)."""
    if scheme == "kvfs":
        if ns is None:
            raise ValueError("scheme 'kvfs' needs a namespace")
        return hash_chain(ns, block_tokens, tokens)
    if scheme == "sglang":
        if ns is not None:
            raise ValueError("scheme 'sglang' has no seed: no namespace")
        return hash_chain_sglang(block_tokens, tokens)
    raise ValueError("unknown scheme %r (kvfs or sglang)" % (scheme,))


def to_hex(h):
    """A 32-byte hash as its 64 lowercase hex digits, by kvfs_hash_to_hex."""
    h = hash_bytes(h)
    src = (ctypes.c_ubyte * _lib.HASH_LEN).from_buffer_copy(h)
    dst = ctypes.create_string_buffer(_lib.HASH_HEX_LEN + 1)
    _lib.lib().kvfs_hash_to_hex(src, dst)
    return dst.value.decode("ascii")


def hash_bytes(h, what="hash"):
    """A block hash given as 32 bytes or as its 64-hex-digit name."""
    if isinstance(h, str):
        if len(h) != _lib.HASH_HEX_LEN or h != h.lower():
            raise ValueError("%s %r is not 64 lowercase hex digits"
                             % (what, h))
        try:
            return bytes.fromhex(h)
        except ValueError:
            raise ValueError("%s %r is not 64 lowercase hex digits"
                             % (what, h)) from None
    try:
        b = bytes(memoryview(h))
    except TypeError:
        raise TypeError("%s must be bytes-like or a hex str, not %s"
                        % (what, type(h).__name__)) from None
    if len(b) != _lib.HASH_LEN:
        raise ValueError("%s must be %d bytes, not %d"
                         % (what, _lib.HASH_LEN, len(b)))
    return b

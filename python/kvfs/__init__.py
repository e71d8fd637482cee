"""kvfs: the Python binding of libkvfs (kvfs.h, libkvfs(3)).

The hash chains work with no daemon::

    import kvfs
    names = kvfs.hash_chain("llama3-8b", 512, tokens)       # kvfs v1
    keys = kvfs.hash_chain_sglang(64, tokens)               # SGLang HiCache

Everything else talks to the kvfsd behind a mountpoint::

    with kvfs.connect("/mnt/kvfs") as k:
        with k.match("llama3-8b", names, lease_ms=5000) as lease:
            blocks = k.map_batch("llama3-8b", names[:lease.count])
            ...                      # blocks[i].data: read-only memoryview
            k.unmap_batch(blocks)

Errors are OSError with errno set (FileNotFoundError for a block that is
not cached, FileExistsError for one that is); bad arguments are
ValueError or TypeError.  libkvfs.so is found through $KVFS_LIB, else
ctypes.util.find_library("kvfs"); LibraryNotFoundError says when neither
works.  See README.md.
"""

from ._conn import Block, Copy, Kvfs, Lease, Writer, connect
from ._hash import (hash_bytes, hash_chain, hash_chain_sglang, hash_tokens,
                    to_hex)
from ._lib import (BLOCK_TOKENS_MAX, HASH_HEX_LEN, HASH_LEN,
                   LibraryNotFoundError, lib)

__all__ = [
    "BLOCK_TOKENS_MAX", "HASH_HEX_LEN", "HASH_LEN", "Block", "Copy", "Kvfs",
    "Lease", "LibraryNotFoundError", "Writer", "connect", "hash_bytes",
    "hash_chain", "hash_chain_sglang", "hash_tokens", "lib", "to_hex",
]
__version__ = "0.1.0"

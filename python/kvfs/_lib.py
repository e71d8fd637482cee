"""Finding and declaring libkvfs (kvfs.h) for ctypes.

The library is looked up once, on first use, so that ``import kvfs``
works on a machine without it (and says why at the first call):

1. ``$KVFS_LIB``: a path to libkvfs.so (a build tree's
   ``src/libkvfs/.libs/libkvfs.so``, say);
2. ``ctypes.util.find_library("kvfs")``: an installed libkvfs.

Every C call returns 0 (or a count) or a negative errno; ``check()``
turns the negative ones into ``OSError`` (Python picks the subclass:
``FileNotFoundError`` for ENOENT, ``FileExistsError`` for EEXIST, ...).
"""

import ctypes
import ctypes.util
import os
import threading

HASH_LEN = 32
HASH_HEX_LEN = 64
BLOCK_TOKENS_MAX = 1 << 20

_lock = threading.Lock()
_lib = None


class LibraryNotFoundError(OSError):
    """libkvfs could not be loaded: neither $KVFS_LIB nor an installed
    libkvfs.so."""


class _GpuBlock(ctypes.Structure):
    """struct kvfs_gpu_block"""
    _fields_ = [
        ("hash", ctypes.c_void_p),
        ("parent", ctypes.c_void_p),
        ("dev", ctypes.c_void_p),
        ("len", ctypes.c_size_t),
    ]


_P = ctypes.c_void_p
_PP = ctypes.POINTER(ctypes.c_void_p)
_SZ = ctypes.c_size_t
_PSZ = ctypes.POINTER(ctypes.c_size_t)
_INT = ctypes.c_int
_LONG = ctypes.c_long
_U32 = ctypes.c_uint32
_STR = ctypes.c_char_p

# name: (restype, argtypes); the order and types of kvfs.h
_PROTOS = {
    "kvfs_connect": (_INT, [_STR, _PP]),
    "kvfs_disconnect": (None, [_P]),
    "kvfs_hash_chain": (_LONG, [_STR, _U32, _P, _SZ, _P, _SZ]),
    "kvfs_hash_chain_sglang": (_LONG, [_U32, _P, _SZ, _P, _SZ]),
    "kvfs_hash_to_hex": (None, [_P, _P]),
    "kvfs_match": (_LONG, [_P, _STR, _P, _SZ, _U32,
                           ctypes.POINTER(ctypes.c_uint64)]),
    "kvfs_release": (_INT, [_P, ctypes.c_uint64]),
    "kvfs_map": (_INT, [_P, _STR, _P, _PP, _PSZ]),
    "kvfs_unmap": (_INT, [_P, _P]),
    "kvfs_map_batch": (_LONG, [_P, _STR, _P, _SZ, _PP, _PSZ]),
    "kvfs_unmap_batch": (_INT, [_P, _PP, _SZ]),
    "kvfs_write": (_INT, [_P, _STR, _P, _P, _SZ]),
    "kvfs_alloc": (_INT, [_P, _STR, _P, _P, _PP, _PSZ, _PP]),
    "kvfs_commit": (_INT, [_P, _SZ]),
    "kvfs_abort": (_INT, [_P]),
    "kvfs_gpu_register": (_INT, [_P]),
    "kvfs_copy_to_device": (_INT, [_P, _STR, _P, _P, _SZ, _PSZ, _P, _PP]),
    "kvfs_copy_from_device": (_INT, [_P, _STR, _P, _P, _P, _SZ, _P, _PP]),
    "kvfs_copy_to_device_batch": (_INT, [_P, _STR,
                                         ctypes.POINTER(_GpuBlock), _SZ,
                                         _P, _PP]),
    "kvfs_copy_from_device_batch": (_INT, [_P, _STR,
                                           ctypes.POINTER(_GpuBlock), _SZ,
                                           _P, _PP]),
    "kvfs_copy_wait": (_INT, [_P]),
    "kvfs_copy_poll": (_INT, [_P]),
}


def _open():
    path = os.environ.get("KVFS_LIB")
    how = "KVFS_LIB=%s" % path
    if not path:
        path = ctypes.util.find_library("kvfs")
        how = "find_library('kvfs') found %s" % path
    if not path:
        raise LibraryNotFoundError(
            "libkvfs not found: set KVFS_LIB to the path of libkvfs.so "
            "(a build tree's src/libkvfs/.libs/libkvfs.so) or install "
            "libkvfs where the dynamic linker finds it")
    try:
        lib = ctypes.CDLL(path, use_errno=False)
    except OSError as e:
        raise LibraryNotFoundError("libkvfs could not be loaded (%s): %s"
                                   % (how, e)) from e
    missing = []
    for name, (res, args) in _PROTOS.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.restype = res
        fn.argtypes = args
    if missing:
        # kvfs_hash_chain_sglang came with version node KVFS_1.2
        raise LibraryNotFoundError(
            "%s is too old for this binding (%s): it lacks %s"
            % (path, how, ", ".join(missing)))
    return lib


def lib():
    """The loaded libkvfs (a ctypes.CDLL), loading it on first use."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib = _open()
    return _lib


def check(rc, what, filename=None):
    """rc as returned by a kvfs.h call: a negative errno raises OSError,
    else rc is returned."""
    if rc < 0:
        err = -rc
        raise OSError(err, "%s (%s)" % (os.strerror(err), what), filename)
    return rc

"""A connection to a kvfsd (struct kvfs): match, map, write, GPU copies.

Lifetimes follow kvfs.h: what a connection takes (leases, maps, writers)
belongs to it, and the daemon drops all of it when the connection is
closed or the process dies.  The memoryviews handed out point into the
connection's own mapping of the node's pool: they are released (any use
then raises ValueError) when their block is unmapped, committed or
aborted, or the connection closed.  A slice taken from one is a view of
its own that Python cannot release: do not keep one past that point.

A connection is safe to share between threads: its calls are serialized
by a lock (libkvfs's handle is not thread-safe, and ctypes drops the GIL
during a call).
"""

import ctypes
import errno
import threading
import weakref

from . import _lib
from ._hash import hash_bytes, ns_bytes

_H = _lib.HASH_LEN


def _hashes(hashes):
    """A sequence of hashes as one C array of n * 32 bytes, and n."""
    raw = b"".join(hash_bytes(h) for h in hashes)
    n = len(raw) // _H
    return (ctypes.c_ubyte * max(len(raw), 1)).from_buffer_copy(
        raw or b"\0"), n


def _view(ptr, length, readonly):
    arr = (ctypes.c_ubyte * length).from_address(ptr) if length else \
        (ctypes.c_ubyte * 0)()
    mv = memoryview(arr).cast("B")
    return mv.toreadonly() if readonly else mv


def _release(mv):
    if mv is not None:
        try:
            mv.release()
        except BufferError:
            pass  # a view derived from it is still exported


class Lease:
    """The pin of a match with lease_ms > 0: count blocks pinned under
    lease id ``lease`` (0: nothing was pinned).  ``release()`` or a with
    block lets them go before the lease expires."""

    def __init__(self, conn, count, lease):
        self._conn = conn
        self.count = count
        self.lease = lease

    def release(self):
        """Release the lease now (a no-op when nothing was pinned, it was
        released already or the connection is closed); FileNotFoundError
        when it expired."""
        if self.lease and not self._conn.closed:
            lease, self.lease = self.lease, 0
            self._conn.release(lease)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        return "Lease(count=%d, lease=%d)" % (self.count, self.lease)


class Block:
    """One mapped block (kvfs_map): ``data`` is a read-only memoryview of
    its bytes in the pool, with no copy.  The block is neither evicted
    nor reused until ``unmap()`` (or the end of a with block, or the
    connection's close)."""

    def __init__(self, conn, ns, h, ptr, length):
        self._conn = conn
        self.ns = ns
        self.hash = h
        self._ptr = ptr
        self.data = _view(ptr, length, True)

    def __len__(self):
        return 0 if self.data is None else len(self.data)

    @property
    def mapped(self):
        return self._ptr is not None

    def unmap(self):
        """Unmap; data is released.  A no-op once unmapped."""
        if self._ptr is not None:
            self._conn.unmap(self)

    def _drop(self):
        self._ptr = None
        _release(self.data)
        self.data = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.unmap()

    def __repr__(self):
        return "Block(%s/%s, %s)" % (self.ns, self.hash.hex(),
                                     "%d bytes" % len(self) if self.mapped
                                     else "unmapped")


class Writer:
    """A zero-copy writer (kvfs_alloc): fill ``buffer``, a writable
    memoryview of ``cap`` bytes in a fresh pool slot, then ``commit(n)``
    to seal its first n bytes as the block, or ``abort()``.  A with block
    aborts a writer neither committed nor aborted in it."""

    def __init__(self, conn, wb, ptr, cap):
        self._conn = conn
        self._wb = wb
        self.cap = cap
        self.buffer = _view(ptr, cap, False)

    def _done(self):
        self._wb = None
        _release(self.buffer)
        self.buffer = None

    def commit(self, length):
        """Seal the first length bytes; the block is visible from now.
        OSError EFBIG when length > cap (the writer stays: abort it)."""
        if self._wb is None:
            raise ValueError("writer committed or aborted already")
        if length < 0:
            raise ValueError("length must be >= 0")
        with self._conn._lock:
            self._conn._check_open()
            rc = self._conn._lib.kvfs_commit(self._wb, length)
            if rc != -errno.EFBIG:
                self._conn._writers.discard(self)
                self._done()
        _lib.check(rc, "kvfs_commit")

    def abort(self):
        """Drop the slot; nobody ever sees the block.  A no-op when the
        writer is over."""
        if self._wb is None:
            return
        with self._conn._lock:
            if self._conn._k is None:
                return  # the close aborted it
            rc = self._conn._lib.kvfs_abort(self._wb)
            self._conn._writers.discard(self)
            self._done()
        _lib.check(rc, "kvfs_abort")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.abort()


class Copy:
    """A GPU copy in flight (struct kvfs_copy): ``wait()`` or ``poll()``
    it to its end; ``lens`` holds the block sizes of a copy to the
    device."""

    def __init__(self, conn, cp, lens, keep):
        self._conn = conn
        self._cp = cp
        self.lens = lens
        self._keep = keep  # the C buffers the copy was given

    def wait(self):
        """Block until done, drop the references (sealing the blocks of a
        copy from the device).  OSError EIO when the device failed.  A
        no-op once the connection is closed: the close waited for it."""
        if self._cp is None:
            return
        with self._conn._lock:
            if self._conn._k is None:
                self._cp = None
                return
            rc = self._conn._lib.kvfs_copy_wait(self._cp)
            self._cp = None
        _lib.check(rc, "kvfs_copy_wait")

    def poll(self):
        """True (and as wait()) when complete, False while not."""
        if self._cp is None:
            return True
        with self._conn._lock:
            if self._conn._k is None:
                self._cp = None
                return True
            rc = self._conn._lib.kvfs_copy_poll(self._cp)
            if rc != -errno.EAGAIN:
                self._cp = None
        if rc == -errno.EAGAIN:
            return False
        _lib.check(rc, "kvfs_copy_poll")
        return True


class Kvfs:
    """A connection to the kvfsd serving ``mountpoint`` (kvfs_connect).
    FileNotFoundError / ConnectionRefusedError when no daemon answers.
    Close it with ``close()`` or a with block."""

    def __init__(self, mountpoint):
        self._lib = _lib.lib()
        self._lock = threading.RLock()
        self._blocks = weakref.WeakSet()
        self._writers = weakref.WeakSet()
        self.mountpoint = str(mountpoint)
        k = ctypes.c_void_p()
        _lib.check(self._lib.kvfs_connect(ns_bytes(self.mountpoint),
                                          ctypes.byref(k)),
                   "kvfs_connect", self.mountpoint)
        self._k = k

    # ---- lifetime ---------------------------------------------------

    @property
    def closed(self):
        return self._k is None

    def close(self):
        """Disconnect: every lease, map and writer of this connection is
        released; their memoryviews are released too."""
        with self._lock:
            if self._k is None:
                return
            for b in list(self._blocks):
                b._drop()
            for w in list(self._writers):
                w._done()
            self._lib.kvfs_disconnect(self._k)
            self._k = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _check_open(self):
        if self._k is None:
            raise ValueError("kvfs connection is closed")

    # ---- prefix match -----------------------------------------------

    def match(self, ns, hashes, lease_ms=0):
        """Length K of the longest cached prefix of hashes in ns, one round
        trip.  With lease_ms > 0 returns a Lease pinning those K blocks
        (lease.count is K) instead of K."""
        nsb = ns_bytes(ns)
        arr, n = _hashes(hashes)
        if not 0 <= lease_ms <= 0xFFFFFFFF:
            raise ValueError("lease_ms must be 0..4294967295")
        lease = ctypes.c_uint64(0)
        with self._lock:
            self._check_open()
            rc = self._lib.kvfs_match(self._k, nsb, arr, n, lease_ms,
                                      ctypes.byref(lease) if lease_ms
                                      else None)
        count = _lib.check(rc, "kvfs_match", ns)
        if not lease_ms:
            return count
        return Lease(self, count, lease.value)

    def release(self, lease):
        """Release a lease id (or a Lease) now; FileNotFoundError when it
        was released or expired already."""
        if isinstance(lease, Lease):
            return lease.release()
        with self._lock:
            self._check_open()
            rc = self._lib.kvfs_release(self._k, lease)
        _lib.check(rc, "kvfs_release")

    # ---- zero-copy read ---------------------------------------------

    def map(self, ns, h):
        """Map one sealed block: a Block whose data is a read-only
        memoryview.  FileNotFoundError when it is not cached."""
        nsb = ns_bytes(ns)
        hb = hash_bytes(h)
        src = (ctypes.c_ubyte * _H).from_buffer_copy(hb)
        ptr = ctypes.c_void_p()
        length = ctypes.c_size_t()
        with self._lock:
            self._check_open()
            rc = self._lib.kvfs_map(self._k, nsb, src, ctypes.byref(ptr),
                                    ctypes.byref(length))
            _lib.check(rc, "kvfs_map", "%s/%s" % (ns, hb.hex()))
            b = Block(self, ns, hb, ptr.value, length.value)
            self._blocks.add(b)
        return b

    def map_batch(self, ns, hashes):
        """Map the longest cached prefix of hashes in one round trip: a
        list of K Blocks (K may be 0)."""
        nsb = ns_bytes(ns)
        hbs = [hash_bytes(h) for h in hashes]
        arr, n = _hashes(hbs)
        ptrs = (ctypes.c_void_p * max(n, 1))()
        lens = (ctypes.c_size_t * max(n, 1))()
        with self._lock:
            self._check_open()
            rc = self._lib.kvfs_map_batch(self._k, nsb, arr, n, ptrs, lens)
            count = _lib.check(rc, "kvfs_map_batch", ns)
            out = [Block(self, ns, hbs[i], ptrs[i], lens[i])
                   for i in range(count)]
            for b in out:
                self._blocks.add(b)
        return out

    def unmap(self, block):
        """Unmap one Block (as block.unmap())."""
        self.unmap_batch([block])

    def unmap_batch(self, blocks):
        """Unmap many Blocks in one request.  ValueError, and none is
        unmapped, when one is not mapped on this connection or is named
        twice."""
        blocks = list(blocks)
        for b in blocks:
            if not isinstance(b, Block) or b._conn is not self or \
                    b._ptr is None:
                raise ValueError("%r is not mapped on this connection"
                                 % (b,))
        if len(set(map(id, blocks))) != len(blocks):
            raise ValueError("a block is named twice")
        ptrs = (ctypes.c_void_p * max(len(blocks), 1))(
            *[b._ptr for b in blocks])
        with self._lock:
            self._check_open()
            rc = self._lib.kvfs_unmap_batch(self._k, ptrs, len(blocks))
            _lib.check(rc, "kvfs_unmap_batch")
            for b in blocks:
                self._blocks.discard(b)
                b._drop()

    # ---- writing ----------------------------------------------------

    def write(self, ns, h, data):
        """Store data (any bytes-like object) as block h of ns through
        the mount; FileExistsError when it is cached already."""
        nsb = ns_bytes(ns)
        hb = hash_bytes(h)
        src = (ctypes.c_ubyte * _H).from_buffer_copy(hb)
        if isinstance(data, bytes):
            buf, n = data, len(data)  # ctypes passes its own buffer
        else:
            mv = memoryview(data)
            if mv.readonly or not mv.c_contiguous:
                buf = bytes(mv)  # no way to lend it without a copy
                n = len(buf)
            else:
                mv = mv.cast("B")
                n = len(mv)
                buf = (ctypes.c_ubyte * n).from_buffer(mv) if n else None
        with self._lock:
            self._check_open()
            rc = self._lib.kvfs_write(self._k, nsb, src, buf, n)
        _lib.check(rc, "kvfs_write", "%s/%s" % (ns, hb.hex()))

    def alloc(self, ns, h, parent=None):
        """A zero-copy Writer for block h of ns (parent: the hash before
        it in the chain, or None for the first).  FileExistsError when it
        is cached or being written, OSError ENOSPC when no slot is
        free."""
        nsb = ns_bytes(ns)
        hb = hash_bytes(h)
        src = (ctypes.c_ubyte * _H).from_buffer_copy(hb)
        par = None if parent is None else (ctypes.c_ubyte * _H) \
            .from_buffer_copy(hash_bytes(parent, "parent"))
        ptr = ctypes.c_void_p()
        cap = ctypes.c_size_t()
        wb = ctypes.c_void_p()
        with self._lock:
            self._check_open()
            rc = self._lib.kvfs_alloc(self._k, nsb, src, par,
                                      ctypes.byref(ptr), ctypes.byref(cap),
                                      ctypes.byref(wb))
            _lib.check(rc, "kvfs_alloc", "%s/%s" % (ns, hb.hex()))
            w = Writer(self, wb, ptr.value, cap.value)
            self._writers.add(w)
        return w

    # ---- GPU (CUDA) -------------------------------------------------
    # Device memory and streams are plain integers: a CUDA device pointer
    # (torch's tensor.data_ptr(), cupy's .data.ptr) and a cudaStream_t
    # (torch's stream.cuda_stream; None or 0 the default stream).
    # OSError ENOTSUP in a libkvfs built without CUDA, ENODEV with no GPU.

    def gpu_register(self):
        """Pin the pool for DMA now rather than at the first copy."""
        with self._lock:
            self._check_open()
            rc = self._lib.kvfs_gpu_register(self._k)
        _lib.check(rc, "kvfs_gpu_register")

    def copy_to_device(self, ns, h, dev, cap, stream=None):
        """Copy block h of ns to device memory dev (cap bytes of room):
        a Copy, whose lens[0] is the block's size."""
        nsb = ns_bytes(ns)
        src = (ctypes.c_ubyte * _H).from_buffer_copy(hash_bytes(h))
        length = ctypes.c_size_t()
        cp = ctypes.c_void_p()
        with self._lock:
            self._check_open()
            rc = self._lib.kvfs_copy_to_device(self._k, nsb, src, dev, cap,
                                               ctypes.byref(length), stream,
                                               ctypes.byref(cp))
        _lib.check(rc, "kvfs_copy_to_device", ns)
        return Copy(self, cp, [length.value], src)

    def copy_from_device(self, ns, h, dev, length, parent=None,
                         stream=None):
        """Store length bytes at device pointer dev as block h of ns,
        sealed when the Copy is waited for."""
        nsb = ns_bytes(ns)
        src = (ctypes.c_ubyte * _H).from_buffer_copy(hash_bytes(h))
        par = None if parent is None else (ctypes.c_ubyte * _H) \
            .from_buffer_copy(hash_bytes(parent, "parent"))
        cp = ctypes.c_void_p()
        with self._lock:
            self._check_open()
            rc = self._lib.kvfs_copy_from_device(self._k, nsb, src, par, dev,
                                                 length, stream,
                                                 ctypes.byref(cp))
        _lib.check(rc, "kvfs_copy_from_device", ns)
        return Copy(self, cp, [], (src, par))

    def _gpu_blocks(self, blocks, to_device):
        keep = []
        arr = (_lib._GpuBlock * max(len(blocks), 1))()
        for i, blk in enumerate(blocks):
            if to_device:
                h, dev, length = blk
                parent = None
            else:
                h, dev, length, parent = (tuple(blk) + (None,))[:4]
            hb = (ctypes.c_ubyte * _H).from_buffer_copy(hash_bytes(h))
            keep.append(hb)
            arr[i].hash = ctypes.addressof(hb)
            if parent is not None:
                pb = (ctypes.c_ubyte * _H).from_buffer_copy(
                    hash_bytes(parent, "parent"))
                keep.append(pb)
                arr[i].parent = ctypes.addressof(pb)
            arr[i].dev = dev
            arr[i].len = length
        keep.append(arr)
        return arr, keep

    def copy_to_device_batch(self, ns, blocks, stream=None):
        """blocks: (hash, dev, cap) each.  One Copy for all, lens the
        blocks' sizes; when one fails nothing is copied."""
        nsb = ns_bytes(ns)
        blocks = list(blocks)
        arr, keep = self._gpu_blocks(blocks, True)
        cp = ctypes.c_void_p()
        with self._lock:
            self._check_open()
            rc = self._lib.kvfs_copy_to_device_batch(
                self._k, nsb, arr, len(blocks), stream, ctypes.byref(cp))
        _lib.check(rc, "kvfs_copy_to_device_batch", ns)
        return Copy(self, cp, [arr[i].len for i in range(len(blocks))],
                    keep)

    def copy_from_device_batch(self, ns, blocks, stream=None):
        """blocks: (hash, dev, length[, parent]) each.  One Copy for all;
        the blocks are sealed when it is waited for."""
        nsb = ns_bytes(ns)
        blocks = list(blocks)
        arr, keep = self._gpu_blocks(blocks, False)
        cp = ctypes.c_void_p()
        with self._lock:
            self._check_open()
            rc = self._lib.kvfs_copy_from_device_batch(
                self._k, nsb, arr, len(blocks), stream, ctypes.byref(cp))
        _lib.check(rc, "kvfs_copy_from_device_batch", ns)
        return Copy(self, cp, [], keep)


def connect(mountpoint):
    """Kvfs(mountpoint)."""
    return Kvfs(mountpoint)

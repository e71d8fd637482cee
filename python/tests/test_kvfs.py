"""Tests of the kvfs Python binding (python/kvfs) over libkvfs.

Run by tests/python_binding.sh with KVFS_LIB set to the built library.
The hash tests need no daemon.  The others need one mounted on $KVFS_MNT
with a pool of 64 KiB slots and the namespace "p" there (the script
starts it); without KVFS_MNT they are skipped.

The SGLang reference below is independent of libkvfs: hashlib, written
as SGLang's own get_hash_str() is.
"""

import errno
import hashlib
import os
import random
import struct
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import kvfs  # noqa: E402

MNT = os.environ.get("KVFS_MNT")
NS = "p"
SLOT_SIZE = 65536


def ref_kvfs(ns, b, tok):
    h = hashlib.sha256(b"kvfs-v1\0" + ns + b"\0" + struct.pack("<I", b))
    h = h.digest()
    out = []
    for i in range(len(tok) // b):
        h = hashlib.sha256(h + struct.pack("<%dI" % b,
                                           *tok[i * b:(i + 1) * b])).digest()
        out.append(h)
    return out


def ref_sglang(b, tok):
    out, prior = [], None
    for i in range(len(tok) // b):
        hasher = hashlib.sha256()
        if prior is not None:
            hasher.update(prior)
        for t in tok[i * b:(i + 1) * b]:
            hasher.update(t.to_bytes(4, "little"))
        prior = hasher.digest()
        out.append(prior)
    return out


class HashTest(unittest.TestCase):
    def test_kvfs_pinned(self):
        # tests/check_hash.c EX_0, EX_1 (tests/hash_ref.py)
        got = kvfs.hash_chain("llama3-8b", 4, list(range(1, 11)))
        self.assertEqual([h.hex() for h in got], [
            "1619866375d4acda39d6312b1e05d85f50a7be1171b26c088f2c354f8de51f34",
            "ca36b31ae4aec98828ba4565de41684c91db58094045e2f5cdf37838006adf5a",
        ])

    def test_sglang_pinned(self):
        # tests/check_hash.c SG_0, SG_1 (tests/hash_ref.py --sglang)
        got = kvfs.hash_chain_sglang(4, range(1, 11))
        self.assertEqual([h.hex() for h in got], [
            "cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72",
            "4ebfa8a1f3c341517621838c6e1b9aa350307e3f00b3cbd1a07ef740f54396d6",
        ])
        # page 0 is its tokens alone: SHA-256 of four zero bytes
        self.assertEqual(kvfs.hash_chain_sglang(1, [0])[0],
                         hashlib.sha256(b"\0" * 4).digest())

    def test_random_against_hashlib(self):
        rng = random.Random(16)
        for _ in range(40):
            b = rng.randint(1, 40)
            tok = [rng.choice([0, 2**32 - 1, rng.randrange(2**32)])
                   for _ in range(rng.randint(0, 200))]
            ns = "".join(rng.choice("az09-_.\u00fc\u4e2d")
                         for _ in range(rng.randint(1, 12)))
            if ns.startswith("."):
                ns = "n" + ns
            self.assertEqual(kvfs.hash_chain(ns, b, tok),
                             ref_kvfs(ns.encode(), b, tok))
            self.assertEqual(kvfs.hash_chain_sglang(b, tok),
                             ref_sglang(b, tok))

    def test_hash_tokens_by_scheme(self):
        tok = list(range(100))
        self.assertEqual(kvfs.hash_tokens(tok, 8, ns="m"),
                         kvfs.hash_chain("m", 8, tok))
        self.assertEqual(kvfs.hash_tokens(tok, 8, scheme="sglang"),
                         kvfs.hash_chain_sglang(8, tok))
        with self.assertRaises(ValueError):
            kvfs.hash_tokens(tok, 8, scheme="vllm")
        with self.assertRaises(ValueError):
            kvfs.hash_tokens(tok, 8, ns="m", scheme="sglang")
        with self.assertRaises(ValueError):
            kvfs.hash_tokens(tok, 8)

    def test_partial_and_empty(self):
        self.assertEqual(kvfs.hash_chain_sglang(4, [1, 2, 3]), [])
        self.assertEqual(kvfs.hash_chain("m", 4, []), [])
        self.assertEqual(kvfs.hash_chain("m", 4, range(9)),
                         kvfs.hash_chain("m", 4, range(8)))

    def test_bad_arguments(self):
        for ns in ("", ".kvfs", "a/b", "x" * 256):
            with self.assertRaises(ValueError, msg=repr(ns)):
                kvfs.hash_chain(ns, 4, [1, 2, 3, 4])
        for b in (0, kvfs.BLOCK_TOKENS_MAX + 1, -1):
            with self.assertRaises(ValueError):
                kvfs.hash_chain_sglang(b, [1])
        with self.assertRaises(TypeError):
            kvfs.hash_chain_sglang(1.5, [1])
        with self.assertRaises(ValueError):
            kvfs.hash_chain_sglang(1, [2**32])
        with self.assertRaises(ValueError):
            kvfs.hash_chain_sglang(1, [-1])

    def test_to_hex_and_hash_bytes(self):
        h = bytes(range(32))
        self.assertEqual(kvfs.to_hex(h), h.hex())
        self.assertEqual(kvfs.hash_bytes(h.hex()), h)
        for bad in ("AB" * 32, "ab" * 31, "zz" * 32):
            with self.assertRaises(ValueError):
                kvfs.hash_bytes(bad)
        with self.assertRaises(ValueError):
            kvfs.hash_bytes(b"short")
        with self.assertRaises(TypeError):
            kvfs.hash_bytes(42)


class LibraryTest(unittest.TestCase):
    def test_missing_library_is_a_clear_error(self):
        import subprocess
        env = dict(os.environ, KVFS_LIB="/nonexistent/libkvfs.so")
        code = ("import kvfs\n"
                "try:\n"
                "    kvfs.hash_chain_sglang(1, [1])\n"
                "except kvfs.LibraryNotFoundError as e:\n"
                "    print('LNF', e)\n")
        out = subprocess.run([sys.executable, "-c", code], env=env,
                             cwd=os.path.dirname(HERE),
                             stdout=subprocess.PIPE, check=True).stdout
        self.assertIn(b"LNF libkvfs could not be loaded (KVFS_LIB=", out)


def name(t, i):
    """block i of test t: a name no other test uses"""
    return bytes([t, i & 0xff, i >> 8]) + b"\x5a" * 29


def pattern(n, seed):
    return bytes((i * 31 + seed) & 0xff for i in range(n))


@unittest.skipUnless(MNT, "KVFS_MNT not set: no daemon to talk to")
class DaemonTest(unittest.TestCase):
    def setUp(self):
        self.k = kvfs.connect(MNT)

    def tearDown(self):
        self.k.close()

    def test_write_then_map_byte_exact(self):
        data = pattern(5000, 1)
        self.k.write(NS, name(1, 0), data)
        with self.k.map(NS, name(1, 0)) as blk:
            self.assertEqual(len(blk), len(data))
            self.assertEqual(bytes(blk.data), data)
            self.assertTrue(blk.data.readonly)
        self.assertFalse(blk.mapped)
        self.assertIsNone(blk.data)
        # the same bytes through the file system
        with open(os.path.join(MNT, NS, name(1, 0).hex()), "rb") as f:
            self.assertEqual(f.read(), data)
        # a bytearray and a memoryview are written as they are
        self.k.write(NS, name(1, 1).hex(), bytearray(b"xyz"))
        self.k.write(NS, name(1, 2), memoryview(b"0123456789")[2:6])
        with self.k.map(NS, name(1, 1)) as b1, \
                self.k.map(NS, name(1, 2)) as b2:
            self.assertEqual(bytes(b1.data), b"xyz")
            self.assertEqual(bytes(b2.data), b"2345")

    def test_map_is_read_only(self):
        self.k.write(NS, name(2, 0), b"abcd")
        blk = self.k.map(NS, name(2, 0))
        with self.assertRaises(TypeError):
            blk.data[0] = 0x41
        with self.assertRaises(TypeError):
            blk.data[0:2] = b"zz"
        self.assertEqual(bytes(blk.data), b"abcd")
        view = blk.data
        blk.unmap()
        with self.assertRaises(ValueError):
            view[0]  # released with the map
        blk.unmap()  # twice is a no-op

    def test_write_existing_is_file_exists(self):
        self.k.write(NS, name(3, 0), b"one")
        with self.assertRaises(FileExistsError) as cm:
            self.k.write(NS, name(3, 0), b"two")
        self.assertEqual(cm.exception.errno, errno.EEXIST)

    def test_missing_block_is_file_not_found(self):
        with self.assertRaises(FileNotFoundError) as cm:
            self.k.map(NS, name(4, 0))
        self.assertEqual(cm.exception.errno, errno.ENOENT)
        self.assertIn("kvfs_map", str(cm.exception))
        self.assertIn(name(4, 0).hex(), str(cm.exception))
        with self.assertRaises(FileNotFoundError):
            self.k.map("no-such-ns", name(4, 0))
        with self.assertRaises(FileNotFoundError):
            self.k.match("no-such-ns", [name(4, 0)])

    def test_match_and_lease(self):
        hs = [name(5, i) for i in range(4)]
        for i in range(3):
            self.k.write(NS, hs[i], pattern(100, i))
        self.assertEqual(self.k.match(NS, hs), 3)
        self.assertEqual(self.k.match(NS, hs[3:]), 0)
        self.assertEqual(self.k.match(NS, []), 0)
        with self.k.match(NS, hs, lease_ms=60000) as lease:
            self.assertEqual(lease.count, 3)
            self.assertNotEqual(lease.lease, 0)
            lid = lease.lease
        self.assertEqual(lease.lease, 0)
        # released: a second release of the id is ENOENT
        with self.assertRaises(FileNotFoundError):
            self.k.release(lid)
        nothing = self.k.match(NS, hs[3:], lease_ms=1000)
        self.assertEqual((nothing.count, nothing.lease), (0, 0))
        nothing.release()

    def test_lease_pins_against_eviction(self):
        # the pool holds POOL_SLOTS blocks: a pinned one survives a flood
        pinned = name(6, 0)
        self.k.write(NS, pinned, pattern(SLOT_SIZE, 9))
        lease = self.k.match(NS, [pinned], lease_ms=60000)
        self.assertEqual(lease.count, 1)
        for i in range(1, 20):
            try:
                self.k.write(NS, name(6, i), pattern(1000, i))
            except OSError as e:
                self.assertEqual(e.errno, errno.ENOSPC)
        self.assertEqual(self.k.match(NS, [pinned]), 1)
        with self.k.map(NS, pinned) as blk:
            self.assertEqual(bytes(blk.data), pattern(SLOT_SIZE, 9))
        lease.release()

    def test_map_batch_and_unmap_batch(self):
        hs = [name(7, i) for i in range(4)]
        for i in range(3):
            self.k.write(NS, hs[i], pattern(300 + i, i))
        blocks = self.k.map_batch(NS, hs)
        self.assertEqual(len(blocks), 3)
        for i, b in enumerate(blocks):
            self.assertEqual(b.hash, hs[i])
            self.assertEqual(bytes(b.data), pattern(300 + i, i))
            self.assertTrue(b.data.readonly)
        self.assertEqual(self.k.map_batch(NS, hs[3:]), [])
        with self.assertRaises(ValueError):
            self.k.unmap_batch([blocks[0], blocks[0]])
        self.assertTrue(all(b.mapped for b in blocks))
        self.k.unmap_batch(blocks)
        self.assertFalse(any(b.mapped for b in blocks))
        with self.assertRaises(ValueError):
            self.k.unmap_batch(blocks)
        self.k.unmap_batch([])

    def test_zero_copy_writer(self):
        h = name(8, 0)
        with self.k.alloc(NS, h, parent=name(8, 99)) as w:
            self.assertGreaterEqual(w.cap, 1000)
            self.assertFalse(w.buffer.readonly)
            w.buffer[:1000] = pattern(1000, 8)
            # nobody sees it before the commit
            self.assertEqual(self.k.match(NS, [h]), 0)
            with self.assertRaises(OSError) as cm:
                w.commit(w.cap + 1)
            self.assertEqual(cm.exception.errno, errno.EFBIG)
            w.commit(1000)
            self.assertIsNone(w.buffer)
        with self.k.map(NS, h) as blk:
            self.assertEqual(bytes(blk.data), pattern(1000, 8))
        with self.assertRaises(FileExistsError):
            self.k.alloc(NS, h)
        # an abort leaves nothing
        with self.k.alloc(NS, name(8, 1)) as w:
            w.buffer[:3] = b"abc"
        self.assertEqual(self.k.match(NS, [name(8, 1)]), 0)

    def test_close_releases_everything(self):
        k2 = kvfs.connect(MNT)
        k2.write(NS, name(9, 0), b"hello")
        blk = k2.map(NS, name(9, 0))
        view = blk.data
        lease = k2.match(NS, [name(9, 0)], lease_ms=60000)
        self.assertEqual(lease.count, 1)
        k2.close()
        self.assertTrue(k2.closed)
        self.assertFalse(blk.mapped)
        with self.assertRaises(ValueError):
            bytes(view)
        with self.assertRaises(ValueError):
            k2.map(NS, name(9, 0))
        lease.release()  # no-op: the close released it
        k2.close()

    def test_threads_share_a_connection(self):
        hs = [name(10, i) for i in range(4)]
        for i, h in enumerate(hs):
            self.k.write(NS, h, pattern(64, i))
        errors = []

        def worker():
            try:
                for _ in range(50):
                    for b in self.k.map_batch(NS, hs):
                        b.unmap()
            except Exception as e:  # reported below
                errors.append(e)
        ts = [threading.Thread(target=worker) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])

    def test_gpu_without_a_device(self):
        try:
            self.k.gpu_register()
        except OSError as e:
            self.assertIn(e.errno, (errno.ENOTSUP, errno.ENODEV))
            with self.assertRaises(OSError) as cm:
                self.k.copy_to_device(NS, name(11, 0), 0x1000, 4096)
            self.assertIn(cm.exception.errno, (errno.ENOTSUP, errno.ENODEV))
            return
        self.skipTest("a GPU is present: tests/gpu.sh covers the copies")

    def test_connect_failure(self):
        with self.assertRaises(OSError) as cm:
            kvfs.connect(os.path.join(MNT, "..", "not-a-mount"))
        self.assertIn(cm.exception.errno, (errno.ENOENT, errno.ECONNREFUSED,
                                           errno.ENOTCONN, errno.ENOTSUP,
                                           errno.ENODATA))


if __name__ == "__main__":
    unittest.main()

/*
 * check_gpu.c - the GPU calls of kvfs.h (kvfs_gpu_register(3),
 * kvfs_copy_to_device(3), kvfs_copy_to_device_batch(3)).
 *
 * What is expected follows from the build and the machine, as
 * kvfs_cuda_probe() sees them (cudaGetDeviceCount, independently of
 * libkvfs):
 *
 *   built without CUDA    every call -ENOTSUP, whatever its arguments
 *   CUDA, no GPU          every call -ENODEV, whatever its arguments
 *   a GPU                 bad arguments -EINVAL, and the device part:
 *                         pool -> device -> pool byte-identical, a batch
 *                         of 32 blocks, references held until the copy
 *                         is waited for and dropped then
 *
 * make check runs it alone: the calls that need no mount.  tests/gpu.sh
 * runs it again with KVFS_MNT, a private kvfsd with a pool of POOL_SLOTS
 * slots of SLOT_SIZE bytes and namespace "t"; there it exits 77 when the
 * device part could not run (no GPU), after the rest passed.
 *
 * KVFS_MNT may also name that kvfsd's control socket (a kvfsd run with
 * --no-mount, on a GPU machine without FUSE), with "t" made beforehand
 * by "kvctl -s SOCKET ns create t".  A block's references are then read
 * from the socket's "stat" answer instead of the user.kvfs.refs xattr.
 *
 * With a GPU the tests run in this process (CK_NOFORK): the probe has
 * initialised CUDA here, and a forked child cannot use it.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "tests/gpu_dev.h"
#include <kvfs.h>
#include "src/common/crc32c.h"
#include "src/common/ctl_client.h"
#include "src/common/json.h"
#include "src/common/probe.h"

#define POOL_SLOTS 80
#define SLOT_SIZE 65536
#define NS "t"
#define BATCH 32

static const char *mnt;
static bool on_socket; /* mnt is kvfsd's control socket, not a mount */
static int want_err;   /* -ENOTSUP or -ENODEV; 0 with a GPU */

/* block i of test t: a name no other test uses */
static void name(uint8_t h[KVFS_HASH_LEN], unsigned t, unsigned i)
{
	memset(h, 0xa5, KVFS_HASH_LEN);
	h[0] = (uint8_t)t;
	h[1] = (uint8_t)i;
	h[2] = (uint8_t)(i >> 8);
}

static void pattern(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 13 + seed * 7 + (i >> 9));
}

static struct kvfs *conn(void)
{
	struct kvfs *k = NULL;

	ck_assert_int_eq(kvfs_connect(mnt, &k), 0);
	return k;
}

/* block (t, i): len bytes of pattern seed t * 64 + i */
static void put(struct kvfs *k, unsigned t, unsigned i, size_t len)
{
	uint8_t h[KVFS_HASH_LEN], *buf = malloc(len);

	ck_assert_ptr_nonnull(buf);
	name(h, t, i);
	pattern(buf, len, t * 64 + i);
	ck_assert_int_eq(kvfs_write(k, NS, h, buf, len), 0);
	free(buf);
}

/* the "stat NS HASH" answer of the control socket (a mount's too):
 * its "refs", and the checksum kvfsd sealed the block with */
static long stat_ctl(const char *hex, uint32_t *crc)
{
	struct kvfs_ctl *c = NULL;
	struct kvfs_json *j = NULL;
	char req[128], err[256];
	const char *sum;
	uint64_t v;

	ck_assert_msg(kvfs_ctl_connect(mnt, &c, err, sizeof(err)) == 0, "%s",
		      err);
	snprintf(req, sizeof(req), "stat %s %s", NS, hex);
	ck_assert_msg(kvfs_ctl_request(c, req, &j, NULL, err, sizeof(err)) == 0,
		      "%s: %s", req, err);
	ck_assert_int_eq(kvfs_json_u64(kvfs_json_get(j, "refs"), &v), 0);
	sum = kvfs_json_str(kvfs_json_get(j, "checksum"));
	ck_assert_ptr_nonnull(sum);
	if (crc)
		*crc = (uint32_t)strtoul(sum, NULL, 16);
	kvfs_json_free(j);
	kvfs_ctl_close(c);
	return (long)v;
}

/* the handle of the test running, if any: refs() settles it first */
static struct kvfs *settle_k;

/* the daemon's references on a sealed block (user.kvfs.refs), once it
 * has served what settle_k posted: a copy's wait posts its unmaps on the
 * handle's connection, and a request on that connection comes after
 * them, where one on another (this xattr, a stat) may come before */
static long refs(unsigned t, unsigned i)
{
	char hex[KVFS_HASH_HEX_LEN + 1], path[4096], val[32];
	uint8_t h[KVFS_HASH_LEN];
	ssize_t n;

	if (settle_k)
		ck_assert_int_ge(kvfs_match(settle_k, NS, NULL, 0, 0, NULL), 0);
	name(h, t, i);
	kvfs_hash_to_hex(h, hex);
	if (on_socket)
		return stat_ctl(hex, NULL);
	snprintf(path, sizeof(path), "%s/%s/%s", mnt, NS, hex);
	n = getxattr(path, "user.kvfs.refs", val, sizeof(val) - 1);
	ck_assert_int_gt(n, 0);
	val[n] = '\0';
	return strtol(val, NULL, 10);
}

/* block (t, i) is sealed with the len bytes of pattern seed */
static void holds(struct kvfs *k, unsigned t, unsigned i, size_t len,
		  unsigned seed)
{
	uint8_t h[KVFS_HASH_LEN], *want = malloc(len);
	const void *p;
	size_t got;

	ck_assert_ptr_nonnull(want);
	name(h, t, i);
	pattern(want, len, seed);
	ck_assert_int_eq(kvfs_map(k, NS, h, &p, &got), 0);
	ck_assert_uint_eq(got, len);
	ck_assert_int_eq(memcmp(p, want, len), 0);
	ck_assert_int_eq(kvfs_unmap(k, p), 0);
	free(want);
}

/* block (t, i), copied from the device, was sealed with the CRC-32C of
 * its bytes, whether the GPU computed it (libkvfs) or kvfsd did */
static void sealed_crc(struct kvfs *k, unsigned t, unsigned i)
{
	char hex[KVFS_HASH_HEX_LEN + 1];
	uint8_t h[KVFS_HASH_LEN];
	uint32_t crc = 0;
	const void *p;
	size_t len;

	name(h, t, i);
	kvfs_hash_to_hex(h, hex);
	ck_assert_int_eq(kvfs_map(k, NS, h, &p, &len), 0);
	ck_assert_int_eq(stat_ctl(hex, &crc), 1); /* our map */
	ck_assert_msg(crc == kvfs_crc32c(0, p, len),
		      "block %u/%u (%zu bytes): sealed with crc %08x, its "
		      "bytes have %08x",
		      t, i, len, crc, kvfs_crc32c(0, p, len));
	ck_assert_int_eq(kvfs_unmap(k, p), 0);
}

/* ---- without a GPU (or without CUDA) -------------------------------- */

/* every call, with arguments that are wrong anyway */
START_TEST(no_gpu_any_arguments)
{
	struct kvfs_gpu_block b = { 0 };
	struct kvfs_copy *cp = NULL;
	uint8_t h[KVFS_HASH_LEN] = { 0 };

	ck_assert_int_eq(kvfs_gpu_register(NULL), want_err);
	ck_assert_int_eq(
		kvfs_copy_to_device(NULL, NULL, h, NULL, 0, NULL, NULL, &cp),
		want_err);
	ck_assert_int_eq(
		kvfs_copy_from_device(NULL, NS, h, NULL, NULL, 16, NULL, &cp),
		want_err);
	ck_assert_int_eq(kvfs_copy_to_device_batch(NULL, NS, &b, 0, NULL, NULL),
			 want_err);
	ck_assert_int_eq(
		kvfs_copy_from_device_batch(NULL, NS, &b, 1, NULL, &cp),
		want_err);
	ck_assert_int_eq(kvfs_copy_wait(NULL), want_err);
	ck_assert_int_eq(kvfs_copy_poll(NULL), want_err);
	ck_assert_ptr_null(cp);
}
END_TEST

/* every call with a live handle and a cached block: the same answer,
 * nothing referenced, and the handle still works */
START_TEST(no_gpu_on_a_mount)
{
	struct kvfs *k = conn();
	struct kvfs_gpu_block b[2];
	struct kvfs_copy *cp = NULL;
	uint8_t h[KVFS_HASH_LEN], h2[KVFS_HASH_LEN], dev[64];
	size_t len = 7;

	put(k, 1, 0, 1000);
	name(h, 1, 0);
	name(h2, 1, 1);
	ck_assert_int_eq(kvfs_gpu_register(k), want_err);
	ck_assert_int_eq(kvfs_copy_to_device(k, NS, h, dev, sizeof(dev), &len,
					     NULL, &cp),
			 want_err);
	ck_assert_uint_eq(len, 7);
	ck_assert_int_eq(kvfs_copy_from_device(k, NS, h2, h, dev, sizeof(dev),
					       NULL, &cp),
			 want_err);
	b[0] = (struct kvfs_gpu_block){ .hash = h, .dev = dev, .len = 64 };
	b[1] = (struct kvfs_gpu_block){ .hash = h2, .dev = dev, .len = 64 };
	ck_assert_int_eq(kvfs_copy_to_device_batch(k, NS, b, 1, NULL, &cp),
			 want_err);
	ck_assert_int_eq(
		kvfs_copy_from_device_batch(k, NS, b + 1, 1, NULL, &cp),
		want_err);
	ck_assert_ptr_null(cp);
	ck_assert_int_eq(b[0].len, 64);
	ck_assert_int_eq(refs(1, 0), 0);
	/* no writer was left behind for h2: it can still be written */
	put(k, 1, 1, 10);
	holds(k, 1, 0, 1000, 64 + 0);
	kvfs_disconnect(k);
}
END_TEST

/* ---- with a GPU: arguments ----------------------------------------- */

START_TEST(bad_arguments)
{
	struct kvfs_gpu_block b = { 0 };
	struct kvfs_copy *cp = NULL;
	uint8_t h[KVFS_HASH_LEN] = { 0 };
	char dev[8];

	ck_assert_int_eq(kvfs_gpu_register(NULL), -EINVAL);
	ck_assert_int_eq(
		kvfs_copy_to_device(NULL, NS, h, dev, 8, NULL, NULL, &cp),
		-EINVAL);
	ck_assert_int_eq(
		kvfs_copy_from_device(NULL, NS, h, NULL, dev, 8, NULL, &cp),
		-EINVAL);
	ck_assert_int_eq(kvfs_copy_to_device_batch(NULL, NS, &b, 1, NULL, &cp),
			 -EINVAL);
	ck_assert_int_eq(
		kvfs_copy_from_device_batch(NULL, NS, &b, 1, NULL, &cp),
		-EINVAL);
	ck_assert_int_eq(kvfs_copy_wait(NULL), -EINVAL);
	ck_assert_int_eq(kvfs_copy_poll(NULL), -EINVAL);
	ck_assert_ptr_null(cp);
}
END_TEST

/* ---- with a GPU: the device part ------------------------------------ */

struct dev_env {
	struct kvfs *k;
	void *dev;
	void *stream;
};

static void env_open(struct dev_env *e, size_t len)
{
	e->k = conn();
	settle_k = e->k;
	ck_assert_int_eq(tdev_alloc(&e->dev, len), 0);
	ck_assert_int_eq(tdev_stream(&e->stream), 0);
	ck_assert_int_eq(tdev_memset(e->dev, 0, len), 0);
}

static void env_close(struct dev_env *e)
{
	tdev_stream_free(e->stream);
	tdev_free(e->dev);
	settle_k = NULL;
	kvfs_disconnect(e->k);
}

START_TEST(round_trip)
{
	uint8_t h[KVFS_HASH_LEN], h2[KVFS_HASH_LEN], *want, *got;
	struct kvfs_copy *cp = NULL;
	struct dev_env e;
	size_t len = 0, sz = 50000;
	int rc;

	env_open(&e, SLOT_SIZE);
	ck_assert_int_eq(kvfs_gpu_register(e.k), 0);
	ck_assert_int_eq(kvfs_gpu_register(e.k), 0); /* once, then a no-op */
	put(e.k, 2, 0, sz);
	name(h, 2, 0);
	name(h2, 2, 1);
	ck_assert_int_eq(kvfs_copy_to_device(e.k, NS, h, e.dev, SLOT_SIZE, &len,
					     e.stream, &cp),
			 0);
	ck_assert_uint_eq(len, sz);
	ck_assert_ptr_nonnull(cp);
	ck_assert_int_eq(kvfs_copy_wait(cp), 0);
	ck_assert_int_eq(refs(2, 0), 0);

	want = malloc(sz);
	got = malloc(sz);
	ck_assert_ptr_nonnull(want);
	ck_assert_ptr_nonnull(got);
	pattern(want, sz, 2 * 64 + 0);
	ck_assert_int_eq(tdev_to_host(got, e.dev, sz), 0);
	ck_assert_int_eq(memcmp(got, want, sz), 0);

	/* and back, as a new block after h in the chain */
	ck_assert_int_eq(
		kvfs_copy_from_device(e.k, NS, h2, h, e.dev, sz, e.stream, &cp),
		0);
	do
		rc = kvfs_copy_poll(cp);
	while (rc == -EAGAIN);
	ck_assert_int_eq(rc, 0);
	holds(e.k, 2, 1, sz, 2 * 64 + 0);
	sealed_crc(e.k, 2, 1);
	ck_assert_int_eq(refs(2, 1), 0);
	free(want);
	free(got);
	env_close(&e);
}
END_TEST

START_TEST(batch_of_32)
{
	struct kvfs_gpu_block b[BATCH];
	struct kvfs_copy *cp = NULL;
	uint8_t h[BATCH][KVFS_HASH_LEN], h2[BATCH][KVFS_HASH_LEN];
	struct dev_env e;
	size_t sz = 20000;

	env_open(&e, (size_t)BATCH * SLOT_SIZE);
	for (unsigned i = 0; i < BATCH; i++) {
		put(e.k, 3, i, sz + i);
		name(h[i], 3, i);
		name(h2[i], 4, i);
		b[i] = (struct kvfs_gpu_block){
			.hash = h[i],
			.dev = (uint8_t *)e.dev + (size_t)i * SLOT_SIZE,
			.len = SLOT_SIZE,
		};
	}
	ck_assert_int_eq(
		kvfs_copy_to_device_batch(e.k, NS, b, BATCH, e.stream, &cp), 0);
	/* held while in flight (and until waited for, done or not) */
	for (unsigned i = 0; i < BATCH; i++) {
		ck_assert_uint_eq(b[i].len, sz + i);
		ck_assert_int_eq(refs(3, i), 1);
	}
	ck_assert_int_eq(kvfs_copy_wait(cp), 0);
	for (unsigned i = 0; i < BATCH; i++)
		ck_assert_int_eq(refs(3, i), 0);

	/* the whole prefix back as the next test's blocks, chained */
	for (unsigned i = 0; i < BATCH; i++) {
		b[i].hash = h2[i];
		b[i].parent = i ? h2[i - 1] : NULL;
	}
	ck_assert_int_eq(
		kvfs_copy_from_device_batch(e.k, NS, b, BATCH, e.stream, &cp),
		0);
	ck_assert_int_eq(kvfs_copy_wait(cp), 0);
	for (unsigned i = 0; i < BATCH; i++) {
		holds(e.k, 4, i, sz + i, 3 * 64 + i);
		sealed_crc(e.k, 4, i);
		ck_assert_int_eq(refs(4, i), 0);
	}
	env_close(&e);
}
END_TEST

/* a batch that fails anywhere copies nothing and holds nothing */
START_TEST(batch_all_or_nothing)
{
	struct kvfs_gpu_block b[3];
	struct kvfs_copy *cp = NULL;
	uint8_t h[3][KVFS_HASH_LEN], hx[KVFS_HASH_LEN];
	struct dev_env e;

	env_open(&e, 3 * SLOT_SIZE);
	for (unsigned i = 0; i < 3; i++) {
		name(h[i], 5, i);
		b[i] = (struct kvfs_gpu_block){
			.hash = h[i],
			.dev = (uint8_t *)e.dev + (size_t)i * SLOT_SIZE,
			.len = SLOT_SIZE,
		};
	}
	put(e.k, 5, 0, 100);
	put(e.k, 5, 1, 100);
	/* the last is not cached */
	ck_assert_int_eq(
		kvfs_copy_to_device_batch(e.k, NS, b, 3, e.stream, &cp),
		-ENOENT);
	ck_assert_ptr_null(cp);
	ck_assert_int_eq(refs(5, 0), 0);
	ck_assert_int_eq(refs(5, 1), 0);
	/* too little room */
	b[1].len = 99;
	ck_assert_int_eq(
		kvfs_copy_to_device_batch(e.k, NS, b, 2, e.stream, &cp),
		-EFBIG);
	ck_assert_int_eq(b[0].len, SLOT_SIZE); /* not written on failure */
	ck_assert_int_eq(refs(5, 0), 0);
	ck_assert_int_eq(refs(5, 1), 0);
	/* from the device onto a cached name: the fresh one is aborted */
	b[0].hash = h[2];
	b[1].hash = h[1];
	b[0].len = b[1].len = 100;
	ck_assert_int_eq(
		kvfs_copy_from_device_batch(e.k, NS, b, 2, e.stream, &cp),
		-EEXIST);
	ck_assert_int_eq(
		kvfs_copy_from_device_batch(e.k, NS, b, 1, e.stream, &cp), 0);
	ck_assert_int_eq(kvfs_copy_wait(cp), 0);
	ck_assert_int_eq(refs(5, 2), 0);
	/* more than a slot holds */
	name(hx, 5, 3);
	b[0].hash = hx;
	b[0].len = SLOT_SIZE + 1;
	ck_assert_int_eq(
		kvfs_copy_from_device_batch(e.k, NS, b, 1, e.stream, &cp),
		-EFBIG);
	b[0].len = 10;
	ck_assert_int_eq(
		kvfs_copy_from_device_batch(e.k, NS, b, 1, e.stream, &cp), 0);
	ck_assert_int_eq(kvfs_copy_wait(cp), 0);
	env_close(&e);
}
END_TEST

/* a handle disconnected with copies in flight waits for them, aborts
 * their writers and drops their maps */
START_TEST(disconnect_waits)
{
	struct kvfs_copy *cp, *cp2;
	uint8_t h[KVFS_HASH_LEN], h2[KVFS_HASH_LEN];
	struct dev_env e;
	const void *p;
	size_t len;

	env_open(&e, 2 * SLOT_SIZE);
	put(e.k, 6, 0, 4000);
	name(h, 6, 0);
	name(h2, 6, 1);
	ck_assert_int_eq(kvfs_copy_to_device(e.k, NS, h, e.dev, SLOT_SIZE, NULL,
					     e.stream, &cp),
			 0);
	ck_assert_int_eq(kvfs_copy_from_device(e.k, NS, h2, h,
					       (uint8_t *)e.dev + SLOT_SIZE,
					       4000, e.stream, &cp2),
			 0);
	ck_assert_int_eq(refs(6, 0), 1);
	settle_k = NULL;
	kvfs_disconnect(e.k);
	/* the daemon drops the refs when it sees the connection close,
	 * which a request on another connection may come before */
	for (int i = 0; i < 200 && refs(6, 0) != 0; i++)
		usleep(10 * 1000);
	ck_assert_int_eq(refs(6, 0), 0);
	tdev_stream_free(e.stream);
	tdev_free(e.dev);
	e.k = conn();
	ck_assert_int_eq(kvfs_map(e.k, NS, h2, &p, &len), -ENOENT);
	kvfs_disconnect(e.k);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gpu");
	TCase *tc = tcase_create("gpu");
	char why[256];
	int n, failed;
	bool device;
	SRunner *sr;

	mnt = getenv("KVFS_MNT");
	if (mnt && !*mnt)
		mnt = NULL;
	if (mnt) {
		struct stat st;

		on_socket = stat(mnt, &st) == 0 && S_ISSOCK(st.st_mode);
	}
	n = kvfs_cuda_probe(why, sizeof(why));
	want_err = n < 0 ? -ENOTSUP : n == 0 ? -ENODEV : 0;
	device = n > 0 && mnt;
	printf("check_gpu: %s\n", why);
	tcase_set_timeout(tc, 120);
	if (want_err) {
		tcase_add_test(tc, no_gpu_any_arguments);
		if (mnt)
			tcase_add_test(tc, no_gpu_on_a_mount);
	} else {
		tcase_add_test(tc, bad_arguments);
	}
	if (device) {
		tcase_add_test(tc, round_trip);
		tcase_add_test(tc, batch_of_32);
		tcase_add_test(tc, batch_all_or_nothing);
		tcase_add_test(tc, disconnect_waits);
	}
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	if (n > 0)
		srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (failed)
		return 1;
	if (mnt && !device) {
		printf("check_gpu: device part skipped: %s\n", why);
		return 77;
	}
	return 0;
}

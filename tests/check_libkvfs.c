/*
 * check_libkvfs.c - kvfs.h's contract against a live kvfsd.
 *
 * Run by tests/libkvfs.sh, which mounts a daemon with a pool of
 * POOL_SLOTS slots of SLOT_SIZE bytes on $KVFS_MNT and makes the
 * namespaces "t" and "u" there.  Each test uses its own block names, so
 * the tests do not depend on one another's leftovers: sealed blocks left
 * behind are unreferenced and simply evicted.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <kvfs.h>

#define POOL_SLOTS 8
#define SLOT_SIZE 65536
#define NS "t"

static const char *mnt;

/* block i of test t: a name no other test uses */
static void name(uint8_t h[KVFS_HASH_LEN], unsigned t, unsigned i)
{
	memset(h, 0x5a, KVFS_HASH_LEN);
	h[0] = (uint8_t)t;
	h[1] = (uint8_t)i;
	h[2] = (uint8_t)(i >> 8);
}

static void pattern(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 31 + seed);
}

static struct kvfs *conn(void)
{
	struct kvfs *k = NULL;

	ck_assert_int_eq(kvfs_connect(mnt, &k), 0);
	ck_assert_ptr_nonnull(k);
	return k;
}

static void put(struct kvfs *k, unsigned t, unsigned i, size_t len)
{
	uint8_t h[KVFS_HASH_LEN], *buf = malloc(len);

	ck_assert_ptr_nonnull(buf);
	name(h, t, i);
	pattern(buf, len, t * 7 + i);
	ck_assert_int_eq(kvfs_write(k, NS, h, buf, len), 0);
	free(buf);
}

/* the block's bytes read through the file system */
static size_t read_fs(const uint8_t h[KVFS_HASH_LEN], uint8_t *buf, size_t cap)
{
	char hex[KVFS_HASH_HEX_LEN + 1], path[4096];
	ssize_t n;
	size_t got = 0;
	int fd;

	kvfs_hash_to_hex(h, hex);
	snprintf(path, sizeof(path), "%s/%s/%s", mnt, NS, hex);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	while ((n = read(fd, buf + got, cap - got)) > 0)
		got += (size_t)n;
	ck_assert_int_eq(n, 0);
	close(fd);
	return got;
}

START_TEST(map_is_what_was_written)
{
	struct kvfs *k = conn();
	uint8_t h[KVFS_HASH_LEN], want[5000];
	const void *p;
	size_t len;

	put(k, 1, 0, sizeof(want));
	name(h, 1, 0);
	pattern(want, sizeof(want), 7);
	ck_assert_int_eq(kvfs_map(k, NS, h, &p, &len), 0);
	ck_assert_uint_eq(len, sizeof(want));
	ck_assert_int_eq(memcmp(p, want, len), 0);
	ck_assert_int_eq(kvfs_unmap(k, p), 0);
	ck_assert_int_eq(kvfs_unmap(k, p), -EINVAL);
	ck_assert_int_eq(kvfs_write(k, NS, h, want, 10), -EEXIST);
	kvfs_disconnect(k);
}
END_TEST

/* fill the pool with blocks of test t, mapping each as it is written so
 * that no later write may evict it */
static void fill_mapped(struct kvfs *k, unsigned t, const void **ptr)
{
	uint8_t h[KVFS_HASH_LEN];
	size_t len;

	for (unsigned i = 0; i < POOL_SLOTS; i++) {
		put(k, t, i, 100);
		name(h, t, i);
		ck_assert_int_eq(kvfs_map(k, NS, h, &ptr[i], &len), 0);
	}
}

/* a write of block (t, i) until it stops failing with ENOSPC: the daemon
 * serves another connection's close in its own time */
static int put_retry(struct kvfs *k, unsigned t, unsigned i)
{
	uint8_t h[KVFS_HASH_LEN], buf[100];
	int rc = -ENOSPC;

	name(h, t, i);
	pattern(buf, sizeof(buf), 0);
	for (int n = 0; n < 100 && rc == -ENOSPC; n++) {
		rc = kvfs_write(k, NS, h, buf, sizeof(buf));
		if (rc == -ENOSPC)
			usleep(10000);
	}
	return rc;
}

START_TEST(mapped_blocks_stay)
{
	struct kvfs *k = conn();
	const void *ptr[POOL_SLOTS];
	uint8_t h[KVFS_HASH_LEN], buf[100];

	fill_mapped(k, 2, ptr);
	name(h, 2, 100);
	ck_assert_int_eq(kvfs_write(k, NS, h, buf, sizeof(buf)), -ENOSPC);
	ck_assert_int_eq(kvfs_unmap(k, ptr[3]), 0);
	ck_assert_int_eq(kvfs_write(k, NS, h, buf, sizeof(buf)), 0);
	/* the others survived, bytes intact */
	pattern(buf, sizeof(buf), 2 * 7 + 5);
	ck_assert_int_eq(memcmp(ptr[5], buf, sizeof(buf)), 0);
	kvfs_disconnect(k);
}
END_TEST

START_TEST(disconnect_releases_maps)
{
	struct kvfs *a = conn(), *b = conn();
	const void *ptr[POOL_SLOTS];
	uint8_t h[KVFS_HASH_LEN], buf[100] = { 0 };

	fill_mapped(a, 3, ptr);
	name(h, 3, 100);
	ck_assert_int_eq(kvfs_write(b, NS, h, buf, sizeof(buf)), -ENOSPC);
	kvfs_disconnect(a);
	ck_assert_int_eq(put_retry(b, 3, 100), 0);
	kvfs_disconnect(b);
}
END_TEST

START_TEST(leases_pin_until_release_or_disconnect)
{
	struct kvfs *a = conn(), *b = conn();
	uint8_t h[POOL_SLOTS][KVFS_HASH_LEN], x[KVFS_HASH_LEN],
		buf[100] = { 0 };
	uint64_t lease;

	for (unsigned i = 0; i < POOL_SLOTS; i++) {
		put(a, 4, i, 100);
		name(h[i], 4, i);
	}
	ck_assert_int_eq(kvfs_match(a, NS, (const uint8_t(*)[32])h, POOL_SLOTS,
				    60000, &lease),
			 POOL_SLOTS);
	ck_assert_uint_ne(lease, 0);
	name(x, 4, 100);
	ck_assert_int_eq(kvfs_write(b, NS, x, buf, sizeof(buf)), -ENOSPC);
	ck_assert_int_eq(kvfs_release(a, lease), 0);
	ck_assert_int_eq(kvfs_release(a, lease), -ENOENT);
	ck_assert_int_eq(kvfs_write(b, NS, x, buf, sizeof(buf)), 0);

	/* again, now dropped by the disconnect */
	for (unsigned i = 0; i < POOL_SLOTS; i++) {
		put(a, 5, i, 100);
		name(h[i], 5, i);
	}
	ck_assert_int_eq(kvfs_match(a, NS, (const uint8_t(*)[32])h, POOL_SLOTS,
				    60000, &lease),
			 POOL_SLOTS);
	name(x, 5, 100);
	ck_assert_int_eq(kvfs_write(b, NS, x, buf, sizeof(buf)), -ENOSPC);
	kvfs_disconnect(a);
	ck_assert_int_eq(put_retry(b, 5, 100), 0);
	kvfs_disconnect(b);
}
END_TEST

START_TEST(zero_copy_write)
{
	struct kvfs *k = conn();
	uint8_t h[KVFS_HASH_LEN], parent[KVFS_HASH_LEN], got[SLOT_SIZE];
	struct kvfs_wblock *wb;
	const void *p;
	void *w;
	size_t cap, len;

	name(parent, 6, 0);
	name(h, 6, 1);
	ck_assert_int_eq(kvfs_alloc(k, NS, h, parent, &w, &cap, &wb), 0);
	ck_assert_uint_eq(cap, SLOT_SIZE);
	pattern(w, 12345, 66);
	/* invisible until committed */
	ck_assert_int_eq(kvfs_map(k, NS, h, &p, &len), -ENOENT);
	ck_assert_int_eq(kvfs_commit(wb, cap + 1), -EFBIG);
	ck_assert_int_eq(kvfs_commit(wb, 12345), 0);
	ck_assert_uint_eq(read_fs(h, got, sizeof(got)), 12345);
	ck_assert_int_eq(memcmp(got, w, 12345), 0);
	ck_assert_int_eq(kvfs_map(k, NS, h, &p, &len), 0);
	ck_assert_uint_eq(len, 12345);
	ck_assert_int_eq(memcmp(p, got, len), 0);
	ck_assert_int_eq(kvfs_unmap(k, p), 0);
	kvfs_disconnect(k);
}
END_TEST

START_TEST(abort_leaves_nothing)
{
	struct kvfs *k = conn(), *k2;
	char hex[KVFS_HASH_HEX_LEN + 1], path[4096];
	uint8_t h[KVFS_HASH_LEN];
	struct kvfs_wblock *wb, *wb2;
	struct stat sb;
	const void *p;
	void *w;
	size_t cap, len;

	name(h, 7, 0);
	ck_assert_int_eq(kvfs_alloc(k, NS, h, NULL, &w, &cap, &wb), 0);
	ck_assert_int_eq(kvfs_alloc(k, NS, h, NULL, &w, &cap, &wb2), -EEXIST);
	memset(w, 1, 100);
	ck_assert_int_eq(kvfs_abort(wb), 0);
	kvfs_hash_to_hex(h, hex);
	snprintf(path, sizeof(path), "%s/%s/%s", mnt, NS, hex);
	ck_assert_int_eq(stat(path, &sb), -1);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(kvfs_map(k, NS, h, &p, &len), -ENOENT);

	/* a writer left open dies with its connection */
	k2 = conn();
	ck_assert_int_eq(kvfs_alloc(k2, NS, h, NULL, &w, &cap, &wb), 0);
	kvfs_disconnect(k2);
	for (int n = 0; n < 100; n++) {
		int rc = kvfs_alloc(k, NS, h, NULL, &w, &cap, &wb);

		if (rc == 0)
			break;
		ck_assert_int_eq(rc, -EEXIST);
		usleep(10000);
	}
	ck_assert_int_eq(kvfs_abort(wb), 0);
	kvfs_disconnect(k);
}
END_TEST

START_TEST(bad_input)
{
	struct kvfs *k = conn(), *none = NULL;
	uint8_t h[KVFS_HASH_LEN], hs[1][KVFS_HASH_LEN];
	struct kvfs_wblock *wb;
	uint32_t tok[4] = { 1, 2, 3, 4 };
	uint64_t lease;
	const void *p;
	void *w;
	size_t len;

	name(h, 8, 0);
	memcpy(hs[0], h, sizeof(h));
	ck_assert_int_eq(kvfs_connect(NULL, &none), -EINVAL);
	ck_assert_int_eq(kvfs_connect(mnt, NULL), -EINVAL);
	ck_assert_int_eq(kvfs_connect("", &none), -EINVAL);
	ck_assert_int_lt(kvfs_connect("/nonexistent-kvfs", &none), 0);
	ck_assert_ptr_null(none);
	kvfs_disconnect(NULL);

	ck_assert_int_eq(kvfs_match(NULL, NS, hs, 1, 0, NULL), -EINVAL);
	ck_assert_int_eq(kvfs_match(k, ".x", hs, 1, 0, NULL), -EINVAL);
	ck_assert_int_eq(kvfs_match(k, NULL, hs, 1, 0, NULL), -EINVAL);
	ck_assert_int_eq(kvfs_match(k, NS, NULL, 1, 0, NULL), -EINVAL);
	ck_assert_int_eq(kvfs_match(k, NS, hs, 1, 1000, NULL), -EINVAL);
	ck_assert_int_eq(kvfs_match(k, "nosuch", hs, 1, 1000, &lease), -ENOENT);
	ck_assert_int_eq(kvfs_match(k, NS, hs, 1, 1000, &lease), 0);
	ck_assert_uint_eq(lease, 0);
	ck_assert_int_eq(kvfs_release(NULL, 1), -EINVAL);
	ck_assert_int_eq(kvfs_release(k, 0), -EINVAL);
	ck_assert_int_eq(kvfs_release(k, 999999999), -ENOENT);

	ck_assert_int_eq(kvfs_map(NULL, NS, h, &p, &len), -EINVAL);
	ck_assert_int_eq(kvfs_map(k, NULL, h, &p, &len), -EINVAL);
	ck_assert_int_eq(kvfs_map(k, "a/b", h, &p, &len), -EINVAL);
	ck_assert_int_eq(kvfs_map(k, NS, NULL, &p, &len), -EINVAL);
	ck_assert_int_eq(kvfs_map(k, NS, h, NULL, &len), -EINVAL);
	ck_assert_int_eq(kvfs_map(k, NS, h, &p, NULL), -EINVAL);
	ck_assert_int_eq(kvfs_map(k, "nosuch", h, &p, &len), -ENOENT);
	ck_assert_int_eq(kvfs_map(k, NS, h, &p, &len), -ENOENT);
	ck_assert_int_eq(kvfs_unmap(NULL, h), -EINVAL);
	ck_assert_int_eq(kvfs_unmap(k, NULL), -EINVAL);
	ck_assert_int_eq(kvfs_unmap(k, h), -EINVAL);

	ck_assert_int_eq(kvfs_write(NULL, NS, h, "x", 1), -EINVAL);
	ck_assert_int_eq(kvfs_write(k, NULL, h, "x", 1), -EINVAL);
	ck_assert_int_eq(kvfs_write(k, ".kvfs", h, "x", 1), -EINVAL);
	ck_assert_int_eq(kvfs_write(k, NS, NULL, "x", 1), -EINVAL);
	ck_assert_int_eq(kvfs_write(k, NS, h, NULL, 1), -EINVAL);
	ck_assert_int_eq(kvfs_write(k, "nosuch", h, "x", 1), -ENOENT);

	ck_assert_int_eq(kvfs_alloc(NULL, NS, h, NULL, &w, &len, &wb), -EINVAL);
	ck_assert_int_eq(kvfs_alloc(k, NULL, h, NULL, &w, &len, &wb), -EINVAL);
	ck_assert_int_eq(kvfs_alloc(k, NS, NULL, NULL, &w, &len, &wb), -EINVAL);
	ck_assert_int_eq(kvfs_alloc(k, NS, h, NULL, NULL, &len, &wb), -EINVAL);
	ck_assert_int_eq(kvfs_alloc(k, NS, h, NULL, &w, NULL, &wb), -EINVAL);
	ck_assert_int_eq(kvfs_alloc(k, NS, h, NULL, &w, &len, NULL), -EINVAL);
	ck_assert_int_eq(kvfs_alloc(k, "nosuch", h, NULL, &w, &len, &wb),
			 -ENOENT);
	ck_assert_int_eq(kvfs_commit(NULL, 0), -EINVAL);
	ck_assert_int_eq(kvfs_abort(NULL), -EINVAL);

	ck_assert_int_eq(kvfs_hash_chain(".x", 2, tok, 4, hs, 1), -EINVAL);
	ck_assert_int_eq(kvfs_hash_chain(NS, 0, tok, 4, hs, 1), -EINVAL);
	ck_assert_int_eq(kvfs_hash_chain(NS, 2, NULL, 4, hs, 1), -EINVAL);
	ck_assert_int_eq(kvfs_hash_chain(NS, 2, tok, 4, hs, 1), 1);
	ck_assert_int_eq(kvfs_hash_chain_sglang(0, tok, 4, hs, 1), -EINVAL);
	ck_assert_int_eq(kvfs_hash_chain_sglang(2, NULL, 4, hs, 1), -EINVAL);
	ck_assert_int_eq(kvfs_hash_chain_sglang(2, tok, 4, NULL, 1), -EINVAL);
	kvfs_disconnect(k);
}
END_TEST

/* the SGLang chain through the library's export (KVFS_1.2): the vector
 * tests/check_hash.c pins, from tests/hash_ref.py --sglang 4 1 .. 10 */
START_TEST(hash_chain_sglang_exported)
{
	static const uint32_t tok[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	uint8_t out[3][KVFS_HASH_LEN];
	char hex[KVFS_HASH_HEX_LEN + 1];

	ck_assert_int_eq(kvfs_hash_chain_sglang(4, tok, 10, out, 3), 2);
	kvfs_hash_to_hex(out[0], hex);
	ck_assert_str_eq(hex, "cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c"
			      "64b27120e72ab733b72");
	kvfs_hash_to_hex(out[1], hex);
	ck_assert_str_eq(hex, "4ebfa8a1f3c341517621838c6e1b9aa350307e3f00b3c"
			      "bd1a07ef740f54396d6");
}
END_TEST

/* KVFS_MNT a control socket (kvfsd --no-mount): kvfs_write goes through
 * a writer of the pool, and what it wrote maps at once */
START_TEST(write_on_socket)
{
	struct kvfs *k = conn();
	uint8_t h[KVFS_HASH_LEN], want[3000], *big = calloc(1, SLOT_SIZE + 1);
	const void *p;
	size_t len;

	ck_assert_ptr_nonnull(big);
	for (unsigned i = 0; i < 3; i++) {
		put(k, 9, i, sizeof(want) - i);
		name(h, 9, i);
		pattern(want, sizeof(want) - i, 9 * 7 + i);
		ck_assert_int_eq(kvfs_map(k, NS, h, &p, &len), 0);
		ck_assert_uint_eq(len, sizeof(want) - i);
		ck_assert_int_eq(memcmp(p, want, len), 0);
		ck_assert_int_eq(kvfs_unmap(k, p), 0);
		ck_assert_int_eq(kvfs_write(k, NS, h, want, 10), -EEXIST);
	}
	name(h, 9, 3);
	ck_assert_int_eq(kvfs_write(k, NS, h, big, SLOT_SIZE + 1), -EFBIG);
	ck_assert_int_eq(kvfs_map(k, NS, h, &p, &len), -ENOENT);
	ck_assert_int_eq(kvfs_write(k, "nosuchns", h, want, 10), -ENOENT);
	free(big);
	kvfs_disconnect(k);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("libkvfs");
	TCase *tc = tcase_create("mount");
	struct stat st;
	SRunner *sr;
	int failed;

	mnt = getenv("KVFS_MNT");
	if (!mnt || !*mnt) {
		fprintf(stderr, "check_libkvfs: KVFS_MNT is not set "
				"(tests/libkvfs.sh runs this)\n");
		return 77;
	}
	tcase_set_timeout(tc, 60);
	if (stat(mnt, &st) == 0 && S_ISSOCK(st.st_mode)) {
		tcase_add_test(tc, write_on_socket);
		goto run;
	}
	tcase_add_test(tc, map_is_what_was_written);
	tcase_add_test(tc, mapped_blocks_stay);
	tcase_add_test(tc, disconnect_releases_maps);
	tcase_add_test(tc, leases_pin_until_release_or_disconnect);
	tcase_add_test(tc, zero_copy_write);
	tcase_add_test(tc, abort_leaves_nothing);
	tcase_add_test(tc, bad_input);
	tcase_add_test(tc, hash_chain_sglang_exported);
run:
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

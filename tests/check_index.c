/* check_index.c - kvstore/index.h: key schema, record layout, RocksDB ops */
#include "config.h"

#include <errno.h>

#include "kvstore/index.h"
#include "tests/testutil.h"

static struct kv_block_rec sample(uint32_t slot)
{
	struct kv_block_rec r = {
		.slot = slot,
		.checksum = 0xdeadbeef,
		.size = 0x0102030405ull,
		.seal_ns = 0x1122334455667788ull,
		.has_parent = true,
	};

	memset(r.parent, 0x77, sizeof(r.parent));
	return r;
}

START_TEST(test_record_layout)
{
	struct kv_block_rec r = sample(0x0a0b0c0d), d;
	uint8_t buf[KV_INDEX_BLOCK_REC_LEN];

	kv_index_encode_block(&r, buf);
	/* offsets as documented in index.h */
	ck_assert_uint_eq(buf[0], 1);
	ck_assert_uint_eq(buf[1], 1);
	ck_assert_uint_eq(buf[4], 0x0d);
	ck_assert_uint_eq(buf[7], 0x0a);
	ck_assert_uint_eq(buf[8], 0x05);
	ck_assert_uint_eq(buf[12], 0x01);
	ck_assert_uint_eq(buf[16], 0xef);
	ck_assert_uint_eq(buf[24], 0x88);
	ck_assert_uint_eq(buf[31], 0x11);
	ck_assert_uint_eq(buf[32], 0x77);
	ck_assert_uint_eq(buf[63], 0x77);
	ck_assert_int_eq(kv_index_decode_block(buf, sizeof(buf), &d), 0);
	ck_assert_uint_eq(d.slot, r.slot);
	ck_assert_uint_eq(d.size, r.size);
	ck_assert_uint_eq(d.checksum, r.checksum);
	ck_assert_uint_eq(d.seal_ns, r.seal_ns);
	ck_assert(d.has_parent);
	ck_assert_mem_eq(d.parent, r.parent, KVFS_HASH_LEN);

	/* bad records */
	ck_assert_int_eq(kv_index_decode_block(buf, sizeof(buf) - 1, &d),
			 -EINVAL);
	ck_assert_int_eq(kv_index_decode_block(NULL, sizeof(buf), &d), -EINVAL);
	buf[0] = 2;
	ck_assert_int_eq(kv_index_decode_block(buf, sizeof(buf), &d), -EINVAL);
	buf[0] = 1;
	buf[1] = 0x80;
	ck_assert_int_eq(kv_index_decode_block(buf, sizeof(buf), &d), -EINVAL);
}
END_TEST

struct seen {
	int n;
	uint32_t ns[8];
	uint32_t slot[8];
	char name[8][64];
};

static int on_block(uint32_t ns, const uint8_t h[KVFS_HASH_LEN],
		    const struct kv_block_rec *rec, void *arg)
{
	struct seen *s = arg;

	s->ns[s->n] = ns;
	s->slot[s->n++] = rec->slot;
	return 0;
}

static int on_ns(const char *name, const struct kv_ns_rec *rec, void *arg)
{
	struct seen *s = arg;

	snprintf(s->name[s->n], sizeof(s->name[0]), "%s", name);
	s->ns[s->n++] = rec->id;
	return 0;
}

START_TEST(test_put_get_scan)
{
	struct tu_paths p;
	struct kv_index *ix;
	struct kv_block_rec r, got;
	struct kv_ns_rec nr = { 7, 16, 123 };
	struct seen s = { 0 };
	uint8_t h[3][KVFS_HASH_LEN];
	char meta[8];
	uint64_t bad = 99;

	tu_paths(&p);
	ck_assert_int_eq(kv_index_open(p.index, &ix), 0);
	for (int i = 0; i < 3; i++)
		tu_hash(h[i], (uint32_t)i, 1);
	ck_assert_int_eq(kv_index_get_block(ix, 1, h[0], &got), -ENOENT);
	for (uint32_t i = 0; i < 3; i++) {
		r = sample(i + 10);
		/* ns 300 sorts after ns 2: keys are big-endian */
		ck_assert_int_eq(
			kv_index_put_block(ix, i == 2 ? 300 : 2, h[i], &r), 0);
	}
	ck_assert_int_eq(kv_index_get_block(ix, 2, h[1], &got), 0);
	ck_assert_uint_eq(got.slot, 11);
	ck_assert_int_eq(kv_index_get_block(ix, 3, h[1], &got), -ENOENT);
	ck_assert_int_eq(kv_index_put_ns(ix, "model-a", &nr), 0);
	ck_assert_int_eq(kv_index_put_meta(ix, "k", "v1", 2), 0);
	kv_index_close(ix);

	/* durable across a reopen */
	ck_assert_int_eq(kv_index_open(p.index, &ix), 0);
	ck_assert_int_eq(kv_index_scan_blocks(ix, on_block, &s, &bad), 0);
	ck_assert_uint_eq(bad, 0);
	ck_assert_int_eq(s.n, 3);
	ck_assert_uint_eq(s.ns[2], 300);
	ck_assert_uint_eq(s.slot[2], 12);
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(kv_index_scan_ns(ix, on_ns, &s, NULL), 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_str_eq(s.name[0], "model-a");
	ck_assert_uint_eq(s.ns[0], 7);
	ck_assert_int_eq(kv_index_get_meta(ix, "k", meta, sizeof(meta)), 2);
	ck_assert_mem_eq(meta, "v1", 2);
	ck_assert_int_eq(kv_index_get_meta(ix, "nope", meta, sizeof(meta)),
			 -ENOENT);

	ck_assert_int_eq(kv_index_del_block(ix, 2, h[1]), 0);
	ck_assert_int_eq(kv_index_get_block(ix, 2, h[1], &got), -ENOENT);
	ck_assert_int_eq(kv_index_del_ns(ix, "model-a"), 0);
	ck_assert_int_eq(kv_index_clear(ix), 0);
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(kv_index_scan_blocks(ix, on_block, &s, NULL), 0);
	ck_assert_int_eq(s.n, 0);
	kv_index_close(ix);
}
END_TEST

START_TEST(test_bad_args)
{
	struct tu_paths p;
	struct kv_index *ix, *ix2;
	struct kv_block_rec r = sample(1);
	struct kv_ns_rec nr = { 1, 1, 0 };
	uint8_t h[KVFS_HASH_LEN] = { 0 };
	char longname[300];

	tu_paths(&p);
	ck_assert_int_eq(kv_index_open(NULL, &ix), -EINVAL);
	ck_assert_int_eq(kv_index_open("", &ix), -EINVAL);
	ck_assert_int_eq(kv_index_open(p.index, NULL), -EINVAL);
	ck_assert_int_eq(kv_index_open(p.index, &ix), 0);
	/* RocksDB's LOCK file: a second opener is refused, not corrupted */
	ck_assert_int_eq(kv_index_open(p.index, &ix2), -EIO);
	ck_assert_int_eq(kv_index_put_block(NULL, 1, h, &r), -EINVAL);
	ck_assert_int_eq(kv_index_put_block(ix, 1, NULL, &r), -EINVAL);
	ck_assert_int_eq(kv_index_put_block(ix, 1, h, NULL), -EINVAL);
	ck_assert_int_eq(kv_index_get_block(ix, 1, h, NULL), -EINVAL);
	ck_assert_int_eq(kv_index_del_block(ix, 1, NULL), -EINVAL);
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	ck_assert_int_eq(kv_index_put_ns(ix, longname, &nr), -EINVAL);
	ck_assert_int_eq(kv_index_put_ns(ix, "", &nr), -EINVAL);
	ck_assert_int_eq(kv_index_put_ns(ix, NULL, &nr), -EINVAL);
	ck_assert_int_eq(kv_index_put_ns(ix, "x", NULL), -EINVAL);
	ck_assert_int_eq(kv_index_del_ns(ix, NULL), -EINVAL);
	ck_assert_int_eq(kv_index_put_meta(ix, NULL, "", 0), -EINVAL);
	ck_assert_int_eq(kv_index_put_meta(ix, "k", NULL, 3), -EINVAL);
	ck_assert_int_eq(kv_index_get_meta(ix, NULL, h, 1), -EINVAL);
	ck_assert_int_eq(kv_index_scan_ns(ix, NULL, NULL, NULL), -EINVAL);
	ck_assert_int_eq(kv_index_scan_blocks(NULL, on_block, NULL, NULL),
			 -EINVAL);
	ck_assert_int_eq(kv_index_clear(NULL), -EINVAL);
	kv_index_close(ix);
	kv_index_close(NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("index");
	TCase *tc = tcase_create("core");

	tu_init("index");
	tcase_add_test(tc, test_record_layout);
	tcase_add_test(tc, test_put_get_scan);
	tcase_add_test(tc, test_bad_args);
	suite_add_tcase(s, tc);
	return tu_run(s);
}

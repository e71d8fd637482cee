/*
 * check_open.c - kvstore/store.h "open namespaces": layouts, staging and
 * publication, rename, directories, kv_store_dir_next, recovery,
 * eviction of files, and the wait of kv_store_closing.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "src/common/clock.h"
#include "kvstore/index.h"
#include "tests/testutil.h"

#define SLOT 4096

static struct tu_paths P;
static struct kv_store *S;
static uint32_t NS; /* an open namespace "o" */

static struct kv_store *open_store(const struct tu_paths *p, uint32_t nslots,
				   uint32_t wait_ms)
{
	struct kv_store_config cfg = {
		.pool_path = p->pool,
		.index_dir = p->index,
		.slot_size = SLOT,
		.nslots = nslots,
		.publish_wait_ms = wait_ms,
	};
	struct kv_store *st = NULL;
	int rc = kv_store_open(&cfg, &st);

	ck_assert_msg(rc == 0, "kv_store_open: %d", rc);
	return st;
}

static void setup(void)
{
	tu_paths(&P);
	S = open_store(&P, 64, 0);
	ck_assert_int_eq(
		kv_store_ns_create_layout(S, "o", 16, KV_LAYOUT_OPEN, &NS), 0);
}

static void teardown(void)
{
	kv_store_close(S);
}

static void msleep(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static uint64_t ms_since(uint64_t t0)
{
	return (kvfs_mono_ns() - t0) / 1000000ull;
}

static void key(const char *path, uint8_t k[KVFS_HASH_LEN])
{
	ck_assert_int_eq(kvfs_path_key(path, strlen(path), k), 0);
}

/* the bytes of file version `seed`, len bytes */
static void fill(void *buf, size_t len, uint32_t seed)
{
	uint8_t h[KVFS_HASH_LEN];

	tu_hash(h, seed, 0x0fe7);
	tu_fill(buf, len, h);
}

static size_t flen(uint32_t seed)
{
	return 1 + (seed * 131u) % SLOT;
}

/* a staging block holding the bytes of seed */
static uint32_t stage(struct kv_store *st, uint32_t ns, uint32_t seed)
{
	uint8_t buf[SLOT];
	uint32_t wh;

	ck_assert_int_eq(kv_store_create_staging(st, ns, &wh), 0);
	fill(buf, flen(seed), seed);
	ck_assert_int_eq(kv_store_write(st, wh, 0, buf, flen(seed)), 0);
	return wh;
}

/* stage + publish; returns the publish's rc (the handle aborted on error) */
static int pub(struct kv_store *st, uint32_t ns, const char *path,
	       uint32_t seed)
{
	uint32_t wh = stage(st, ns, seed);
	int rc = kv_store_publish(st, wh, path, false);

	if (rc < 0)
		ck_assert_int_eq(kv_store_abort(st, wh), 0);
	return rc;
}

/* 1 when path is a file with the bytes of seed and knows its path */
static int has(struct kv_store *st, uint32_t ns, const char *path,
	       uint32_t seed)
{
	uint8_t k[KVFS_HASH_LEN], buf[SLOT];
	char pb[KV_STORE_PATH_MAX + 1];
	struct kv_ref ref;
	int ok;

	key(path, k);
	if (kv_store_get(st, ns, k, &ref) < 0)
		return 0;
	fill(buf, flen(seed), seed);
	ok = ref.size == flen(seed) && memcmp(ref.data, buf, flen(seed)) == 0;
	ck_assert_int_eq(kv_store_put(st, &ref), 0);
	if (ok)
		ok = kv_store_path(st, ns, k, pb, sizeof(pb)) ==
			     (long)strlen(path) &&
		     strcmp(pb, path) == 0;
	return ok;
}

/* 1 when path names no visible block (stat, get, lookup all miss) */
static int gone(struct kv_store *st, uint32_t ns, const char *path)
{
	uint8_t k[KVFS_HASH_LEN];
	struct kv_block_info bi;
	struct kv_ref ref;

	key(path, k);
	return kv_store_stat(st, ns, k, &bi) == -ENOENT &&
	       kv_store_get(st, ns, k, &ref) == -ENOENT &&
	       kv_store_lookup(st, ns, k) == 0;
}

static uint64_t slots_free(struct kv_store *st)
{
	struct kv_store_stats ss;

	ck_assert_int_eq(kv_store_stats(st, &ss), 0);
	return ss.slots_free;
}

/* one walk of dir: names (dirs prefixed "d:", files "f:") and cursors */
#define WALK_MAX 6000
struct walk {
	int n;
	char name[WALK_MAX][260];
	uint64_t cursor[WALK_MAX + 1]; /* cursor[i]: before entry i */
};

static void walk_from(struct kv_store *st, uint32_t ns, const char *dir,
		      uint64_t cursor, struct walk *w)
{
	char name[256];
	bool is_dir;
	int rc;

	w->n = 0;
	w->cursor[0] = cursor;
	while ((rc = kv_store_dir_next(st, ns, dir, &cursor, name, sizeof(name),
				       &is_dir)) == 1) {
		ck_assert_int_lt(w->n, WALK_MAX);
		snprintf(w->name[w->n], sizeof(w->name[0]), "%c:%s",
			 is_dir ? 'd' : 'f', name);
		w->cursor[++w->n] = cursor;
		ck_assert_uint_lt(cursor, 1ull << 62);
	}
	ck_assert_int_eq(rc, 0);
	/* the end stays the end */
	ck_assert_int_eq(kv_store_dir_next(st, ns, dir, &cursor, name,
					   sizeof(name), &is_dir),
			 0);
}

/* index of s in w, -1 when absent; asserts it appears at most once */
static int walk_find(const struct walk *w, const char *s)
{
	int at = -1;

	for (int i = 0; i < w->n; i++)
		if (strcmp(w->name[i], s) == 0) {
			ck_assert_msg(at < 0, "%s listed twice", s);
			at = i;
		}
	return at;
}

/* ---- layouts ------------------------------------------------------- */

START_TEST(test_layouts)
{
	uint32_t c, c2, d, f, s, x, wh;
	uint8_t h[KVFS_HASH_LEN];

	ck_assert_int_eq(kv_store_ns_layout(S, NS), KV_LAYOUT_OPEN);
	ck_assert_int_eq(
		kv_store_ns_create_layout(S, "c", 16, KV_LAYOUT_CHAIN, &c), 0);
	ck_assert_int_eq(kv_store_ns_layout(S, c), KV_LAYOUT_CHAIN);
	ck_assert_int_eq(kv_store_ns_create(S, "c2", 16, &c2), 0);
	ck_assert_int_eq(kv_store_ns_layout(S, c2), KV_LAYOUT_CHAIN);
	ck_assert_int_eq(kv_store_ns_create_layout(S, "x", 16, 2, &x), -EINVAL);
	ck_assert_int_eq(kv_store_ns_find(S, "x", NULL, NULL), -ENOENT);
	ck_assert_int_eq(
		kv_store_ns_create_layout(S, "o", 16, KV_LAYOUT_CHAIN, &x),
		-EEXIST);
	ck_assert_int_eq(kv_store_ns_layout(S, 9999), -ENOENT);

	/* staging is for open namespaces only */
	ck_assert_int_eq(kv_store_create_staging(S, c, &wh), -EINVAL);
	ck_assert_int_eq(kv_store_create_staging(S, 9999, &wh), -ENOENT);
	ck_assert_int_eq(kv_store_create_staging(S, NS, NULL), -EINVAL);
	ck_assert_uint_eq(slots_free(S), 64);

	/* an empty namespace changes layout both ways */
	ck_assert_int_eq(kv_store_ns_set_layout(S, "c", KV_LAYOUT_OPEN), 0);
	ck_assert_int_eq(kv_store_ns_layout(S, c), KV_LAYOUT_OPEN);
	ck_assert_int_eq(kv_store_ns_set_layout(S, "c", KV_LAYOUT_CHAIN), 0);
	ck_assert_int_eq(kv_store_ns_layout(S, c), KV_LAYOUT_CHAIN);
	ck_assert_int_eq(kv_store_ns_set_layout(S, "c", 2), -EINVAL);
	ck_assert_int_eq(kv_store_ns_set_layout(S, "nope", 1), -ENOENT);

	/* a chain namespace with a block */
	tu_hash(h, 1, 0);
	ck_assert_int_eq(tu_put_block(S, c2, h, NULL, 10), 0);
	ck_assert_int_eq(kv_store_ns_set_layout(S, "c2", KV_LAYOUT_OPEN),
			 -ENOTEMPTY);
	ck_assert_int_eq(kv_store_ns_set_layout(S, "c2", KV_LAYOUT_CHAIN), 0);

	/* not while it holds a file */
	ck_assert_int_eq(
		kv_store_ns_create_layout(S, "f", 16, KV_LAYOUT_OPEN, &f), 0);
	ck_assert_int_eq(pub(S, f, "file", 1), 0);
	ck_assert_int_eq(kv_store_ns_set_layout(S, "f", KV_LAYOUT_CHAIN),
			 -ENOTEMPTY);
	ck_assert_int_eq(kv_store_ns_set_layout(S, "f", KV_LAYOUT_OPEN), 0);
	ck_assert_int_eq(kv_store_ns_layout(S, f), KV_LAYOUT_OPEN);
	key("file", h);
	ck_assert_int_eq(kv_store_remove(S, f, h), 0);
	ck_assert_int_eq(kv_store_ns_set_layout(S, "f", KV_LAYOUT_CHAIN), 0);
	ck_assert_int_eq(kv_store_ns_set_layout(S, "f", KV_LAYOUT_OPEN), 0);

	/* nor while it holds a directory (an empty one) */
	ck_assert_int_eq(
		kv_store_ns_create_layout(S, "d", 16, KV_LAYOUT_OPEN, &d), 0);
	ck_assert_int_eq(kv_store_dir_create(S, d, "sub"), 0);
	ck_assert_int_eq(kv_store_ns_set_layout(S, "d", KV_LAYOUT_CHAIN),
			 -ENOTEMPTY);
	ck_assert_int_eq(kv_store_ns_layout(S, d), KV_LAYOUT_OPEN);
	ck_assert_int_eq(kv_store_dir_remove(S, d, "sub"), 0);
	ck_assert_int_eq(kv_store_ns_set_layout(S, "d", KV_LAYOUT_CHAIN), 0);
	ck_assert_int_eq(kv_store_ns_layout(S, d), KV_LAYOUT_CHAIN);

	/* nor while a staging block is being written */
	ck_assert_int_eq(
		kv_store_ns_create_layout(S, "s", 16, KV_LAYOUT_OPEN, &s), 0);
	wh = stage(S, s, 2);
	ck_assert_int_eq(kv_store_ns_set_layout(S, "s", KV_LAYOUT_CHAIN),
			 -ENOTEMPTY);
	ck_assert_int_eq(kv_store_abort(S, wh), 0);
	ck_assert_int_eq(kv_store_ns_set_layout(S, "s", KV_LAYOUT_CHAIN), 0);
	ck_assert_int_eq(kv_store_ns_set_layout(S, "s", KV_LAYOUT_OPEN), 0);

	/* layouts are durable */
	kv_store_close(S);
	S = open_store(&P, 64, 0);
	ck_assert_int_eq(kv_store_ns_find(S, "o", &x, NULL), 0);
	ck_assert_uint_eq(x, NS);
	ck_assert_int_eq(kv_store_ns_layout(S, NS), KV_LAYOUT_OPEN);
	ck_assert_int_eq(kv_store_ns_layout(S, c), KV_LAYOUT_CHAIN);
	ck_assert_int_eq(kv_store_ns_layout(S, c2), KV_LAYOUT_CHAIN);
	ck_assert_int_eq(kv_store_ns_layout(S, f), KV_LAYOUT_OPEN);
	ck_assert_int_eq(kv_store_ns_layout(S, d), KV_LAYOUT_CHAIN);
	ck_assert_int_eq(kv_store_ns_layout(S, s), KV_LAYOUT_OPEN);
	ck_assert_int_eq(kv_store_create_staging(S, c, &wh), -EINVAL);
	ck_assert_int_eq(kv_store_create_staging(S, d, &wh), -EINVAL);
	ck_assert_int_eq(pub(S, s, "after", 3), 0);
	ck_assert(has(S, s, "after", 3));
}
END_TEST

/* ---- staging and publication --------------------------------------- */

START_TEST(test_staging_invisible)
{
	uint8_t k[KVFS_HASH_LEN], ks[1][KVFS_HASH_LEN];
	struct kv_block_info bi;
	struct kv_ref ref;
	char name[256];
	uint64_t cur = 0;
	bool is_dir;
	uint32_t wh, wh2;

	wh = stage(S, NS, 1);
	/* any number of writers may stage the same future path */
	wh2 = stage(S, NS, 2);
	ck_assert_uint_ne(wh, wh2);
	key("f.bin", k);
	memcpy(ks[0], k, sizeof(k));
	ck_assert_int_eq(kv_store_stat(S, NS, k, &bi), -ENOENT);
	ck_assert_int_eq(kv_store_get(S, NS, k, &ref), -ENOENT);
	ck_assert_int_eq(kv_store_lookup(S, NS, k), 0);
	ck_assert_int_eq(
		kv_store_match(S, NS, (const uint8_t(*)[32])ks, 1, 0, NULL), 0);
	ck_assert_int_eq(kv_store_path(S, NS, k, name, sizeof(name)), -ENOENT);
	ck_assert_int_eq(
		kv_store_dir_next(S, NS, "", &cur, name, sizeof(name), &is_dir),
		0);
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 0);
	/* a staging block cannot be sealed: it has no name */
	ck_assert_int_eq(kv_store_seal(S, wh), -EINVAL);

	ck_assert_int_eq(kv_store_publish(S, wh, "f.bin", false), 0);
	ck_assert(has(S, NS, "f.bin", 1));
	ck_assert_int_eq(kv_store_stat(S, NS, k, &bi), 0);
	ck_assert_uint_eq(bi.size, flen(1));
	ck_assert_uint_eq(bi.slot, wh);
	ck_assert_int_eq(kv_store_lookup(S, NS, k), 1);
	ck_assert_int_eq(
		kv_store_match(S, NS, (const uint8_t(*)[32])ks, 1, 0, NULL), 1);
	ck_assert_int_eq(kv_store_path(S, NS, k, name, sizeof(name)), 5);
	ck_assert_str_eq(name, "f.bin");
	ck_assert_int_eq(kv_store_path(S, NS, k, name, 5), -ERANGE);
	ck_assert_int_eq(kv_store_path(S, NS, k, name, 6), 5);
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 1);
	cur = 0;
	ck_assert_int_eq(
		kv_store_dir_next(S, NS, "", &cur, name, sizeof(name), &is_dir),
		1);
	ck_assert_str_eq(name, "f.bin");
	ck_assert(!is_dir);
	ck_assert_int_eq(
		kv_store_dir_next(S, NS, "", &cur, name, sizeof(name), &is_dir),
		0);
	/* the handle is spent */
	ck_assert_int_eq(kv_store_write(S, wh, 0, "x", 1), -EINVAL);
	ck_assert_int_eq(kv_store_publish(S, wh, "g", false), -EINVAL);
	ck_assert_int_eq(kv_store_abort(S, wh), -EINVAL);
	/* a chain create of the file's key is refused like any name */
	ck_assert_int_eq(kv_store_create(S, NS, k, NULL, &wh), -EEXIST);
	ck_assert_int_eq(kv_store_abort(S, wh2), 0);
	ck_assert_uint_eq(slots_free(S), 63);
}
END_TEST

START_TEST(test_publish_replace)
{
	uint8_t k[KVFS_HASH_LEN], old[SLOT];
	struct kv_store_stats ss;
	struct kv_ref r1;
	uint32_t wh;

	ck_assert_int_eq(pub(S, NS, "f", 1), 0);
	key("f", k);
	ck_assert_int_eq(kv_store_get(S, NS, k, &r1), 0);
	fill(old, flen(1), 1);

	wh = stage(S, NS, 2);
	ck_assert_int_eq(kv_store_publish(S, wh, "f", false), 0);
	ck_assert(has(S, NS, "f", 2));
	/* the first file's reader keeps its bytes */
	ck_assert_uint_eq(r1.size, flen(1));
	ck_assert_int_eq(memcmp(r1.data, old, flen(1)), 0);
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 1);
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.total.blocks, 1);
	ck_assert_uint_eq(ss.total.removed, 1);
	ck_assert_uint_eq(ss.slots_free, 62); /* old slot held by r1 */
	/* the new file is not evicted or touched by the old ref's put */
	ck_assert_int_eq(memcmp(r1.data, old, flen(1)), 0);
	ck_assert_int_eq(kv_store_put(S, &r1), 0);
	ck_assert_int_eq(kv_store_put(S, &r1), -EINVAL);
	ck_assert_uint_eq(slots_free(S), 63);
	ck_assert(has(S, NS, "f", 2));

	/* replaced with no reader: the slot goes at once */
	ck_assert_int_eq(pub(S, NS, "f", 3), 0);
	ck_assert(has(S, NS, "f", 3));
	ck_assert_uint_eq(slots_free(S), 63);
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 1);
}
END_TEST

START_TEST(test_publish_errors)
{
	uint32_t wh, wh2;

	ck_assert_int_eq(pub(S, NS, "f", 1), 0);
	/* noreplace: -EEXIST, the handle still the writer's */
	wh = stage(S, NS, 2);
	ck_assert_int_eq(kv_store_publish(S, wh, "f", true), -EEXIST);
	ck_assert(has(S, NS, "f", 1));
	ck_assert_int_eq(kv_store_write(S, wh, 0, "", 0), 0);
	ck_assert_int_eq(kv_store_publish(S, wh, "g", true), 0);
	ck_assert(has(S, NS, "g", 2));
	ck_assert(has(S, NS, "f", 1));
	wh = stage(S, NS, 3);
	ck_assert_int_eq(kv_store_publish(S, wh, "g", true), -EEXIST);
	ck_assert_int_eq(kv_store_abort(S, wh), 0);
	ck_assert(has(S, NS, "g", 2));
	ck_assert_uint_eq(slots_free(S), 62);

	/* a missing directory: -ENOENT, the handle kept */
	wh = stage(S, NS, 4);
	ck_assert_int_eq(kv_store_publish(S, wh, "nodir/x", false), -ENOENT);
	ck_assert_int_eq(kv_store_publish(S, wh, "nodir/x", true), -ENOENT);
	ck_assert_int_eq(kv_store_publish(S, wh, "a/b/x", false), -ENOENT);
	/* a file is not a directory */
	ck_assert_int_eq(kv_store_publish(S, wh, "f/x", false), -ENOENT);
	ck_assert(gone(S, NS, "nodir/x"));
	ck_assert_int_eq(kv_store_dir_create(S, NS, "nodir"), 0);
	ck_assert_int_eq(kv_store_publish(S, wh, "nodir/x", false), 0);
	ck_assert(has(S, NS, "nodir/x", 4));
	ck_assert_int_eq(kv_store_dir_count(S, NS, "nodir"), 1);

	/* onto a directory */
	wh = stage(S, NS, 5);
	ck_assert_int_eq(kv_store_publish(S, wh, "nodir", false), -EISDIR);
	ck_assert_int_eq(kv_store_publish(S, wh, "nodir", true), -EISDIR);
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "nodir"), 1);
	ck_assert(gone(S, NS, "nodir"));

	/* the handle survives every refusal */
	wh2 = stage(S, NS, 6);
	ck_assert_int_eq(kv_store_publish(S, wh, "h", false), 0);
	ck_assert(has(S, NS, "h", 5));
	ck_assert_int_eq(kv_store_abort(S, wh2), 0);
	/* a bad handle */
	ck_assert_int_eq(kv_store_publish(S, wh2, "i", false), -EINVAL);
	ck_assert_int_eq(kv_store_publish(S, 99999, "i", false), -EINVAL);
	ck_assert_int_eq(kv_store_publish(NULL, wh2, "i", false), -EINVAL);
	ck_assert(gone(S, NS, "i"));
}
END_TEST

/* a path of len bytes: components of comp bytes joined by '/' */
static char *mkpath(size_t len, size_t comp)
{
	char *p = malloc(len + 1);

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < len; i++)
		p[i] = (i % (comp + 1) == comp) ? '/' : 'a' + (char)(i % 26);
	p[len] = '\0';
	return p;
}

START_TEST(test_invalid_paths)
{
	static const char *bad[] = {
		"",    "/",   "/a",   "a/",   "a//b",  ".",	 "..",
		"./a", "a/.", "a/..", "../a", "a/./b", "a/../b", "//",
	};
	char c255[256], c256[257], *lng, *maxp;
	uint8_t k[KVFS_HASH_LEN];
	uint32_t wh;

	ck_assert_int_eq(pub(S, NS, "f", 1), 0);
	wh = stage(S, NS, 2);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(kv_store_publish(S, wh, bad[i], false) == -EINVAL,
			      "publish \"%s\"", bad[i]);
		ck_assert_msg(kv_store_dir_create(S, NS, bad[i]) == -EINVAL,
			      "mkdir \"%s\"", bad[i]);
		ck_assert_msg(kv_store_dir_remove(S, NS, bad[i]) == -EINVAL,
			      "rmdir \"%s\"", bad[i]);
		ck_assert_msg(kv_store_rename(S, NS, "f", bad[i], false) ==
				      -EINVAL,
			      "rename to \"%s\"", bad[i]);
		ck_assert_msg(kv_store_rename(S, NS, bad[i], "g", false) ==
				      -EINVAL,
			      "rename from \"%s\"", bad[i]);
	}
	ck_assert_int_eq(kv_store_publish(S, wh, NULL, false), -EINVAL);
	ck_assert_int_eq(kv_store_dir_create(S, NS, NULL), -EINVAL);

	/* a component of 256 bytes is too long, 255 is fine */
	memset(c256, 'n', 256);
	c256[256] = '\0';
	memcpy(c255, c256, 255);
	c255[255] = '\0';
	ck_assert_int_eq(kv_store_publish(S, wh, c256, false), -EINVAL);
	ck_assert_int_eq(kv_store_dir_create(S, NS, c256), -EINVAL);
	/* over KV_STORE_PATH_MAX, with short components */
	lng = mkpath(KV_STORE_PATH_MAX + 1, 8);
	ck_assert_int_eq(kv_store_publish(S, wh, lng, false), -EINVAL);
	ck_assert_int_eq(kv_store_dir_create(S, NS, lng), -EINVAL);
	free(lng);
	ck_assert(has(S, NS, "f", 1));
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 1);

	/* the handle is still the writer's: publish it at 255 bytes */
	ck_assert_int_eq(kv_store_publish(S, wh, c255, false), 0);
	ck_assert(has(S, NS, c255, 2));
	/* names with dots that are not "." or ".." are fine */
	ck_assert_int_eq(pub(S, NS, ".hidden", 3), 0);
	ck_assert_int_eq(pub(S, NS, "...", 4), 0);
	ck_assert_int_eq(pub(S, NS, "a..b", 5), 0);
	ck_assert(has(S, NS, "...", 4));

	/* exactly KV_STORE_PATH_MAX: 16 directories of 254 bytes + 16 */
	maxp = mkpath(KV_STORE_PATH_MAX, 254);
	for (size_t i = 254; i < KV_STORE_PATH_MAX; i += 255) {
		maxp[i] = '\0';
		ck_assert_int_eq(kv_store_dir_create(S, NS, maxp), 0);
		maxp[i] = '/';
	}
	ck_assert_uint_eq(strlen(maxp), KV_STORE_PATH_MAX);
	ck_assert_int_eq(pub(S, NS, maxp, 6), 0);
	ck_assert(has(S, NS, maxp, 6));
	key(maxp, k);
	ck_assert_int_eq(kv_store_remove(S, NS, k), 0);
	free(maxp);
}
END_TEST

/* ---- rename -------------------------------------------------------- */

START_TEST(test_rename)
{
	uint8_t k[KVFS_HASH_LEN], t_old[SLOT];
	struct kv_block_info bi;
	struct kv_ref rt;
	uint32_t slot;

	ck_assert_int_eq(pub(S, NS, "a", 1), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "d"), 0);
	key("a", k);
	ck_assert_int_eq(kv_store_stat(S, NS, k, &bi), 0);
	slot = bi.slot;

	/* a move into a directory */
	ck_assert_int_eq(kv_store_rename(S, NS, "a", "d/b", false), 0);
	ck_assert(gone(S, NS, "a"));
	ck_assert(has(S, NS, "d/b", 1));
	key("d/b", k);
	ck_assert_int_eq(kv_store_stat(S, NS, k, &bi), 0);
	ck_assert_uint_eq(bi.slot, slot);
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 1);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "d"), 1);

	/* replacing a file: its reader keeps its bytes */
	ck_assert_int_eq(pub(S, NS, "t", 2), 0);
	key("t", k);
	ck_assert_int_eq(kv_store_get(S, NS, k, &rt), 0);
	ck_assert_int_eq(kv_store_rename(S, NS, "d/b", "t", false), 0);
	ck_assert(gone(S, NS, "d/b"));
	ck_assert(has(S, NS, "t", 1));
	fill(t_old, flen(2), 2);
	ck_assert_uint_eq(rt.size, flen(2));
	ck_assert_int_eq(memcmp(rt.data, t_old, flen(2)), 0);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "d"), 0);
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 2);
	ck_assert_uint_eq(slots_free(S), 62);
	ck_assert_int_eq(kv_store_put(S, &rt), 0);
	ck_assert_uint_eq(slots_free(S), 63);
	ck_assert(has(S, NS, "t", 1));

	/* noreplace */
	ck_assert_int_eq(pub(S, NS, "u", 3), 0);
	ck_assert_int_eq(kv_store_rename(S, NS, "t", "u", true), -EEXIST);
	ck_assert(has(S, NS, "t", 1));
	ck_assert(has(S, NS, "u", 3));
	ck_assert_int_eq(kv_store_rename(S, NS, "t", "v", true), 0);
	ck_assert(has(S, NS, "v", 1));
	ck_assert(gone(S, NS, "t"));

	/* missing source, missing target directory, onto a directory */
	ck_assert_int_eq(kv_store_rename(S, NS, "t", "w", false), -ENOENT);
	ck_assert_int_eq(kv_store_rename(S, NS, "nodir/t", "w", false),
			 -ENOENT);
	ck_assert_int_eq(kv_store_rename(S, NS, "v", "nodir/w", false),
			 -ENOENT);
	ck_assert_int_eq(kv_store_rename(S, NS, "v", "u/w", false), -ENOENT);
	ck_assert_int_eq(kv_store_rename(S, NS, "v", "d", false), -EISDIR);
	ck_assert_int_eq(kv_store_rename(S, NS, "d", "e", false), -ENOENT);
	ck_assert(has(S, NS, "v", 1));
	ck_assert(gone(S, NS, "w"));
	ck_assert(gone(S, NS, "nodir/w"));
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "d"), 1);

	/* onto itself: nothing happens */
	ck_assert_int_eq(kv_store_rename(S, NS, "v", "v", false), 0);
	ck_assert(has(S, NS, "v", 1));
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 3);

	/* a moved file is found by its new path after reopen, not the old */
	kv_store_close(S);
	S = open_store(&P, 64, 0);
	ck_assert(has(S, NS, "v", 1));
	ck_assert(has(S, NS, "u", 3));
	ck_assert(gone(S, NS, "t"));
	ck_assert(gone(S, NS, "a"));
	ck_assert(gone(S, NS, "d/b"));
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 3);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "d"), 0);
}
END_TEST

/* ---- directories --------------------------------------------------- */

START_TEST(test_dirs)
{
	uint8_t k[KVFS_HASH_LEN];
	struct kv_ref ref;

	ck_assert_int_eq(kv_store_dir_exists(S, NS, ""), 1);
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "a/b"), -ENOENT);
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "a/b"), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "a"), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "a"), -EEXIST);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "a/b"), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "a/b"), -EEXIST);
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "a"), 1);
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "a/b"), 1);
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "a/c"), 0);
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "b"), 0);

	/* a file's path is taken */
	ck_assert_int_eq(pub(S, NS, "f", 1), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "f"), -EEXIST);
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "f"), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "f/x"), -ENOENT);
	ck_assert(has(S, NS, "f", 1));

	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 2);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "a"), 1);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "a/b"), 0);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "nope"), -ENOENT);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "f"), -ENOENT);

	/* rmdir: not while a subdirectory or a file is inside */
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "a"), -ENOTEMPTY);
	ck_assert_int_eq(pub(S, NS, "a/b/x", 2), 0);
	ck_assert_int_eq(pub(S, NS, "a/y", 3), 0);
	ck_assert_int_eq(pub(S, NS, "a/z", 4), 0);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "a"), 3);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "a/b"), 1);
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "a/b"), -ENOTEMPTY);
	/* removed (while referenced, too) */
	key("a/b/x", k);
	ck_assert_int_eq(kv_store_get(S, NS, k, &ref), 0);
	ck_assert_int_eq(kv_store_remove(S, NS, k), 0);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "a/b"), 0);
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "a/b"), 0);
	ck_assert_int_eq(kv_store_put(S, &ref), 0);
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "a/b"), 0);
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "a/b"), -ENOENT);
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "a"), -ENOTEMPTY);
	/* evicted */
	key("a/y", k);
	ck_assert_int_eq(kv_store_evict(S, NS, k), 0);
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "a"), -ENOTEMPTY);
	/* moved away */
	ck_assert_int_eq(kv_store_rename(S, NS, "a/z", "z", false), 0);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "a"), 0);
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "a"), 0);
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "a"), 0);
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "a"), -ENOENT);
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "f"), -ENOENT);
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 2); /* f, z */
	/* the name of a removed directory is free for a file */
	ck_assert_int_eq(pub(S, NS, "a", 5), 0);
	ck_assert(has(S, NS, "a", 5));
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 3);

	/* directories are per namespace */
	{
		uint32_t o2;

		ck_assert_int_eq(kv_store_ns_create_layout(S, "o2", 16,
							   KV_LAYOUT_OPEN, &o2),
				 0);
		ck_assert_int_eq(kv_store_dir_create(S, o2, "a"), 0);
		ck_assert_int_eq(kv_store_dir_create(S, o2, "z"), 0);
		ck_assert_int_eq(kv_store_dir_exists(S, o2, "a"), 1);
		ck_assert_int_eq(kv_store_dir_exists(S, NS, "a"), 0);
		ck_assert_int_eq(kv_store_dir_count(S, o2, ""), 2);
		ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 3);
		ck_assert_int_eq(kv_store_dir_remove(S, o2, "a"), 0);
		ck_assert(has(S, NS, "a", 5));
	}
	ck_assert_int_eq(kv_store_dir_create(S, 9999, "q"), -ENOENT);
	ck_assert_int_eq(kv_store_dir_exists(S, 9999, ""), 0);
	ck_assert_int_eq(kv_store_dir_count(S, 9999, ""), -ENOENT);
}
END_TEST

/* ---- kv_store_dir_next ------------------------------------------------ */

START_TEST(test_dir_next)
{
	static struct walk w, r;
	static const char *top[] = { "d:d1", "d:d2", "d:d3", "f:f1",
				     "f:f2", "f:f3", "f:f4", "f:f5" };
	char name[256];
	bool is_dir;
	uint64_t cur;
	uint32_t o2;
	int first_file;

	ck_assert_int_eq(kv_store_dir_create(S, NS, "d1"), 0);
	ck_assert_int_eq(pub(S, NS, "f1", 1), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "d2"), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "d1/sub"), 0);
	ck_assert_int_eq(pub(S, NS, "f2", 2), 0);
	ck_assert_int_eq(pub(S, NS, "d1/x", 3), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "d3"), 0);
	ck_assert_int_eq(pub(S, NS, "f3", 4), 0);
	ck_assert_int_eq(pub(S, NS, "d2/y", 5), 0);
	ck_assert_int_eq(pub(S, NS, "f4", 6), 0);
	ck_assert_int_eq(pub(S, NS, "d1/sub/deep", 7), 0);
	ck_assert_int_eq(pub(S, NS, "f5", 8), 0);
	/* another namespace's entries are not ours */
	ck_assert_int_eq(
		kv_store_ns_create_layout(S, "o2", 16, KV_LAYOUT_OPEN, &o2), 0);
	ck_assert_int_eq(kv_store_dir_create(S, o2, "d9"), 0);
	ck_assert_int_eq(pub(S, o2, "f9", 9), 0);
	ck_assert_int_eq(kv_store_dir_create(S, o2, "d1"), 0);
	/* and a staging block is nobody's */
	stage(S, NS, 10);

	walk_from(S, NS, "", 0, &w);
	ck_assert_int_eq(w.n, 8);
	for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++)
		ck_assert_msg(walk_find(&w, top[i]) >= 0, "%s missing", top[i]);
	/* directories first */
	first_file = 3;
	for (int i = 0; i < w.n; i++)
		ck_assert_msg((i < first_file) == (w.name[i][0] == 'd'),
			      "entry %d %s out of order", i, w.name[i]);
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), w.n);

	/* resumed from every cursor: the rest, exactly */
	for (int i = 0; i <= w.n; i++) {
		walk_from(S, NS, "", w.cursor[i], &r);
		ck_assert_int_eq(r.n, w.n - i);
		for (int j = 0; j < r.n; j++)
			ck_assert_str_eq(r.name[j], w.name[i + j]);
	}

	walk_from(S, NS, "d1", 0, &w);
	ck_assert_int_eq(w.n, 2);
	ck_assert_str_eq(w.name[0], "d:sub");
	ck_assert_str_eq(w.name[1], "f:x");
	walk_from(S, NS, "d1/sub", 0, &w);
	ck_assert_int_eq(w.n, 1);
	ck_assert_str_eq(w.name[0], "f:deep");
	walk_from(S, NS, "d2", 0, &w);
	ck_assert_int_eq(w.n, 1);
	ck_assert_str_eq(w.name[0], "f:y");
	walk_from(S, NS, "d3", 0, &w);
	ck_assert_int_eq(w.n, 0);
	walk_from(S, o2, "", 0, &w);
	ck_assert_int_eq(w.n, 3);
	ck_assert_int_ge(walk_find(&w, "d:d9"), 0);
	ck_assert_int_ge(walk_find(&w, "d:d1"), 0);
	ck_assert_int_eq(walk_find(&w, "f:f9"), 2);
	walk_from(S, o2, "d1", 0, &w);
	ck_assert_int_eq(w.n, 0);

	cur = 0;
	ck_assert_int_eq(kv_store_dir_next(S, NS, "nope", &cur, name,
					   sizeof(name), &is_dir),
			 -ENOENT);
	ck_assert_int_eq(kv_store_dir_next(S, NS, "f1", &cur, name,
					   sizeof(name), &is_dir),
			 -ENOENT);
	ck_assert_int_eq(kv_store_dir_next(S, 9999, "", &cur, name,
					   sizeof(name), &is_dir),
			 -ENOENT);
	ck_assert_int_eq(
		kv_store_dir_next(S, NS, "", NULL, name, sizeof(name), &is_dir),
		-EINVAL);
}
END_TEST

START_TEST(test_dir_next_many)
{
	static struct walk w;
	static uint8_t seen[5000];
	char path[64];
	unsigned i;

	kv_store_close(S);
	tu_paths(&P);
	S = open_store(&P, 5200, 0);
	ck_assert_int_eq(
		kv_store_ns_create_layout(S, "o", 1, KV_LAYOUT_OPEN, &NS), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "big"), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "big/s"), 0);
	for (i = 0; i < 5000; i++) {
		uint32_t wh;

		snprintf(path, sizeof(path), "big/f%05u", i);
		ck_assert_int_eq(kv_store_create_staging(S, NS, &wh), 0);
		ck_assert_int_eq(kv_store_write(S, wh, 0, &i, sizeof(i)), 0);
		ck_assert_int_eq(kv_store_publish(S, wh, path, false), 0);
	}
	/* and many directories, elsewhere */
	for (i = 0; i < 300; i++) {
		snprintf(path, sizeof(path), "big/s/d%03u", i);
		ck_assert_int_eq(kv_store_dir_create(S, NS, path), 0);
	}
	ck_assert_int_eq(kv_store_dir_count(S, NS, "big"), 5001);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "big/s"), 300);

	walk_from(S, NS, "big", 0, &w);
	ck_assert_int_eq(w.n, 5001);
	ck_assert_str_eq(w.name[0], "d:s");
	for (int j = 1; j < w.n; j++) {
		unsigned n;

		ck_assert_int_eq(sscanf(w.name[j], "f:f%05u", &n), 1);
		ck_assert_uint_lt(n, 5000);
		ck_assert_msg(!seen[n], "f%05u twice", n);
		seen[n] = 1;
	}
	walk_from(S, NS, "big/s", 0, &w);
	ck_assert_int_eq(w.n, 300);
	for (int j = 0; j < w.n; j++)
		ck_assert_int_eq(w.name[j][0], 'd');
	for (i = 0; i < 300; i++) {
		snprintf(path, sizeof(path), "d:d%03u", i);
		ck_assert_int_ge(walk_find(&w, path), 0);
	}
}
END_TEST

/* removals during a walk: nothing is listed twice */
START_TEST(test_dir_next_removal)
{
	static struct walk w;
	char name[256], path[64], seen[128][260];
	uint8_t k[KVFS_HASH_LEN];
	int nseen = 0, step = 0;
	uint64_t cur = 0;
	bool is_dir;
	int rc;

	for (int i = 0; i < 20; i++) {
		snprintf(path, sizeof(path), "dir%02d", i);
		ck_assert_int_eq(kv_store_dir_create(S, NS, path), 0);
	}
	for (int i = 0; i < 40; i++) {
		snprintf(path, sizeof(path), "file%02d", i);
		ck_assert_int_eq(pub(S, NS, path, (uint32_t)i), 0);
	}
	while ((rc = kv_store_dir_next(S, NS, "", &cur, name, sizeof(name),
				       &is_dir)) == 1) {
		for (int j = 0; j < nseen; j++)
			ck_assert_msg(strcmp(seen[j] + 2, name) != 0,
				      "%s listed twice", name);
		ck_assert_int_lt(nseen, 128);
		snprintf(seen[nseen++], sizeof(seen[0]), "%c:%s",
			 is_dir ? 'd' : 'f', name);
		/* remove what was just listed, and one earlier and one
		 * later entry of each kind, now and then */
		if (is_dir)
			ck_assert_int_eq(kv_store_dir_remove(S, NS, name), 0);
		else {
			key(name, k);
			ck_assert_int_eq(kv_store_remove(S, NS, k), 0);
		}
		step++;
		if (step % 3 == 0) {
			snprintf(path, sizeof(path), "dir%02d",
				 (step * 7) % 20);
			kv_store_dir_remove(S, NS, path);
			snprintf(path, sizeof(path), "file%02d",
				 (step * 11) % 40);
			key(path, k);
			kv_store_remove(S, NS, k);
		}
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_int_gt(nseen, 20);
	/* what is left is listed by a fresh walk, once each (whether all of
	 * it should have been seen above: test_dir_next_removal_keeps_others)
	 */
	walk_from(S, NS, "", 0, &w);
	ck_assert_int_eq(w.n, kv_store_dir_count(S, NS, ""));
	for (int i = 0; i < w.n; i++)
		walk_find(&w, w.name[i]);
}
END_TEST

/*
 * Removing a directory during a walk must not hide one that was neither
 * made nor removed (store.h: only those "may or may not be seen").
 */
START_TEST(test_dir_next_removal_keeps_others)
{
	static struct walk w;
	char name[256], path[64];
	uint64_t cur = 0;
	bool is_dir;
	int n = 0;

	for (int i = 0; i < 10; i++) {
		snprintf(path, sizeof(path), "d%d", i);
		ck_assert_int_eq(kv_store_dir_create(S, NS, path), 0);
	}
	walk_from(S, NS, "", 0, &w);
	ck_assert_int_eq(w.n, 10);
	/* take 5 entries, then remove the first one seen */
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(kv_store_dir_next(S, NS, "", &cur, name,
						   sizeof(name), &is_dir),
				 1);
	ck_assert_int_eq(kv_store_dir_remove(S, NS, w.name[0] + 2), 0);
	while (kv_store_dir_next(S, NS, "", &cur, name, sizeof(name),
				 &is_dir) == 1)
		n++;
	/* w.name[5..9] were untouched: all five must follow */
	ck_assert_msg(n == 5, "%d of the 5 untouched entries listed", n);
}
END_TEST

/*
 * A file replaced (published again) during a walk: one path, so it is
 * listed at most once.
 */
START_TEST(test_dir_next_replace_once)
{
	char name[256];
	uint64_t cur = 0;
	int nf = 0;
	bool is_dir;

	ck_assert_int_eq(pub(S, NS, "f", 1), 0);
	ck_assert_int_eq(
		kv_store_dir_next(S, NS, "", &cur, name, sizeof(name), &is_dir),
		1);
	ck_assert_str_eq(name, "f");
	nf++;
	ck_assert_int_eq(pub(S, NS, "f", 2), 0);
	while (kv_store_dir_next(S, NS, "", &cur, name, sizeof(name),
				 &is_dir) == 1)
		nf += strcmp(name, "f") == 0;
	/* store.h: the new version is a new entry, the old one is gone */
	ck_assert_msg(nf <= 2, "\"f\" listed %d times", nf);
}
END_TEST

/* ---- recovery ------------------------------------------------------ */

START_TEST(test_recovery)
{
	static struct walk w;
	struct kv_store_stats ss;
	uint8_t k[KVFS_HASH_LEN];
	struct kv_index *ix;
	uint32_t wh, id;

	ck_assert_int_eq(kv_store_dir_create(S, NS, "a"), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "a/b"), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "a/b/c"), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "empty"), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "gone"), 0);
	ck_assert_int_eq(pub(S, NS, "top", 1), 0);
	ck_assert_int_eq(pub(S, NS, "top", 2), 0); /* replaced */
	ck_assert_int_eq(pub(S, NS, "a/x", 3), 0);
	ck_assert_int_eq(kv_store_rename(S, NS, "a/x", "a/x2", false), 0);
	ck_assert_int_eq(pub(S, NS, "a/b/y", 4), 0);
	ck_assert_int_eq(pub(S, NS, "rm", 5), 0);
	key("rm", k);
	ck_assert_int_eq(kv_store_remove(S, NS, k), 0);
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "gone"), 0);
	/* left staging, and left staging after a refused publish */
	stage(S, NS, 6);
	wh = stage(S, NS, 7);
	ck_assert_int_eq(kv_store_publish(S, wh, "top", true), -EEXIST);

	kv_store_close(S);
	S = open_store(&P, 64, 0);
	ck_assert_int_eq(kv_store_ns_find(S, "o", &id, NULL), 0);
	ck_assert_uint_eq(id, NS);
	ck_assert(has(S, NS, "top", 2));
	ck_assert(has(S, NS, "a/x2", 3));
	ck_assert(has(S, NS, "a/b/y", 4));
	ck_assert(gone(S, NS, "a/x"));
	ck_assert(gone(S, NS, "rm"));
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "a"), 1);
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "a/b"), 1);
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "a/b/c"), 1);
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "empty"), 1);
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "gone"), 0);
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 3);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "a"), 2);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "a/b"), 2);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "a/b/c"), 0);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "empty"), 0);
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.total.writing, 0);
	ck_assert_uint_eq(ss.total.blocks, 3);
	ck_assert_uint_eq(ss.recovered, 3);
	ck_assert_uint_eq(ss.recovery_dropped, 0);
	ck_assert_uint_eq(ss.slots_free, 61); /* staging slots came back */
	walk_from(S, NS, "", 0, &w);
	ck_assert_int_eq(w.n, 3);
	ck_assert_int_ge(walk_find(&w, "d:a"), 0);
	ck_assert_int_ge(walk_find(&w, "d:empty"), 0);
	ck_assert_int_eq(walk_find(&w, "f:top"), 2);
	walk_from(S, NS, "a/b", 0, &w);
	ck_assert_int_eq(w.n, 2);
	ck_assert_str_eq(w.name[0], "d:c");
	ck_assert_str_eq(w.name[1], "f:y");
	/* still working after reopen */
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "a"), -ENOTEMPTY);
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "empty"), 0);
	ck_assert_int_eq(pub(S, NS, "a/b/c/z", 8), 0);
	ck_assert(has(S, NS, "a/b/c/z", 8));

	/* directory records lost: the files and directories below bring
	 * them back, durably */
	kv_store_close(S);
	S = NULL;
	ck_assert_int_eq(kv_index_open(P.index, &ix), 0);
	ck_assert_int_eq(kv_index_del_dir(ix, NS, "a", 1), 0);
	ck_assert_int_eq(kv_index_del_dir(ix, NS, "a/b", 3), 0);
	kv_index_close(ix);
	S = open_store(&P, 64, 0);
	ck_assert(has(S, NS, "a/b/y", 4));
	ck_assert(has(S, NS, "a/x2", 3));
	ck_assert(has(S, NS, "a/b/c/z", 8));
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "a"), 1);
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "a/b"), 1);
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "a/b/c"), 1);
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 2);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "a"), 2);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "a/b"), 2);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "a/b/c"), 1);
	walk_from(S, NS, "a", 0, &w);
	ck_assert_int_eq(w.n, 2);
	ck_assert_str_eq(w.name[0], "d:b");
	ck_assert_str_eq(w.name[1], "f:x2");
	/* empty the tree but for a/b: it must stay after another reopen */
	key("a/b/y", k);
	ck_assert_int_eq(kv_store_remove(S, NS, k), 0);
	key("a/b/c/z", k);
	ck_assert_int_eq(kv_store_remove(S, NS, k), 0);
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "a/b/c"), 0);
	kv_store_close(S);
	S = open_store(&P, 64, 0);
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "a/b"), 1);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "a/b"), 0);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "a"), 2);
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "a/b"), 0);
	ck_assert(has(S, NS, "a/x2", 3));
}
END_TEST

/* a pathless replica (arrived by key) learns its path */
START_TEST(test_set_path)
{
	uint8_t k[KVFS_HASH_LEN], buf[SLOT];
	char name[256];
	uint32_t wh;

	key("r/s", k);
	ck_assert_int_eq(kv_store_create(S, NS, k, NULL, &wh), 0);
	fill(buf, flen(1), 1);
	ck_assert_int_eq(kv_store_write(S, wh, 0, buf, flen(1)), 0);
	ck_assert_int_eq(kv_store_seal(S, wh), 0);
	ck_assert_int_eq(kv_store_path(S, NS, k, name, sizeof(name)), -ENODATA);
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 0);
	ck_assert_int_eq(kv_store_set_path(S, NS, "r/t"), -ENOENT);
	ck_assert_int_eq(kv_store_set_path(S, NS, "r//s"), -EINVAL);
	ck_assert_int_eq(kv_store_set_path(S, NS, "r/s"), 0);
	ck_assert(has(S, NS, "r/s", 1));
	ck_assert_int_eq(kv_store_dir_exists(S, NS, "r"), 1);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "r"), 1);
	ck_assert_int_eq(kv_store_dir_count(S, NS, ""), 1);
	ck_assert_int_eq(kv_store_set_path(S, NS, "r/s"), 0);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "r"), 1);
	kv_store_close(S);
	S = open_store(&P, 64, 0);
	ck_assert(has(S, NS, "r/s", 1));
	ck_assert_int_eq(kv_store_dir_count(S, NS, "r"), 1);
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "r"), -ENOTEMPTY);
}
END_TEST

/* ---- eviction ------------------------------------------------------ */

START_TEST(test_eviction)
{
	struct kv_store_stats ss;
	uint8_t k[KVFS_HASH_LEN];
	struct kv_ref ref;
	uint32_t wh[4], extra;
	char path[32];

	kv_store_close(S);
	tu_paths(&P);
	S = open_store(&P, 4, 0);
	ck_assert_int_eq(
		kv_store_ns_create_layout(S, "o", 16, KV_LAYOUT_OPEN, &NS), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "e"), 0);
	ck_assert_int_eq(kv_store_dir_create(S, NS, "g"), 0);
	for (uint32_t i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "e/f%u", i);
		ck_assert_int_eq(pub(S, NS, path, i), 0);
	}
	ck_assert_int_eq(kv_store_dir_count(S, NS, "e"), 4);
	/* a fifth file evicts the oldest */
	ck_assert_int_eq(pub(S, NS, "e/f4", 4), 0);
	ck_assert(gone(S, NS, "e/f0"));
	ck_assert_int_eq(kv_store_dir_count(S, NS, "e"), 4);
	/* a referenced one stays */
	key("e/f1", k);
	ck_assert_int_eq(kv_store_get(S, NS, k, &ref), 0);
	for (uint32_t i = 5; i < 8; i++) {
		snprintf(path, sizeof(path), "e/f%u", i);
		ck_assert_int_eq(pub(S, NS, path, i), 0);
	}
	ck_assert(gone(S, NS, "e/f2"));
	ck_assert(gone(S, NS, "e/f3"));
	ck_assert(gone(S, NS, "e/f4"));
	for (uint32_t i = 5; i < 8; i++) {
		snprintf(path, sizeof(path), "e/f%u", i);
		ck_assert(has(S, NS, path, i));
	}
	ck_assert_int_eq(kv_store_dir_count(S, NS, "e"), 4);
	ck_assert_int_eq(kv_store_put(S, &ref), 0);
	ck_assert(has(S, NS, "e/f1", 1));

	/* files elsewhere push every one of e's out */
	for (uint32_t i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "g/h%u", i);
		ck_assert_int_eq(pub(S, NS, path, 10 + i), 0);
		if (i < 3)
			ck_assert_int_eq(kv_store_dir_remove(S, NS, "e"),
					 -ENOTEMPTY);
	}
	ck_assert_int_eq(kv_store_dir_count(S, NS, "e"), 0);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "g"), 4);
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	ck_assert_uint_eq(ss.total.evictions, 8);
	ck_assert_uint_eq(ss.total.blocks, 4);
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "e"), 0);

	/* staging blocks are never evicted: with every slot staged or
	 * referenced there is no room */
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(kv_store_create_staging(S, NS, &wh[i]), 0);
	ck_assert_int_eq(kv_store_dir_count(S, NS, "g"), 0);
	ck_assert_int_eq(kv_store_create_staging(S, NS, &extra), -ENOSPC);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(kv_store_abort(S, wh[i]), 0);
	ck_assert_int_eq(kv_store_dir_remove(S, NS, "g"), 0);
}
END_TEST

/* ---- kv_store_closing ---------------------------------------------- */

struct later {
	struct kv_store *st;
	uint32_t wh;
	unsigned ms;
	bool abort;
};

static void *later_fn(void *arg)
{
	struct later *l = arg;

	msleep(l->ms);
	if (l->abort)
		kv_store_abort(l->st, l->wh);
	else
		kv_store_seal(l->st, l->wh);
	return NULL;
}

/* a chain block left written but not sealed */
static uint32_t written(struct kv_store *st, uint32_t ns,
			const uint8_t h[KVFS_HASH_LEN], const uint8_t *parent)
{
	uint8_t buf[100];
	uint32_t wh;

	ck_assert_int_eq(kv_store_create(st, ns, h, parent, &wh), 0);
	tu_fill(buf, sizeof(buf), h);
	ck_assert_int_eq(kv_store_write(st, wh, 0, buf, sizeof(buf)), 0);
	return wh;
}

enum probe { P_STAT, P_GET, P_LOOKUP, P_MATCH };

/* look h up one way; 1 found, 0 missed; *ms: how long it took */
static int probe(struct kv_store *st, uint32_t ns,
		 const uint8_t h[KVFS_HASH_LEN], enum probe how, uint64_t *ms)
{
	uint8_t hs[1][KVFS_HASH_LEN];
	struct kv_block_info bi;
	uint64_t t0 = kvfs_mono_ns();
	struct kv_ref ref;
	int rc = -1;

	memcpy(hs[0], h, KVFS_HASH_LEN);
	switch (how) {
	case P_STAT:
		rc = kv_store_stat(st, ns, h, &bi) == 0;
		break;
	case P_GET:
		rc = kv_store_get(st, ns, h, &ref) == 0;
		if (rc)
			ck_assert_int_eq(kv_store_put(st, &ref), 0);
		break;
	case P_LOOKUP:
		rc = kv_store_lookup(st, ns, h);
		break;
	case P_MATCH:
		rc = (int)kv_store_match(st, ns, (const uint8_t(*)[32])hs, 1, 0,
					 NULL);
		break;
	}
	*ms = ms_since(t0);
	return rc;
}

START_TEST(test_closing_seal)
{
	uint8_t h[KVFS_HASH_LEN];
	struct later l;
	pthread_t t;
	uint64_t ms;
	uint32_t c;

	/* a long wait: the seal, 100 ms later, must end it early */
	kv_store_close(S);
	tu_paths(&P);
	S = open_store(&P, 64, 3000);
	ck_assert_int_eq(kv_store_ns_create(S, "c", 16, &c), 0);
	for (int how = P_STAT; how <= P_MATCH; how++) {
		for (int ab = 0; ab < 2; ab++) {
			tu_hash(h, (uint32_t)(how * 2 + ab), 1);
			l = (struct later){ S, written(S, c, h, NULL), 100,
					    ab != 0 };
			ck_assert_int_eq(kv_store_closing(S, l.wh, true), 0);
			ck_assert_int_eq(pthread_create(&t, NULL, later_fn, &l),
					 0);
			ck_assert_int_eq(probe(S, c, h, how, &ms), !ab);
			ck_assert_int_eq(pthread_join(t, NULL), 0);
			ck_assert_msg(ms >= 50 && ms < 2000,
				      "probe %d abort %d took %llu ms", how, ab,
				      (unsigned long long)ms);
			ck_assert_int_eq(probe(S, c, h, how, &ms), !ab);
			ck_assert_uint_lt(ms, 1000); /* not the 3 s wait */
		}
	}
	/* a match waits for a closing block after sealed ones */
	{
		uint8_t hs[3][KVFS_HASH_LEN];
		uint64_t t0;

		tu_hash(hs[0], 100, 2);
		tu_hash(hs[1], 101, 2);
		tu_hash(hs[2], 102, 2);
		ck_assert_int_eq(tu_put_block(S, c, hs[0], NULL, 10), 0);
		l = (struct later){ S, written(S, c, hs[1], hs[0]), 100,
				    false };
		ck_assert_int_eq(kv_store_closing(S, l.wh, true), 0);
		ck_assert_int_eq(pthread_create(&t, NULL, later_fn, &l), 0);
		t0 = kvfs_mono_ns();
		ck_assert_int_eq(kv_store_match(S, c, (const uint8_t(*)[32])hs,
						3, 0, NULL),
				 2);
		ms = ms_since(t0);
		ck_assert_int_eq(pthread_join(t, NULL), 0);
		ck_assert_msg(ms >= 50 && ms < 2000, "match took %llu ms",
			      (unsigned long long)ms);
	}
	ck_assert_int_eq(kv_store_closing(S, 99999, true), -EINVAL);
	ck_assert_int_eq(kv_store_closing(S, l.wh, true), -EINVAL); /* sealed */
}
END_TEST

START_TEST(test_closing_timeout)
{
	uint8_t h[KVFS_HASH_LEN], g[KVFS_HASH_LEN];
	uint32_t c, wh, wg;
	uint64_t ms;

	kv_store_close(S);
	tu_paths(&P);
	/* a wait long enough that "no wait" stays far from it on a
	 * loaded machine */
	S = open_store(&P, 64, 1000);
	ck_assert_int_eq(kv_store_ns_create(S, "c", 16, &c), 0);
	tu_hash(h, 1, 3);
	tu_hash(g, 2, 3);
	wh = written(S, c, h, NULL);
	wg = written(S, c, g, NULL);
	for (int how = P_STAT; how <= P_MATCH; how++) {
		/* closed, never sealed: the wait runs out, a miss */
		ck_assert_int_eq(kv_store_closing(S, wh, true), 0);
		ck_assert_int_eq(probe(S, c, h, how, &ms), 0);
		ck_assert_msg(ms >= 980 && ms < 5000,
			      "probe %d gave up after %llu ms", how,
			      (unsigned long long)ms);
		/* the wait is counted from the close: the next lookup of a
		 * writer that holds on costs nothing */
		ck_assert_int_eq(probe(S, c, h, how, &ms), 0);
		ck_assert_msg(ms < 500, "probe %d waited again: %llu ms", how,
			      (unsigned long long)ms);
		/* written to again (a dup was closed): no wait either */
		ck_assert_int_eq(kv_store_closing(S, wh, true), 0);
		ck_assert_int_eq(kv_store_closing(S, wh, false), 0);
		ck_assert_int_eq(probe(S, c, h, how, &ms), 0);
		ck_assert_msg(ms < 500, "probe %d after a write: %llu ms", how,
			      (unsigned long long)ms);
		/* not closed: no wait at all */
		ck_assert_int_eq(probe(S, c, g, how, &ms), 0);
		ck_assert_msg(ms < 500, "probe %d of an open block: %llu ms",
			      how, (unsigned long long)ms);
	}
	/* sealed late, it is there */
	ck_assert_int_eq(kv_store_seal(S, wh), 0);
	ck_assert_int_eq(probe(S, c, h, P_STAT, &ms), 1);
	ck_assert_uint_lt(ms, 500);
	ck_assert_int_eq(kv_store_abort(S, wg), 0);
	ck_assert_int_eq(probe(S, c, g, P_LOOKUP, &ms), 0);
	ck_assert_uint_lt(ms, 500);
}
END_TEST

/* ---- store.h's word on chain namespaces and shared keys -------------- */

/* "Calls on a chain namespace are -EINVAL." */
START_TEST(test_chain_ns_calls)
{
	uint8_t k[KVFS_HASH_LEN];
	static const char *what[] = { "dir_create", "rename",	 "set_path",
				      "dir_remove", "dir_count", "dir_next" };
	char name[256], msg[256] = "";
	uint64_t cur = 0;
	bool is_dir;
	long got[6];
	uint32_t c;
	int n = 0;

	ck_assert_int_eq(kv_store_ns_create(S, "c", 16, &c), 0);
	key("f", k);
	ck_assert_int_eq(tu_put_block(S, c, k, NULL, 10), 0);
	/* every call checked, the ones that differ named together */
	got[0] = kv_store_dir_create(S, c, "d");
	got[1] = kv_store_rename(S, c, "f", "g", false);
	got[2] = kv_store_set_path(S, c, "f");
	got[3] = kv_store_dir_remove(S, c, "d");
	got[4] = kv_store_dir_count(S, c, "");
	got[5] = kv_store_dir_next(S, c, "", &cur, name, sizeof(name), &is_dir);
	for (int i = 0; i < 6; i++)
		if (got[i] != -EINVAL)
			n += snprintf(msg + n, sizeof(msg) - (size_t)n,
				      " %s=%ld", what[i], got[i]);
	ck_assert_msg(n == 0, "on a chain namespace, not -EINVAL:%s", msg);
}
END_TEST

/* a path is a file or a directory, never both */
START_TEST(test_set_path_under_file)
{
	uint8_t k[KVFS_HASH_LEN];
	uint32_t wh;
	int rc;

	ck_assert_int_eq(pub(S, NS, "f", 1), 0);
	key("f/x", k);
	ck_assert_int_eq(kv_store_create(S, NS, k, NULL, &wh), 0);
	ck_assert_int_eq(kv_store_seal(S, wh), 0);
	rc = kv_store_set_path(S, NS, "f/x");
	ck_assert_msg(rc < 0 || kv_store_dir_exists(S, NS, "f") == 0 ||
			      gone(S, NS, "f"),
		      "set_path f/x: %d, and f is a file and a directory", rc);
}
END_TEST

/* a file published while a replica of its key is being written */
START_TEST(test_publish_vs_writing_key)
{
	uint8_t k[KVFS_HASH_LEN];
	struct kv_store_stats ss;
	uint32_t wr, wh;
	int rp, rs, rm;

	key("p", k);
	ck_assert_int_eq(kv_store_create(S, NS, k, NULL, &wr), 0);
	wh = stage(S, NS, 1);
	rp = kv_store_publish(S, wh, "p", false);
	if (rp < 0)
		kv_store_abort(S, wh);
	rs = kv_store_seal(S, wr);
	/* whatever won, one block of that key is left, and removing it
	 * leaves none */
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	rm = kv_store_remove(S, NS, k);
	ck_assert_msg(
		ss.total.blocks == 1 && rm == 0 && gone(S, NS, "p"),
		"publish %d, seal %d: %llu blocks of one key; after remove "
		"(%d) lookup %d",
		rp, rs, (unsigned long long)ss.total.blocks, rm,
		kv_store_lookup(S, NS, k));
}
END_TEST

/* a file renamed onto the key of a replica being written */
START_TEST(test_rename_vs_writing_key)
{
	uint8_t k[KVFS_HASH_LEN];
	struct kv_store_stats ss;
	int rr, rs, rm;
	uint32_t wr;

	ck_assert_int_eq(pub(S, NS, "a", 1), 0);
	key("q", k);
	ck_assert_int_eq(kv_store_create(S, NS, k, NULL, &wr), 0);
	rr = kv_store_rename(S, NS, "a", "q", false);
	rs = kv_store_seal(S, wr);
	ck_assert_int_eq(kv_store_stats(S, &ss), 0);
	rm = kv_store_remove(S, NS, k);
	ck_assert_msg(
		ss.total.blocks == 1 && rm == 0 && gone(S, NS, "q"),
		"rename %d, seal %d: %llu blocks of one key; after remove "
		"(%d) lookup %d",
		rr, rs, (unsigned long long)ss.total.blocks, rm,
		kv_store_lookup(S, NS, k));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("open");
	TCase *tc = tcase_create("core");
	TCase *tb = tcase_create("contract");

	tu_init("open");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_layouts);
	tcase_add_test(tc, test_staging_invisible);
	tcase_add_test(tc, test_publish_replace);
	tcase_add_test(tc, test_publish_errors);
	tcase_add_test(tc, test_invalid_paths);
	tcase_add_test(tc, test_rename);
	tcase_add_test(tc, test_dirs);
	tcase_add_test(tc, test_dir_next);
	tcase_add_test(tc, test_dir_next_many);
	tcase_add_test(tc, test_dir_next_removal);
	tcase_add_test(tc, test_recovery);
	tcase_add_test(tc, test_set_path);
	tcase_add_test(tc, test_eviction);
	tcase_add_test(tc, test_closing_seal);
	tcase_add_test(tc, test_closing_timeout);
	suite_add_tcase(s, tc);
	/* cases where the code and store.h disagree (see each test) */
	tcase_add_checked_fixture(tb, setup, teardown);
	tcase_add_test(tb, test_dir_next_removal_keeps_others);
	tcase_add_test(tb, test_dir_next_replace_once);
	tcase_add_test(tb, test_chain_ns_calls);
	tcase_add_test(tb, test_set_path_under_file);
	tcase_add_test(tb, test_publish_vs_writing_key);
	tcase_add_test(tb, test_rename_vs_writing_key);
	suite_add_tcase(s, tb);
	return tu_run(s);
}

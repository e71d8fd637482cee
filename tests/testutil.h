/*
 * testutil.h - shared scaffolding for the Check unit tests.
 *
 * Every test binary works under one private root: a temp directory for
 * RocksDB and a /dev/shm name prefix for pools, both made in main() and
 * removed by tu_cleanup() when the runner ends, whatever the tests did
 * (Check forks each test, so a failing test cannot clean up itself).
 */
#ifndef KVFS_TESTUTIL_H
#define KVFS_TESTUTIL_H

#include <check.h>
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/common/hash.h"
#include "src/common/log.h"
#include "kvstore/store.h"

static char tu_root[256];
static char tu_shm[128]; /* pool name prefix: /dev/shm/<this>-N.pool */
static unsigned tu_seq;

static inline void tu_init(const char *name)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(tu_root, sizeof(tu_root), "%s/kvfs-%s-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp", name);
	if (!mkdtemp(tu_root)) {
		perror("mkdtemp");
		exit(99);
	}
	snprintf(tu_shm, sizeof(tu_shm), "kvfs-test-%s-%d", name,
		 (int)getpid());
	kvfs_log_init(name, KVFS_LOG_ERR);
}

static inline int tu_rm(const char *path, const struct stat *sb, int flag,
			struct FTW *ftw)
{
	return remove(path);
}

static inline void tu_cleanup(void)
{
	char path[512];
	struct dirent *de;
	DIR *d;

	if (tu_root[0])
		nftw(tu_root, tu_rm, 16, FTW_DEPTH | FTW_PHYS);
	d = opendir("/dev/shm");
	if (!d)
		return;
	while ((de = readdir(d)))
		if (strncmp(de->d_name, tu_shm, strlen(tu_shm)) == 0) {
			snprintf(path, sizeof(path), "/dev/shm/%s", de->d_name);
			/* a pool, or its spill directory (pool.h) */
			nftw(path, tu_rm, 16, FTW_DEPTH | FTW_PHYS);
		}
	closedir(d);
}

/* fresh pool path and index dir, unique in this runner */
struct tu_paths {
	char pool[256];
	char index[512];
};

static inline void tu_paths(struct tu_paths *p)
{
	unsigned n = __atomic_fetch_add(&tu_seq, 1, __ATOMIC_RELAXED);

	snprintf(p->pool, sizeof(p->pool), "/dev/shm/%s-%d-%u.pool", tu_shm,
		 (int)getpid(), n);
	snprintf(p->index, sizeof(p->index), "%s/index-%d-%u", tu_root,
		 (int)getpid(), n);
}

static inline struct kv_store *tu_open(const struct tu_paths *p,
				       uint64_t slot_size, uint32_t nslots)
{
	struct kv_store_config cfg = {
		.pool_path = p->pool,
		.index_dir = p->index,
		.slot_size = slot_size,
		.nslots = nslots,
	};
	struct kv_store *st = NULL;
	int rc = kv_store_open(&cfg, &st);

	ck_assert_msg(rc == 0, "kv_store_open: %d", rc);
	return st;
}

/* a deterministic, distinct hash per (i, salt) */
static inline void tu_hash(uint8_t h[KVFS_HASH_LEN], uint32_t i, uint32_t salt)
{
	uint64_t x = ((uint64_t)salt << 32 | i) * 0x9e3779b97f4a7c15ull;

	for (int k = 0; k < KVFS_HASH_LEN; k++) {
		x ^= x >> 29;
		x *= 0xbf58476d1ce4e5b9ull;
		h[k] = (uint8_t)(x >> 56);
	}
	memcpy(h, &i, sizeof(i)); /* guarantee distinct i */
	memcpy(h + 4, &salt, sizeof(salt));
}

/* fill buf with bytes derived from (hash, len) */
static inline void tu_fill(void *buf, size_t len,
			   const uint8_t h[KVFS_HASH_LEN])
{
	uint64_t x;
	uint8_t *p = buf;

	memcpy(&x, h, sizeof(x));
	for (size_t i = 0; i < len; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		p[i] = (uint8_t)(x >> 56);
	}
}

/* create + write + seal one block of len bytes; returns the seal's rc */
static inline int tu_put_block(struct kv_store *st, uint32_t ns,
			       const uint8_t h[KVFS_HASH_LEN],
			       const uint8_t *parent, size_t len)
{
	uint8_t buf[65536];
	uint32_t wh;
	int rc;

	ck_assert(len <= sizeof(buf));
	rc = kv_store_create(st, ns, h, parent, &wh);
	if (rc < 0)
		return rc;
	tu_fill(buf, len, h);
	rc = kv_store_write(st, wh, 0, buf, len);
	if (rc < 0) {
		kv_store_abort(st, wh);
		return rc;
	}
	return kv_store_seal(st, wh);
}

/* 1 when the block is cached with exactly the bytes tu_fill makes */
static inline int tu_verify(struct kv_store *st, uint32_t ns,
			    const uint8_t h[KVFS_HASH_LEN], size_t len)
{
	uint8_t buf[65536];
	struct kv_ref ref;
	int ok;

	if (kv_store_get(st, ns, h, &ref) < 0)
		return 0;
	tu_fill(buf, len, h);
	ok = ref.size == len && memcmp(ref.data, buf, len) == 0;
	kv_store_put(st, &ref);
	return ok;
}

static inline int tu_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	tu_cleanup();
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif /* KVFS_TESTUTIL_H */

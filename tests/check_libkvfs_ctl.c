/*
 * check_libkvfs_ctl.c - libkvfs's zero-copy calls and the control
 * commands behind them (map, unmap, alloc, commit, abort: ctlproto.h)
 * without FUSE: a store and a control server in this process, libkvfs
 * connected to the socket path.  Also a lying daemon, to show that no
 * offset or size from the socket becomes a pointer unchecked.
 */
#include "config.h"

#include <errno.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "tests/testutil.h"

#include "fuse/ctl.h"
#include "src/common/ctl_client.h"
#include "src/common/json.h"
#include "src/libkvfs/kvfs.h"

#define SLOT 4096
#define NSLOTS 8

static struct tu_paths P;
static struct kv_store *S;
static struct ctl_server *SRV;
static char SOCK[108];
static uint32_t NS;

static void setup(void)
{
	char info[512];

	tu_paths(&P);
	S = tu_open(&P, SLOT, NSLOTS);
	ck_assert_int_lt(snprintf(SOCK, sizeof(SOCK), "%s/ctl-%u.sock", tu_root,
				  (unsigned)getpid()),
			 (int)sizeof(SOCK));
	ck_assert_int_eq(kv_store_ns_create(S, "m", 16, &NS), 0);
	snprintf(info, sizeof(info), "{\"pool\":\"%s\",\"slot_size\":%u}",
		 P.pool, SLOT);
	ck_assert_int_eq(ctl_server_start(S, SOCK, 0600, info, &SRV), 0);
}

static void teardown(void)
{
	ctl_server_stop(SRV);
	kv_store_close(S);
}

static struct kvfs *conn(void)
{
	struct kvfs *k = NULL;

	ck_assert_int_eq(kvfs_connect(SOCK, &k), 0);
	return k;
}

static struct kv_store_stats stats(void)
{
	struct kv_store_stats s;

	ck_assert_int_eq(kv_store_stats(S, &s), 0);
	return s;
}

/* the server sees a client's close in its own time */
static bool settles(uint64_t pinned, uint64_t writing)
{
	struct timespec ts = { 0, 10000000 };

	for (int i = 0; i < 200; i++) {
		struct kv_store_stats s = stats();

		if (s.pinned == pinned && s.total.writing == writing)
			return true;
		nanosleep(&ts, NULL);
	}
	return false;
}

START_TEST(test_map_unmap)
{
	struct kvfs *k = conn();
	uint8_t h[KVFS_HASH_LEN], want[1000];
	const void *p;
	size_t len;

	tu_hash(h, 1, 1);
	ck_assert_int_eq(tu_put_block(S, NS, h, NULL, sizeof(want)), 0);
	tu_fill(want, sizeof(want), h);
	ck_assert_int_eq(kvfs_map(k, "m", h, &p, &len), 0);
	ck_assert_uint_eq(len, sizeof(want));
	ck_assert_int_eq(memcmp(p, want, len), 0);
	ck_assert_uint_eq(stats().pinned, 1);
	ck_assert_int_eq(kv_store_evict(S, NS, h), -EBUSY);
	ck_assert_int_eq(kvfs_unmap(k, p), 0);
	ck_assert_int_eq(kvfs_unmap(k, p), -EINVAL);
	/* unmap is posted, not waited for: the daemon drops the reference
	 * as soon as it reads the request (bounded wait, 5 s) */
	for (int i = 0; i < 500 && stats().pinned; i++)
		usleep(10000);
	ck_assert_uint_eq(stats().pinned, 0);
	ck_assert_int_eq(kv_store_evict(S, NS, h), 0);
	/* and the connection is in step: the next call answers itself */
	ck_assert_int_eq(kvfs_map(k, "m", h, &p, &len), -ENOENT);
	kvfs_disconnect(k);
}
END_TEST

/* kvfs_write goes around the socket, so it first waits for the unmaps
 * posted on it: right after it, the slot is free (here the write itself
 * fails, since this handle's "mount" is the socket path) */
START_TEST(test_write_after_unmap)
{
	struct kvfs *k = conn();
	uint8_t h[KVFS_HASH_LEN];
	const void *p[NSLOTS];
	size_t len[NSLOTS];

	for (int i = 0; i < NSLOTS; i++) {
		tu_hash(h, 90 + i, 1);
		ck_assert_int_eq(tu_put_block(S, NS, h, NULL, 64), 0);
		ck_assert_int_eq(kvfs_map(k, "m", h, &p[i], &len[i]), 0);
	}
	ck_assert_uint_eq(stats().pinned, NSLOTS);
	ck_assert_int_eq(kvfs_unmap_batch(k, p, NSLOTS), 0);
	ck_assert_int_ne(kvfs_write(k, "m", h, "x", 1), 0);
	ck_assert_uint_eq(stats().pinned, 0);
	kvfs_disconnect(k);
}
END_TEST

START_TEST(test_commit_abort)
{
	struct kvfs *k = conn();
	uint8_t h[KVFS_HASH_LEN], h2[KVFS_HASH_LEN];
	struct kv_block_info bi;
	struct kvfs_wblock *wb;
	size_t cap;
	void *w;

	tu_hash(h, 2, 1);
	tu_hash(h2, 3, 1);
	ck_assert_int_eq(kvfs_alloc(k, "m", h, NULL, &w, &cap, &wb), 0);
	ck_assert_uint_eq(cap, SLOT);
	ck_assert_uint_eq(stats().total.writing, 1);
	tu_fill(w, 3000, h);
	ck_assert_int_eq(kvfs_commit(wb, 3000), 0);
	ck_assert(tu_verify(S, NS, h, 3000));
	ck_assert_int_eq(kv_store_stat(S, NS, h, &bi), 0);
	ck_assert_uint_eq(bi.size, 3000);

	ck_assert_int_eq(kvfs_alloc(k, "m", h2, h, &w, &cap, &wb), 0);
	ck_assert_int_eq(kvfs_abort(wb), 0);
	ck_assert_int_eq(kv_store_stat(S, NS, h2, &bi), -ENOENT);
	ck_assert_uint_eq(stats().total.writing, 0);
	kvfs_disconnect(k);
}
END_TEST

START_TEST(test_disconnect_releases)
{
	struct kvfs *k = conn();
	uint8_t h[KVFS_HASH_LEN], h2[KVFS_HASH_LEN];
	struct kvfs_wblock *wb;
	const void *p;
	size_t len, cap;
	void *w;

	tu_hash(h, 4, 1);
	tu_hash(h2, 5, 1);
	ck_assert_int_eq(tu_put_block(S, NS, h, NULL, 100), 0);
	ck_assert_int_eq(kvfs_map(k, "m", h, &p, &len), 0);
	ck_assert_int_eq(kvfs_alloc(k, "m", h2, NULL, &w, &cap, &wb), 0);
	ck_assert(settles(1, 1));
	kvfs_disconnect(k);
	ck_assert(settles(0, 0));
	ck_assert_int_eq(kv_store_lookup(S, NS, h2), 0);
}
END_TEST

START_TEST(test_full_pool)
{
	struct kvfs *k = conn();
	uint8_t h[NSLOTS + 1][KVFS_HASH_LEN];
	const void *p[NSLOTS];
	struct kvfs_wblock *wb;
	size_t len, cap;
	void *w;

	for (int i = 0; i <= NSLOTS; i++)
		tu_hash(h[i], 10 + i, 1);
	for (int i = 0; i < NSLOTS; i++) {
		ck_assert_int_eq(tu_put_block(S, NS, h[i], NULL, 64), 0);
		ck_assert_int_eq(kvfs_map(k, "m", h[i], &p[i], &len), 0);
	}
	ck_assert_int_eq(kvfs_alloc(k, "m", h[NSLOTS], NULL, &w, &cap, &wb),
			 -ENOSPC);
	ck_assert_int_eq(kvfs_unmap(k, p[0]), 0);
	ck_assert_int_eq(kvfs_alloc(k, "m", h[NSLOTS], NULL, &w, &cap, &wb), 0);
	ck_assert_int_eq(kvfs_commit(wb, 10), 0);
	kvfs_disconnect(k);
}
END_TEST

/* a request that must fail with -err */
static void call_err(struct kvfs_ctl *c, const char *req, int err)
{
	int rc = kvfs_ctl_request(c, req, NULL, NULL, NULL, 0);

	ck_assert_msg(rc == -err, "\"%s\": %d, want %d", req, rc, -err);
}

static uint64_t call_ref(struct kvfs_ctl *c, const char *req)
{
	struct kvfs_json *j;
	uint64_t ref = 0;

	ck_assert_int_eq(kvfs_ctl_request(c, req, &j, NULL, NULL, 0), 0);
	ck_assert_int_eq(kvfs_json_u64(kvfs_json_get(j, "ref"), &ref), 0);
	kvfs_json_free(j);
	return ref;
}

START_TEST(test_protocol)
{
	struct kvfs_ctl *a, *b;
	char hex[KVFS_HASH_HEX_LEN + 1], req[256];
	uint8_t h[KVFS_HASH_LEN];
	struct kvfs_json *j;
	uint64_t m, w, n;

	ck_assert_int_eq(kvfs_ctl_connect(SOCK, &a, NULL, 0), 0);
	ck_assert_int_eq(kvfs_ctl_connect(SOCK, &b, NULL, 0), 0);
	tu_hash(h, 30, 1);
	ck_assert_int_eq(tu_put_block(S, NS, h, NULL, 100), 0);
	kvfs_hash_to_hex(h, hex);
	snprintf(req, sizeof(req), "map m %s", hex);
	m = call_ref(a, req);
	tu_hash(h, 31, 1);
	kvfs_hash_to_hex(h, hex);
	snprintf(req, sizeof(req), "alloc m %s", hex);
	w = call_ref(a, req);
	call_err(a, req, EEXIST);
	ck_assert_int_eq(kvfs_ctl_request(b, "status", &j, NULL, NULL, 0), 0);
	ck_assert_int_eq(kvfs_json_u64(kvfs_json_get(kvfs_json_get(j, "ctl"),
						     "conn_maps"),
				       &n),
			 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(kvfs_json_u64(kvfs_json_get(kvfs_json_get(j, "ctl"),
						     "conn_writers"),
				       &n),
			 0);
	ck_assert_uint_eq(n, 1);
	kvfs_json_free(j);

	/* refs are the taking connection's own */
	snprintf(req, sizeof(req), "unmap %llu", (unsigned long long)m);
	call_err(b, req, ENOENT);
	snprintf(req, sizeof(req), "commit %llu 1", (unsigned long long)w);
	call_err(b, req, ENOENT);
	snprintf(req, sizeof(req), "abort %llu", (unsigned long long)w);
	call_err(b, req, ENOENT);
	snprintf(req, sizeof(req), "commit %llu 4097", (unsigned long long)w);
	call_err(a, req, EINVAL);
	snprintf(req, sizeof(req), "abort %llu", (unsigned long long)m);
	call_err(a, req, ENOENT);

	call_err(a, "map m abc", EINVAL);
	call_err(a, "map m", EINVAL);
	snprintf(req, sizeof(req), "map nosuch %s", hex);
	call_err(a, req, ENOENT);
	snprintf(req, sizeof(req), "map m %s", hex);
	call_err(a, req, ENOENT); /* being written: not visible */
	snprintf(req, sizeof(req), "alloc m %s %s x", hex, hex);
	call_err(a, req, EINVAL);
	call_err(a, "unmap 0", EINVAL);
	call_err(a, "unmap", EINVAL);
	call_err(a, "commit 1", ENOENT);

	/* a commit with the writer's CRC-32C: 8 hex digits, recorded as
	 * given (the GPU copies compute it on the device) */
	snprintf(req, sizeof(req), "commit %llu 0 1234567",
		 (unsigned long long)w);
	call_err(a, req, EINVAL);
	snprintf(req, sizeof(req), "commit %llu 0 +1234567",
		 (unsigned long long)w);
	call_err(a, req, EINVAL);
	snprintf(req, sizeof(req), "commit %llu 0 deadbeef 1",
		 (unsigned long long)w);
	call_err(a, req, EINVAL);
	snprintf(req, sizeof(req), "commit %llu 0 deadbeef",
		 (unsigned long long)w);
	ck_assert_int_eq(kvfs_ctl_request(a, req, NULL, NULL, NULL, 0), 0);
	snprintf(req, sizeof(req), "stat m %s", hex);
	ck_assert_int_eq(kvfs_ctl_request(a, req, &j, NULL, NULL, 0), 0);
	ck_assert_str_eq(kvfs_json_str(kvfs_json_get(j, "checksum")),
			 "deadbeef");
	kvfs_json_free(j);
	kvfs_ctl_close(b);
	kvfs_ctl_close(a);
	ck_assert(settles(0, 0));
}
END_TEST

START_TEST(test_pool_not_writable)
{
	struct kvfs *k;
	uint8_t h[KVFS_HASH_LEN];
	struct kvfs_wblock *wb;
	const void *p;
	size_t len, cap;
	void *w;

	if (geteuid() == 0)
		return; /* root ignores file modes: test_other_user */
	ck_assert_int_eq(chmod(P.pool, 0400), 0);
	k = conn();
	tu_hash(h, 40, 1);
	ck_assert_int_eq(tu_put_block(S, NS, h, NULL, 100), 0);
	ck_assert_int_eq(kvfs_alloc(k, "m", h, NULL, &w, &cap, &wb), -EACCES);
	ck_assert_int_eq(kvfs_map(k, "m", h, &p, &len), 0);
	ck_assert_int_eq(kvfs_unmap(k, p), 0);
	ck_assert_int_eq(chmod(P.pool, 0), 0);
	kvfs_disconnect(k);
	k = conn();
	ck_assert_int_eq(kvfs_map(k, "m", h, &p, &len), -EACCES);
	ck_assert_uint_eq(stats().pinned, 0); /* nothing was pinned */
	kvfs_disconnect(k);
	chmod(P.pool, 0600);
}
END_TEST

/*
 * As another user (root runs this test: it ignores file modes itself),
 * the child gets what the pool's mode allows: the socket is opened to
 * everyone here, so only the pool file stands in the way.  Exit status:
 * 0 when every call returned what was expected, else the failed step.
 */
static int other_user(const char *sock, const uint8_t *h, int map_want,
		      int alloc_want)
{
	struct kvfs_wblock *wb;
	struct kvfs *k;
	const void *p;
	size_t len, cap;
	void *w;

	if (setgid(65534) || setuid(65534))
		return 10;
	if (kvfs_connect(sock, &k))
		return 11;
	if (kvfs_map(k, "m", h, &p, &len) != map_want)
		return 12;
	if (kvfs_alloc(k, "m", h + 1, NULL, &w, &cap, &wb) != alloc_want)
		return 13;
	kvfs_disconnect(k);
	return 0;
}

/*
 * The child execs this program anew (main: --other-user) rather than go
 * on after fork: the parent has threads (the control server's), and one
 * of them may hold the allocator's lock at the fork, which the child's
 * first malloc would then wait for forever (seen under ASan).
 */
static int run_other(const uint8_t *h, int map_want, int alloc_want)
{
	char hex[2 * (KVFS_HASH_LEN + 1) + 1], mw[16], aw[16];
	char *argv[] = {
		"check_libkvfs_ctl", "--other-user", SOCK, hex, mw, aw, NULL
	};
	int status = -1;
	pid_t pid;

	for (int i = 0; i < KVFS_HASH_LEN + 1; i++)
		snprintf(hex + 2 * i, 3, "%02x", h[i]);
	snprintf(mw, sizeof(mw), "%d", map_want);
	snprintf(aw, sizeof(aw), "%d", alloc_want);
	pid = fork();
	if (pid == 0) {
		execv("/proc/self/exe", argv);
		_exit(99);
	}
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

START_TEST(test_other_user)
{
	uint8_t h[KVFS_HASH_LEN + 1] = { 0 };

	if (geteuid() != 0)
		return; /* test_pool_not_writable covers a plain user */
	tu_hash(h, 50, 1);
	ck_assert_int_eq(tu_put_block(S, NS, h, NULL, 100), 0);
	ck_assert_int_eq(chmod(tu_root, 0711), 0);
	ck_assert_int_eq(chmod(SOCK, 0666), 0);
	ck_assert_int_eq(chmod(P.pool, 0600), 0);
	ck_assert_int_eq(run_other(h, -EACCES, -EACCES), 0);
	ck_assert_int_eq(chmod(P.pool, 0644), 0);
	ck_assert_int_eq(run_other(h, 0, -EACCES), 0);
	ck_assert_int_eq(chmod(P.pool, 0666), 0);
	ck_assert_int_eq(run_other(h, 0, 0), 0);
	ck_assert(settles(0, 0));
	chmod(P.pool, 0600);
	chmod(tu_root, 0700);
}
END_TEST

/* ---- batched maps ---------------------------------------------------- */

static void settle_pinned(uint64_t pinned)
{
	/* unmaps are posted: bounded wait (5 s) for the daemon to read them */
	for (int i = 0; i < 500 && stats().pinned != pinned; i++)
		usleep(10000);
	ck_assert_uint_eq(stats().pinned, pinned);
}

START_TEST(test_map_batch)
{
	struct kvfs *k = conn();
	uint8_t h[5][KVFS_HASH_LEN], want[700];
	const void *p[5], *one, *bogus[2];
	size_t len[5], l1;

	for (int i = 0; i < 5; i++) {
		tu_hash(h[i], 40 + i, 1);
		if (i != 3)
			ck_assert_int_eq(
				tu_put_block(S, NS, h[i], NULL, 100 + 200 * i),
				0);
	}
	p[4] = h[0]; /* left alone past the prefix */
	ck_assert_int_eq(kvfs_map_batch(k, "m", h, 5, p, len), 3);
	ck_assert_ptr_eq(p[4], h[0]);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(len[i], 100 + 200 * i);
		tu_fill(want, len[i], h[i]);
		ck_assert_int_eq(memcmp(p[i], want, len[i]), 0);
	}
	ck_assert_uint_eq(stats().pinned, 3);
	ck_assert_int_eq(kv_store_evict(S, NS, h[1]), -EBUSY);
	ck_assert_int_eq(kvfs_map_batch(k, "m", h + 3, 2, p + 3, len + 3), 0);
	ck_assert_int_eq(kvfs_map_batch(k, "m", h, 0, NULL, NULL), 0);

	/* all or nothing: one pointer not mapped unmaps none */
	bogus[0] = p[0];
	bogus[1] = want;
	ck_assert_int_eq(kvfs_unmap_batch(k, bogus, 2), -EINVAL);
	bogus[1] = p[0]; /* mapped once, named twice */
	ck_assert_int_eq(kvfs_unmap_batch(k, bogus, 2), -EINVAL);
	ck_assert_uint_eq(stats().pinned, 3);
	/* a map of either kind is undone by an unmap of either kind */
	ck_assert_int_eq(kvfs_map(k, "m", h[4], &one, &l1), 0);
	ck_assert_int_eq(kvfs_unmap(k, p[1]), 0);
	p[1] = one;
	ck_assert_int_eq(kvfs_unmap_batch(k, p, 3), 0);
	ck_assert_int_eq(kvfs_unmap_batch(k, p, 1), -EINVAL);
	ck_assert_int_eq(kvfs_unmap_batch(k, p, 0), 0);
	settle_pinned(0);
	ck_assert_int_eq(kv_store_evict(S, NS, h[1]), 0);

	ck_assert_int_eq(kvfs_map_batch(NULL, "m", h, 1, p, len), -EINVAL);
	ck_assert_int_eq(kvfs_map_batch(k, NULL, h, 1, p, len), -EINVAL);
	ck_assert_int_eq(kvfs_map_batch(k, "a/b", h, 1, p, len), -EINVAL);
	ck_assert_int_eq(kvfs_map_batch(k, "m", NULL, 1, p, len), -EINVAL);
	ck_assert_int_eq(kvfs_map_batch(k, "m", h, 1, NULL, len), -EINVAL);
	ck_assert_int_eq(kvfs_map_batch(k, "m", h, 1, p, NULL), -EINVAL);
	ck_assert_int_eq(kvfs_map_batch(k, "nosuch", h, 1, p, len), -ENOENT);
	ck_assert_int_eq(kvfs_map_batch(k, "m", h, 16001, p, len), -E2BIG);
	ck_assert_int_eq(kvfs_unmap_batch(NULL, p, 1), -EINVAL);
	ck_assert_int_eq(kvfs_unmap_batch(k, NULL, 1), -EINVAL);
	kvfs_disconnect(k);
}
END_TEST

/* many maps of few blocks: the handle's table grows, holds one entry per
 * map of the same pointer, and gives each back exactly once */
START_TEST(test_map_many)
{
	enum { NB = 4, NM = 3000 };
	static uint8_t h[NM][KVFS_HASH_LEN];
	static const void *p[NM], *rest[NM];
	static size_t len[NM];
	struct kvfs *k = conn();
	size_t order[NM];

	for (int i = 0; i < NB; i++) {
		tu_hash(h[i], 60 + i, 1);
		ck_assert_int_eq(tu_put_block(S, NS, h[i], NULL, 64), 0);
	}
	for (int i = NB; i < NM; i++)
		memcpy(h[i], h[i % NB], KVFS_HASH_LEN);
	ck_assert_int_eq(kvfs_map_batch(k, "m", h, NM, p, len), NM);
	for (int i = 0; i < NM; i++)
		ck_assert_ptr_eq(p[i], p[i % NB]);
	ck_assert_uint_eq(stats().pinned, NB);
	/* a fixed shuffle: unmap in an order unlike the map's */
	for (size_t i = 0; i < NM; i++)
		order[i] = i;
	for (size_t i = NM - 1; i > 0; i--) {
		size_t j = (i * 2654435761u) % (i + 1), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (size_t i = 0; i < NM; i++) {
		ck_assert_int_eq(kvfs_unmap(k, p[order[i]]), 0);
		if (i == NM / 2) /* half by one, the rest in one request */
			break;
	}
	for (size_t i = NM / 2 + 1; i < NM; i++)
		rest[i - NM / 2 - 1] = p[order[i]];
	ck_assert_int_eq(kvfs_unmap_batch(k, rest, NM - NM / 2 - 1), 0);
	for (int i = 0; i < NB; i++)
		ck_assert_int_eq(kvfs_unmap(k, p[i]), -EINVAL);
	settle_pinned(0);
	kvfs_disconnect(k);
}
END_TEST

/* mapv and unmap REF... on the wire */
START_TEST(test_mapv_protocol)
{
	char hex[2][KVFS_HASH_HEX_LEN + 1], req[512];
	uint64_t r[2], count;
	uint8_t h[KVFS_HASH_LEN];
	struct kvfs_json *j;
	const struct kvfs_json *maps;
	struct kvfs_ctl *c;

	ck_assert_int_eq(kvfs_ctl_connect(SOCK, &c, NULL, 0), 0);
	for (int i = 0; i < 2; i++) {
		tu_hash(h, 70 + i, 1);
		ck_assert_int_eq(tu_put_block(S, NS, h, NULL, 10), 0);
		kvfs_hash_to_hex(h, hex[i]);
	}
	snprintf(req, sizeof(req), "mapv m %s %s %s", hex[0], hex[1], hex[0]);
	ck_assert_int_eq(kvfs_ctl_request(c, req, &j, NULL, NULL, 0), 0);
	ck_assert_int_eq(kvfs_json_u64(kvfs_json_get(j, "count"), &count), 0);
	ck_assert_uint_eq(count, 3);
	maps = kvfs_json_get(j, "maps");
	ck_assert_ptr_nonnull(maps);
	ck_assert_uint_eq(maps->n, 3);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(
			kvfs_json_u64(kvfs_json_get(&maps->kid[i], "ref"),
				      &r[i]),
			0);
	kvfs_json_free(j);
	ck_assert_uint_eq(stats().pinned, 2);

	/* a miss ends the prefix; none at all is count 0 */
	tu_hash(h, 79, 1);
	kvfs_hash_to_hex(h, hex[1]);
	snprintf(req, sizeof(req), "mapv m %s %s", hex[1], hex[0]);
	ck_assert_int_eq(kvfs_ctl_request(c, req, &j, NULL, NULL, 0), 0);
	ck_assert_int_eq(kvfs_json_u64(kvfs_json_get(j, "count"), &count), 0);
	ck_assert_uint_eq(count, 0);
	ck_assert_uint_eq(kvfs_json_get(j, "maps")->n, 0);
	kvfs_json_free(j);
	call_err(c, "mapv m abc", EINVAL);
	call_err(c, "mapv", EINVAL);

	/* unmap of several: a bad or repeated ref drops nothing */
	snprintf(req, sizeof(req), "unmap %llu %llu", (unsigned long long)r[0],
		 (unsigned long long)r[0]);
	call_err(c, req, ENOENT);
	snprintf(req, sizeof(req), "unmap %llu 999999",
		 (unsigned long long)r[0]);
	call_err(c, req, ENOENT);
	snprintf(req, sizeof(req), "unmap %llu x", (unsigned long long)r[0]);
	call_err(c, req, EINVAL);
	ck_assert_uint_eq(stats().pinned, 2);
	snprintf(req, sizeof(req), "unmap %llu %llu", (unsigned long long)r[1],
		 (unsigned long long)r[0]);
	ck_assert_int_eq(kvfs_ctl_request(c, req, NULL, NULL, NULL, 0), 0);
	call_err(c, req, ENOENT);
	/* the third map (block 0 again) still holds block 0 */
	ck_assert_uint_eq(stats().pinned, 1);
	kvfs_ctl_close(c);
	ck_assert(settles(0, 0));
}
END_TEST

/* ---- a lying daemon ------------------------------------------------- */

static char LIAR[108];
static const char *liar_status, *liar_map;
static int liar_fd = -1;

static void liar_answer(int fd, const char *req)
{
	const char *resp = "{\"ok\":true}";
	char line[1024];

	if (!strncmp(req, "status", 6))
		resp = liar_status;
	else if (!strncmp(req, "map ", 4) || !strncmp(req, "mapv ", 5) ||
		 !strncmp(req, "alloc ", 6))
		resp = liar_map;
	snprintf(line, sizeof(line), "%s\n", resp);
	(void)!send(fd, line, strlen(line), MSG_NOSIGNAL);
}

/* one client, one line at a time, until it hangs up */
static void *liar_loop(void *arg)
{
	char buf[4096];
	size_t len = 0;
	int fd = accept(liar_fd, NULL, NULL);

	(void)arg;
	while (fd >= 0) {
		ssize_t n = recv(fd, buf + len, sizeof(buf) - len - 1, 0);
		char *nl;

		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		while ((nl = strchr(buf, '\n'))) {
			*nl = '\0';
			liar_answer(fd, buf);
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len + 1);
		}
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static pthread_t liar_start(const char *status, const char *map)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	pthread_t t;

	ck_assert_int_lt(snprintf(LIAR, sizeof(LIAR), "%s/liar-%u.sock",
				  tu_root, (unsigned)getpid()),
			 (int)sizeof(LIAR));
	unlink(LIAR);
	memcpy(sa.sun_path, LIAR, strlen(LIAR) + 1);
	liar_status = status;
	liar_map = map;
	liar_fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(liar_fd, 0);
	ck_assert_int_eq(bind(liar_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(liar_fd, 4), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, liar_loop, NULL), 0);
	return t;
}

static void liar_stop(pthread_t t)
{
	pthread_join(t, NULL);
	close(liar_fd);
	unlink(LIAR);
}

/* a handle on a liar with a sound status that answers maps with resp */
static pthread_t liar_connect(const char *resp, struct kvfs **k)
{
	char status[512];
	pthread_t t;

	snprintf(status, sizeof(status),
		 "{\"ok\":true,\"daemon\":{\"pool\":\"%s\","
		 "\"slot_size\":%u}}",
		 P.pool, SLOT);
	t = liar_start(status, resp);
	ck_assert_int_eq(kvfs_connect(LIAR, k), 0);
	return t;
}

/* kvfs_map against a daemon answering map with resp */
static int lied_map(const char *resp)
{
	struct kvfs *k;
	uint8_t h[KVFS_HASH_LEN] = { 0 };
	const void *p = NULL;
	size_t len;
	pthread_t t;
	int rc;

	t = liar_connect(resp, &k);
	rc = kvfs_map(k, "m", h, &p, &len);
	kvfs_disconnect(k);
	liar_stop(t);
	return rc;
}

START_TEST(test_lying_daemon)
{
	/* the pool is 4096 + 8 * 4096 bytes */
	ck_assert_int_eq(lied_map("{\"ok\":true,\"ref\":\"1\",\"offset\":4096,"
				  "\"size\":100}"),
			 0);
	ck_assert_int_eq(lied_map("{\"ok\":true,\"ref\":\"1\",\"offset\":36864,"
				  "\"size\":1}"),
			 -EPROTO);
	ck_assert_int_eq(lied_map("{\"ok\":true,\"ref\":\"1\",\"offset\":32768,"
				  "\"size\":4097}"),
			 -EPROTO);
	ck_assert_int_eq(lied_map("{\"ok\":true,\"ref\":\"1\",\"offset\":0,"
				  "\"size\":10}"),
			 -EPROTO);
	ck_assert_int_eq(lied_map("{\"ok\":true,\"ref\":\"1\",\"offset\":4100,"
				  "\"size\":10}"),
			 -EPROTO);
	ck_assert_int_eq(lied_map("{\"ok\":true,\"ref\":\"1\","
				  "\"offset\":18446744073709551615,"
				  "\"size\":10}"),
			 -EPROTO);
	ck_assert_int_eq(lied_map("{\"ok\":true,\"offset\":4096,\"size\":1}"),
			 -EPROTO);
	ck_assert_int_eq(lied_map("{\"ok\":true,\"ref\":\"1\",\"offset\":-1,"
				  "\"size\":1}"),
			 -EPROTO);
}
END_TEST

/* kvfs_map_batch of two hashes against a daemon answering with resp */
static long lied_mapv(const char *resp)
{
	uint8_t h[2][KVFS_HASH_LEN] = { { 0 } };
	const void *p[2];
	struct kvfs *k;
	size_t len[2];
	pthread_t t;
	long rc;

	t = liar_connect(resp, &k);
	rc = kvfs_map_batch(k, "m", h, 2, p, len);
	if (rc > 0) /* what was mapped is the handle's to give back */
		ck_assert_int_eq(kvfs_unmap_batch(k, p, (size_t)rc), 0);
	kvfs_disconnect(k);
	liar_stop(t);
	return rc;
}

#define MAPV(...) "{\"ok\":true,\"maps\":[" __VA_ARGS__
#define M1 "{\"ref\":\"1\",\"offset\":4096,\"size\":100}"

START_TEST(test_lying_mapv)
{
	ck_assert_int_eq(lied_mapv(MAPV(M1 "," M1 "],\"count\":2}")), 2);
	ck_assert_int_eq(lied_mapv(MAPV("],\"count\":0}")), 0);
	/* more than asked, a count that is not the array's, no array */
	ck_assert_int_eq(lied_mapv(MAPV(M1 "," M1 "," M1 "],\"count\":3}")),
			 -EPROTO);
	ck_assert_int_eq(lied_mapv(MAPV(M1 "],\"count\":2}")), -EPROTO);
	ck_assert_int_eq(lied_mapv("{\"ok\":true,\"count\":0}"), -EPROTO);
	/* one span outside the pool spoils the batch */
	ck_assert_int_eq(lied_mapv(MAPV(M1 ",{\"ref\":\"2\",\"offset\":36864,"
					   "\"size\":1}],\"count\":2}")),
			 -EPROTO);
	ck_assert_int_eq(lied_mapv(MAPV(M1 ",{\"offset\":4096,\"size\":1}],"
					   "\"count\":2}")),
			 -EPROTO);
}
END_TEST

START_TEST(test_lying_status)
{
	static const char *bad[] = {
		"{\"ok\":true,\"daemon\":{}}",
		"{\"ok\":true,\"daemon\":{\"pool\":\"rel\",\"slot_size\":4096}"
		"}",
		"{\"ok\":true,\"daemon\":{\"pool\":\"/x\",\"slot_size\":100}}",
		"{\"ok\":true,\"daemon\":{\"pool\":\"/x\",\"slot_size\":0}}",
		"{\"ok\":true}",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct kvfs *k = NULL;
		pthread_t t = liar_start(bad[i], "{\"ok\":true}");

		ck_assert_int_eq(kvfs_connect(LIAR, &k), -EPROTO);
		ck_assert_ptr_null(k);
		liar_stop(t);
	}
}
END_TEST

/* run_other's child: --other-user SOCK HEX MAP_WANT ALLOC_WANT */
static int other_main(char **argv)
{
	uint8_t h[KVFS_HASH_LEN + 1];

	for (int i = 0; i < KVFS_HASH_LEN + 1; i++)
		if (sscanf(argv[3] + 2 * i, "%2hhx", &h[i]) != 1)
			return 98;
	return other_user(argv[2], h, atoi(argv[4]), atoi(argv[5]));
}

int main(int argc, char **argv)
{
	Suite *s;
	TCase *tc;

	if (argc == 6 && strcmp(argv[1], "--other-user") == 0)
		return other_main(argv);
	s = suite_create("libkvfs_ctl");
	tc = tcase_create("ctl");

	tu_init("libkvfs_ctl");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_map_unmap);
	tcase_add_test(tc, test_commit_abort);
	tcase_add_test(tc, test_disconnect_releases);
	tcase_add_test(tc, test_full_pool);
	tcase_add_test(tc, test_protocol);
	tcase_add_test(tc, test_pool_not_writable);
	tcase_add_test(tc, test_other_user);
	tcase_add_test(tc, test_lying_daemon);
	tcase_add_test(tc, test_lying_status);
	tcase_add_test(tc, test_map_batch);
	tcase_add_test(tc, test_write_after_unmap);
	tcase_add_test(tc, test_map_many);
	tcase_add_test(tc, test_mapv_protocol);
	tcase_add_test(tc, test_lying_mapv);
	suite_add_tcase(s, tc);
	return tu_run(s);
}

/*
 * check_recovery.c - store.h "Durability": a child process writing blocks
 * is killed with SIGKILL at varying points; reopening must keep every
 * block it had sealed, byte for byte, and free every slot it was writing.
 * Damaged and orphaned records are dropped and counted.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "kvstore/pool.h"
#include "tests/testutil.h"

#define SLOT 8192
#define NSLOTS 4096
#define MAXB 3000 /* below NSLOTS: nothing sealed is ever evicted */

static size_t blen(uint32_t i)
{
	return 1 + (i * 977u) % SLOT;
}

/*
 * The child seals blocks 0, 1, 2, ... and reports each index on the pipe
 * only after kv_store_seal returned.  Between seals it leaves a block
 * half written, so the kill often lands mid-write.
 */
static void child(const struct tu_paths *p, int wfd, uint32_t salt)
{
	struct kv_store *st = tu_open(p, SLOT, NSLOTS);
	uint8_t h[KVFS_HASH_LEN], prev[KVFS_HASH_LEN], buf[SLOT];
	uint32_t ns, wh;

	if (kv_store_ns_find(st, "m", &ns, NULL) < 0 &&
	    kv_store_ns_create(st, "m", 1, &ns) < 0)
		_exit(3);
	for (uint32_t i = 0; i < MAXB; i++) {
		tu_hash(h, i, salt);
		tu_fill(buf, blen(i), h);
		if (kv_store_create(st, ns, h, i ? prev : NULL, &wh) < 0)
			_exit(4);
		/* half now, a pause point, the rest */
		kv_store_write(st, wh, 0, buf, blen(i) / 2);
		kv_store_write(st, wh, blen(i) / 2, buf + blen(i) / 2,
			       blen(i) - blen(i) / 2);
		if (kv_store_seal(st, wh) < 0)
			_exit(5);
		if (write(wfd, &i, sizeof(i)) != sizeof(i))
			_exit(6);
		memcpy(prev, h, sizeof(h));
	}
	pause(); /* wait for the kill with everything sealed */
	_exit(0);
}

/* run a child, kill it after it sealed at least `after` blocks */
static int64_t run_and_kill(const struct tu_paths *p, uint32_t salt,
			    uint32_t after, unsigned delay_us)
{
	int fds[2], status;
	int64_t last = -1;
	uint32_t i;
	pid_t pid;

	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		child(p, fds[1], salt);
	}
	close(fds[1]);
	while (last + 1 < (int64_t)after &&
	       read(fds[0], &i, sizeof(i)) == sizeof(i))
		last = i;
	if (delay_us) {
		struct timespec d = { 0, (long)delay_us * 1000 };

		nanosleep(&d, NULL);
	}
	kill(pid, SIGKILL);
	/* drain what it reported before dying: those were sealed too */
	while (read(fds[0], &i, sizeof(i)) == sizeof(i))
		last = i;
	close(fds[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	return last;
}

START_TEST(test_kill_mid_write)
{
	static const struct {
		uint32_t after;
		unsigned delay_us;
	} pts[] = {
		{ 1, 0 }, { 10, 137 }, { 200, 0 }, { 500, 2000 }, { 50, 731 },
	};
	struct tu_paths p;
	uint32_t salt = 1000 + (uint32_t)_i;

	tu_paths(&p);
	int64_t last = run_and_kill(&p, salt, pts[_i].after, pts[_i].delay_us);
	struct kv_store *st = tu_open(&p, SLOT, NSLOTS);
	struct kv_store_stats ss;
	uint8_t h[KVFS_HASH_LEN];
	uint64_t present = 0;
	uint32_t ns;

	ck_assert_int_ge(last, (int64_t)pts[_i].after - 1);
	ck_assert_int_eq(kv_store_ns_find(st, "m", &ns, NULL), 0);
	for (uint32_t i = 0; i < MAXB; i++) {
		tu_hash(h, i, salt);
		if ((int64_t)i <= last) {
			/* reported sealed: must be back, byte for byte */
			ck_assert_msg(tu_verify(st, ns, h, blen(i)),
				      "sealed block %u lost after kill", i);
			present++;
		} else if (kv_store_lookup(st, ns, h) == 1) {
			/* sealed after its last report: fine if intact */
			ck_assert(tu_verify(st, ns, h, blen(i)));
			present++;
		}
	}
	ck_assert_int_eq(kv_store_stats(st, &ss), 0);
	ck_assert_uint_eq(ss.recovery_dropped, 0);
	ck_assert_uint_eq(ss.recovered, present);
	ck_assert_uint_eq(ss.total.writing, 0);
	/* the slot being written when it died is free again */
	ck_assert_uint_eq(ss.slots_free, NSLOTS - present);
	kv_store_close(st);
}
END_TEST

START_TEST(test_corrupt_block_dropped)
{
	uint8_t h[4][KVFS_HASH_LEN], junk = 0xff;
	struct kv_store_stats ss;
	struct kv_block_info bi;
	struct tu_paths p;
	struct kv_store *st;
	uint32_t ns;
	int fd;

	tu_paths(&p);
	st = tu_open(&p, SLOT, 16);
	ck_assert_int_eq(kv_store_ns_create(st, "m", 1, &ns), 0);
	for (int i = 0; i < 4; i++) {
		tu_hash(h[i], (uint32_t)i, 9);
		ck_assert_int_eq(tu_put_block(st, ns, h[i], NULL, 100), 0);
	}
	ck_assert_int_eq(kv_store_stat(st, ns, h[2], &bi), 0);
	kv_store_close(st);

	/* flip a byte of block 2 behind the store's back */
	fd = open(p.pool, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &junk, 1,
			       KV_POOL_HDR_SIZE + (off_t)bi.slot * SLOT + 50),
			 1);
	junk ^= 0x01;
	ck_assert_int_eq(pwrite(fd, &junk, 1,
				KV_POOL_HDR_SIZE + (off_t)bi.slot * SLOT + 50),
			 1);
	close(fd);

	st = tu_open(&p, SLOT, 16);
	ck_assert_int_eq(kv_store_lookup(st, ns, h[2]), 0);
	ck_assert(tu_verify(st, ns, h[0], 100));
	ck_assert(tu_verify(st, ns, h[1], 100));
	ck_assert(tu_verify(st, ns, h[3], 100));
	ck_assert_int_eq(kv_store_stats(st, &ss), 0);
	ck_assert_uint_eq(ss.recovery_dropped, 1);
	ck_assert_uint_eq(ss.recovered, 3);
	ck_assert_uint_eq(ss.slots_free, 13);
	kv_store_close(st);
	/* the dropped record is gone for good, not dropped again */
	st = tu_open(&p, SLOT, 16);
	ck_assert_int_eq(kv_store_stats(st, &ss), 0);
	ck_assert_uint_eq(ss.recovery_dropped, 0);
	ck_assert_uint_eq(ss.recovered, 3);
	kv_store_close(st);
}
END_TEST

START_TEST(test_pool_lost)
{
	uint8_t h[KVFS_HASH_LEN];
	struct kv_store_stats ss;
	struct tu_paths p;
	struct kv_store *st;
	uint32_t ns, id;

	tu_paths(&p);
	st = tu_open(&p, SLOT, 16);
	ck_assert_int_eq(kv_store_ns_create(st, "m", 1, &ns), 0);
	tu_hash(h, 1, 10);
	ck_assert_int_eq(tu_put_block(st, ns, h, NULL, 0), 0);
	kv_store_close(st);
	/* a reboot empties /dev/shm; the index remains */
	ck_assert_int_eq(unlink(p.pool), 0);
	st = tu_open(&p, SLOT, 16);
	/* even a zero-length block, whose checksum would "verify" over
	 * fresh zeroes, is dropped: the pool is not the one recorded */
	ck_assert_int_eq(kv_store_lookup(st, ns, h), 0);
	ck_assert_int_eq(kv_store_ns_find(st, "m", &id, NULL), 0);
	ck_assert_int_eq(kv_store_stats(st, &ss), 0);
	ck_assert_uint_eq(ss.recovery_dropped, 1);
	ck_assert_uint_eq(ss.slots_free, 16);
	kv_store_close(st);
}
END_TEST

/* a staging file of an open namespace, written with the bytes of h */
static uint32_t stage(struct kv_store *st, uint32_t ns, const uint8_t *h,
		      size_t len)
{
	uint8_t buf[SLOT];
	uint32_t wh;

	tu_fill(buf, len, h);
	ck_assert_int_eq(kv_store_create_staging(st, ns, &wh), 0);
	ck_assert_int_eq(kv_store_write(st, wh, 0, buf, len), 0);
	return wh;
}

/* path holds exactly the bytes tu_fill makes from h */
static bool has_file(struct kv_store *st, uint32_t ns, const char *path,
		     const uint8_t *h, size_t len)
{
	uint8_t key[KVFS_HASH_LEN], want[SLOT];
	struct kv_ref ref;
	bool same;

	ck_assert_int_eq(kvfs_path_key(path, strlen(path), key), 0);
	if (kv_store_get(st, ns, key, &ref) < 0)
		return false;
	tu_fill(want, len, h);
	same = ref.size == len && memcmp(ref.data, want, len) == 0;
	kv_store_put(st, &ref);
	return same;
}

/*
 * Close records (store.h kv_store_closed): the store closed without the
 * seals stands for a kvfsd killed between a writer's close and the
 * publication.  A file closed is published at the next open; one
 * written after its close, or replaced by a newer file, is not.
 */
START_TEST(test_closed_published)
{
	uint8_t h1[KVFS_HASH_LEN], h2[KVFS_HASH_LEN], h3[KVFS_HASH_LEN];
	struct tu_paths p;
	struct kv_store *st;
	uint32_t ns, a, b, c, d;

	tu_paths(&p);
	st = tu_open(&p, SLOT, 16);
	ck_assert_int_eq(
		kv_store_ns_create_layout(st, "o", 1, KV_LAYOUT_OPEN, &ns), 0);
	tu_hash(h1, 1, 20);
	tu_hash(h2, 2, 20);
	tu_hash(h3, 3, 20);
	/* closed: published at recovery */
	a = stage(st, ns, h1, 5000);
	ck_assert_int_eq(kv_store_closed(st, a, "a.bin", 5), 0);
	/* closed, then written again: not */
	b = stage(st, ns, h1, 3000);
	ck_assert_int_eq(kv_store_closed(st, b, "b.bin", 5), 0);
	ck_assert_int_eq(kv_store_write(st, b, 10, "x", 1), 0);
	/* closed, then a newer file of its path published: the newer wins */
	c = stage(st, ns, h2, 4000);
	ck_assert_int_eq(kv_store_closed(st, c, "c.bin", 5), 0);
	d = stage(st, ns, h3, 2000);
	ck_assert_int_eq(kv_store_publish(st, d, "c.bin", false), 0);
	/* closed and sealed: one file, no second publication */
	ck_assert_int_eq(
		kv_store_closed(st, d = stage(st, ns, h2, 100), "d.bin", 5), 0);
	ck_assert_int_eq(kv_store_publish(st, d, "d.bin", false), 0);
	/* a staging block needs its path */
	ck_assert_int_eq(kv_store_closed(st, stage(st, ns, h1, 10), NULL, 0),
			 -EINVAL);
	kv_store_close(st); /* no seal of a, b, c: the crash */

	st = tu_open(&p, SLOT, 16);
	ck_assert(has_file(st, ns, "a.bin", h1, 5000));
	ck_assert(!has_file(st, ns, "b.bin", h1, 3000));
	ck_assert(has_file(st, ns, "c.bin", h3, 2000));
	ck_assert(has_file(st, ns, "d.bin", h2, 100));
	kv_store_close(st);
	/* and the records are gone: a second restart changes nothing */
	st = tu_open(&p, SLOT, 16);
	ck_assert(has_file(st, ns, "a.bin", h1, 5000));
	ck_assert(has_file(st, ns, "c.bin", h3, 2000));
	kv_store_close(st);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("recovery");
	TCase *tc = tcase_create("kill");

	tu_init("recovery");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_kill_mid_write, 0, 5);
	tcase_add_test(tc, test_corrupt_block_dropped);
	tcase_add_test(tc, test_pool_lost);
	tcase_add_test(tc, test_closed_published);
	suite_add_tcase(s, tc);
	return tu_run(s);
}

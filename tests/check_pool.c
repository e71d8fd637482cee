/* check_pool.c - kvstore/pool.h: geometry, header, O(1) slots, threads */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "kvstore/pool.h"
#include "tests/testutil.h"

static const struct kv_pool_geom g4 = { 4096, 4 };

START_TEST(test_create_attach)
{
	struct tu_paths p;
	struct kv_pool *a, *b;
	uint8_t uuid[KV_POOL_UUID_LEN];

	tu_paths(&p);
	ck_assert_int_eq(kv_pool_open(p.pool, &g4, 0, &a), -ENOENT);
	ck_assert_int_eq(kv_pool_open(p.pool, &g4, KV_POOL_CREATE, &a), 0);
	ck_assert(kv_pool_formatted(a));
	ck_assert_uint_eq(kv_pool_nslots(a), 4);
	ck_assert_uint_eq(kv_pool_slot_size(a), 4096);
	ck_assert_uint_eq(kv_pool_nfree(a), 4);
	memcpy(uuid, kv_pool_uuid(a), sizeof(uuid));
	memset(kv_pool_slot(a, 3), 0xab, 4096);
	kv_pool_close(a);

	/* reattach keeps contents and uuid */
	ck_assert_int_eq(kv_pool_open(p.pool, &g4, KV_POOL_CREATE, &b), 0);
	ck_assert(!kv_pool_formatted(b));
	ck_assert_mem_eq(kv_pool_uuid(b), uuid, sizeof(uuid));
	ck_assert_uint_eq(((uint8_t *)kv_pool_slot(b, 3))[4095], 0xab);
	ck_assert_ptr_null(kv_pool_slot(b, 4));
	ck_assert_uint_eq(kv_pool_slot_offset(b, 1), KV_POOL_HDR_SIZE + 4096);
	kv_pool_close(b);
}
END_TEST

/* KV_POOL_PREALLOC takes every page of the file, and keeps contents */
START_TEST(test_prealloc)
{
	const struct kv_pool_geom g = { 4096, 64 };
	struct tu_paths p;
	struct kv_pool *a;
	struct stat st;

	tu_paths(&p);
	ck_assert_int_eq(kv_pool_open(p.pool, &g, KV_POOL_CREATE, &a), 0);
	memset(kv_pool_slot(a, 5), 0x5a, 4096);
	kv_pool_close(a);
	ck_assert_int_eq(stat(p.pool, &st), 0);
	/* sparse: the header and one slot hold pages, not 65 */
	ck_assert_int_lt((long long)st.st_blocks * 512, st.st_size);

	ck_assert_int_eq(
		kv_pool_open(p.pool, &g, KV_POOL_CREATE | KV_POOL_PREALLOC, &a),
		0);
	ck_assert(!kv_pool_formatted(a));
	ck_assert_int_eq(stat(p.pool, &st), 0);
	ck_assert_int_ge((long long)st.st_blocks * 512, st.st_size);
	ck_assert_uint_eq(((uint8_t *)kv_pool_slot(a, 5))[4095], 0x5a);
	ck_assert_uint_eq(((uint8_t *)kv_pool_slot(a, 6))[0], 0);
	kv_pool_close(a);
}
END_TEST

START_TEST(test_geometry_mismatch)
{
	struct kv_pool_geom other = { 8192, 4 }, more = { 4096, 5 };
	struct tu_paths p;
	struct kv_pool *a;

	tu_paths(&p);
	ck_assert_int_eq(kv_pool_open(p.pool, &g4, KV_POOL_CREATE, &a), 0);
	memset(kv_pool_slot(a, 0), 0x5a, 16);
	kv_pool_close(a);
	ck_assert_int_eq(kv_pool_open(p.pool, &other, KV_POOL_CREATE, &a),
			 -EINVAL);
	ck_assert_int_eq(kv_pool_open(p.pool, &more, KV_POOL_CREATE, &a),
			 -EINVAL);
	/* the refused open left the pool alone */
	ck_assert_int_eq(kv_pool_open(p.pool, &g4, 0, &a), 0);
	ck_assert(!kv_pool_formatted(a));
	ck_assert_uint_eq(((uint8_t *)kv_pool_slot(a, 0))[15], 0x5a);
	kv_pool_close(a);
	/* reformat only when asked */
	ck_assert_int_eq(kv_pool_open(p.pool, &other,
				      KV_POOL_CREATE | KV_POOL_REFORMAT, &a),
			 0);
	ck_assert(kv_pool_formatted(a));
	ck_assert_uint_eq(kv_pool_slot_size(a), 8192);
	ck_assert_uint_eq(((uint8_t *)kv_pool_slot(a, 0))[15], 0);
	kv_pool_close(a);
}
END_TEST

START_TEST(test_not_a_pool)
{
	struct tu_paths p;
	struct kv_pool *a;
	int fd;

	tu_paths(&p);
	fd = open(p.pool, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "hello, not a pool", 17), 17);
	close(fd);
	ck_assert_int_eq(kv_pool_open(p.pool, &g4, KV_POOL_CREATE, &a),
			 -EINVAL);
	ck_assert_int_eq(kv_pool_open(p.pool, &g4,
				      KV_POOL_CREATE | KV_POOL_REFORMAT, &a),
			 0);
	kv_pool_close(a);
	/* truncated pool file: header fine, size wrong */
	ck_assert_int_eq(truncate(p.pool, KV_POOL_HDR_SIZE + 4096), 0);
	ck_assert_int_eq(kv_pool_open(p.pool, &g4, 0, &a), -EINVAL);
}
END_TEST

START_TEST(test_bad_args)
{
	struct kv_pool_geom bad[] = {
		{ 0, 4 },
		{ 1000, 4 },
		{ 4096, 0 },
		{ 4096, UINT32_MAX },
		{ UINT64_MAX & ~4095ull, 4 },
	};
	struct tu_paths p;
	struct kv_pool *a = NULL;
	uint32_t s;

	tu_paths(&p);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_int_eq(
			kv_pool_open(p.pool, &bad[i], KV_POOL_CREATE, &a),
			-EINVAL);
	ck_assert_int_eq(kv_pool_open(NULL, &g4, KV_POOL_CREATE, &a), -EINVAL);
	ck_assert_int_eq(kv_pool_open("", &g4, KV_POOL_CREATE, &a), -EINVAL);
	ck_assert_int_eq(kv_pool_open(p.pool, NULL, KV_POOL_CREATE, &a),
			 -EINVAL);
	ck_assert_int_eq(kv_pool_open(p.pool, &g4, 1u << 7, &a), -EINVAL);
	ck_assert_int_eq(kv_pool_open(p.pool, &g4, KV_POOL_CREATE, NULL),
			 -EINVAL);
	ck_assert_int_eq(kv_pool_open("/nonexistent-dir/x.pool", &g4,
				      KV_POOL_CREATE, &a),
			 -ENOENT);
	ck_assert_ptr_null(a);

	ck_assert_int_eq(kv_pool_open(p.pool, &g4, KV_POOL_CREATE, &a), 0);
	ck_assert_int_eq(kv_pool_alloc(a, NULL), -EINVAL);
	ck_assert_int_eq(kv_pool_alloc(NULL, &s), -EINVAL);
	ck_assert_int_eq(kv_pool_free(a, 4), -EINVAL);
	ck_assert_int_eq(kv_pool_free(a, 0), -EINVAL); /* already free */
	ck_assert_int_eq(kv_pool_reserve(a, 9), -EINVAL);
	ck_assert_int_eq(kv_pool_reserve(a, 2), 0);
	ck_assert_int_eq(kv_pool_reserve(a, 2), -EBUSY);
	kv_pool_close(a);
	kv_pool_close(NULL);
}
END_TEST

START_TEST(test_alloc_free)
{
	struct tu_paths p;
	struct kv_pool *a;
	uint32_t s[4], extra, seen = 0;

	tu_paths(&p);
	ck_assert_int_eq(kv_pool_open(p.pool, &g4, KV_POOL_CREATE, &a), 0);
	ck_assert_int_eq(kv_pool_reserve(a, 1), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(kv_pool_alloc(a, &s[i]), 0);
		ck_assert_uint_lt(s[i], 4);
		ck_assert_uint_ne(s[i], 1);
		ck_assert(!(seen & (1u << s[i])));
		seen |= 1u << s[i];
	}
	ck_assert_int_eq(kv_pool_alloc(a, &extra), -ENOSPC);
	ck_assert_uint_eq(kv_pool_nfree(a), 0);
	ck_assert_int_eq(kv_pool_free(a, s[1]), 0);
	ck_assert_int_eq(kv_pool_free(a, s[1]), -EINVAL);
	ck_assert_int_eq(kv_pool_alloc(a, &extra), 0);
	ck_assert_uint_eq(extra, s[1]);
	kv_pool_close(a);
}
END_TEST

START_TEST(test_second_owner_busy)
{
	struct tu_paths p;
	struct kv_pool *a, *b;
	pid_t pid;
	int status;

	tu_paths(&p);
	ck_assert_int_eq(kv_pool_open(p.pool, &g4, KV_POOL_CREATE, &a), 0);
	pid = fork();
	if (pid == 0)
		_exit(kv_pool_open(p.pool, &g4, 0, &b) == -EBUSY ? 0 : 1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	kv_pool_close(a);
}
END_TEST

/* a file of n bytes of 'x' at path, for a link to point at */
static void put_file(const char *path, size_t n)
{
	char buf[64];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	ck_assert_int_ge(fd, 0);
	memset(buf, 'x', sizeof(buf));
	ck_assert_uint_le(n, sizeof(buf));
	ck_assert_int_eq(write(fd, buf, n), (ssize_t)n);
	close(fd);
}

static off_t size_of(const char *path)
{
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	return st.st_size;
}

/* refused with and without reformat, and nothing opened */
static void refused(const char *path)
{
	struct kv_pool *a = NULL;

	ck_assert_int_eq(kv_pool_open(path, &g4, KV_POOL_CREATE, &a), -EPERM);
	ck_assert_int_eq(
		kv_pool_open(path, &g4, KV_POOL_CREATE | KV_POOL_REFORMAT, &a),
		-EPERM);
	ck_assert_ptr_null(a);
}

/* a link at the pool's name, dangling or not, is never followed */
START_TEST(test_refuse_symlink)
{
	struct tu_paths p;
	struct stat st;

	tu_paths(&p);
	put_file(p.index, 10);
	ck_assert_int_eq(symlink(p.index, p.pool), 0);
	refused(p.pool);
	ck_assert_int_eq(size_of(p.index), 10); /* not truncated */
	ck_assert_int_eq(unlink(p.index), 0);
	refused(p.pool); /* dangling: the target is not created */
	ck_assert_int_eq(lstat(p.index, &st), -1);
	ck_assert_int_eq(lstat(p.pool, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
}
END_TEST

/* write bits for group or others beyond the mode asked: someone else
 * could have rewritten blocks */
START_TEST(test_refuse_writable)
{
	struct tu_paths p;
	struct kv_pool *a;
	struct stat st;

	tu_paths(&p);
	ck_assert_int_eq(kv_pool_open(p.pool, &g4, KV_POOL_CREATE, &a), 0);
	kv_pool_close(a);
	ck_assert_int_eq(chmod(p.pool, 0602), 0);
	refused(p.pool);
	ck_assert_int_eq(chmod(p.pool, 0620), 0);
	refused(p.pool);
	ck_assert_int_eq(stat(p.pool, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0620); /* untouched */
	/* granted by the mode: adopted, and set to it on the fd */
	ck_assert_int_eq(kv_pool_open_mode(p.pool, &g4, 0, 0660, &a), 0);
	ck_assert(!kv_pool_formatted(a));
	ck_assert_int_eq(stat(p.pool, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0660);
	kv_pool_close(a);
	/* 0660 now, so a 0600 open refuses it again */
	refused(p.pool);
	ck_assert_int_eq(kv_pool_open_mode(p.pool, &g4, 0, 0755, &a), -EINVAL);
	/* a new pool gets the mode, whatever the umask */
	tu_paths(&p);
	ck_assert_int_eq(
		kv_pool_open_mode(p.pool, &g4, KV_POOL_CREATE, 0640, &a), 0);
	ck_assert_int_eq(stat(p.pool, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0640);
	kv_pool_close(a);
}
END_TEST

START_TEST(test_refuse_not_regular)
{
	struct tu_paths p, q;
	struct kv_pool *a;

	tu_paths(&p);
	ck_assert_int_eq(mkfifo(p.pool, 0600), 0);
	refused(p.pool); /* and did not block on it */
	tu_paths(&p);
	ck_assert_int_eq(mkdir(p.pool, 0700), 0);
	refused(p.pool);
	rmdir(p.pool); /* tu_cleanup unlinks, which leaves directories */
	/* a second name: -o reformat would truncate the other file */
	tu_paths(&p);
	tu_paths(&q);
	ck_assert_int_eq(kv_pool_open(p.pool, &g4, KV_POOL_CREATE, &a), 0);
	kv_pool_close(a);
	ck_assert_int_eq(link(p.pool, q.pool), 0);
	refused(q.pool);
	ck_assert_int_eq(size_of(p.pool), 4096 + 4 * 4096);
}
END_TEST

/* a pool another user made beforehand under the predictable name */
START_TEST(test_refuse_other_owner)
{
	struct tu_paths p;
	struct kv_pool *a;

	if (geteuid() != 0) {
		fprintf(stderr, "pool: other owner: skipped (needs root)\n");
		return;
	}
	tu_paths(&p);
	ck_assert_int_eq(kv_pool_open(p.pool, &g4, KV_POOL_CREATE, &a), 0);
	kv_pool_close(a);
	ck_assert_int_eq(chown(p.pool, 65534, 65534), 0);
	refused(p.pool);
	ck_assert_int_eq(kv_pool_open_mode(p.pool, &g4, 0, 0666, &a), -EPERM);
}
END_TEST

#define T_THREADS 4
#define T_ROUNDS 20000

struct tctx {
	struct kv_pool *p;
	uint8_t *owner; /* owner[slot] == thread id + 1 while held */
	int bad;
};

static struct tctx tc;

static void *churn(void *arg)
{
	uint8_t me = (uint8_t)(uintptr_t)arg;
	uint32_t held[8];
	int n = 0;

	for (int r = 0; r < T_ROUNDS; r++) {
		if (n < 8 && kv_pool_alloc(tc.p, &held[n]) == 0) {
			if (__atomic_exchange_n(&tc.owner[held[n]], me,
						__ATOMIC_SEQ_CST))
				__atomic_add_fetch(&tc.bad, 1,
						   __ATOMIC_SEQ_CST);
			n++;
		} else if (n) {
			n--;
			__atomic_store_n(&tc.owner[held[n]], 0,
					 __ATOMIC_SEQ_CST);
			if (kv_pool_free(tc.p, held[n]))
				__atomic_add_fetch(&tc.bad, 1,
						   __ATOMIC_SEQ_CST);
		}
	}
	while (n--) {
		__atomic_store_n(&tc.owner[held[n]], 0, __ATOMIC_SEQ_CST);
		kv_pool_free(tc.p, held[n]);
	}
	return NULL;
}

START_TEST(test_threads)
{
	struct kv_pool_geom g = { 4096, 24 };
	pthread_t th[T_THREADS];
	struct tu_paths p;

	tu_paths(&p);
	ck_assert_int_eq(kv_pool_open(p.pool, &g, KV_POOL_CREATE, &tc.p), 0);
	tc.owner = calloc(g.nslots, 1);
	for (uintptr_t i = 0; i < T_THREADS; i++)
		pthread_create(&th[i], NULL, churn, (void *)(i + 1));
	for (int i = 0; i < T_THREADS; i++)
		pthread_join(th[i], NULL);
	/* no slot was ever handed to two holders, all came back */
	ck_assert_int_eq(tc.bad, 0);
	ck_assert_uint_eq(kv_pool_nfree(tc.p), g.nslots);
	free(tc.owner);
	kv_pool_close(tc.p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pool");
	TCase *tc_core = tcase_create("core");

	tu_init("pool");
	tcase_add_test(tc_core, test_create_attach);
	tcase_add_test(tc_core, test_prealloc);
	tcase_add_test(tc_core, test_geometry_mismatch);
	tcase_add_test(tc_core, test_not_a_pool);
	tcase_add_test(tc_core, test_bad_args);
	tcase_add_test(tc_core, test_alloc_free);
	tcase_add_test(tc_core, test_second_owner_busy);
	tcase_add_test(tc_core, test_refuse_symlink);
	tcase_add_test(tc_core, test_refuse_writable);
	tcase_add_test(tc_core, test_refuse_not_regular);
	tcase_add_test(tc_core, test_refuse_other_owner);
	tcase_add_test(tc_core, test_threads);
	suite_add_tcase(s, tc_core);
	return tu_run(s);
}

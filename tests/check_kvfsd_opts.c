/*
 * check_kvfsd_opts.c - kvfsd's option parser (fuse/kvfsd.h): sizes with
 * K/M/G, every bad value refused with -EINVAL, the defaults, the FUSE
 * options and the mountpoint checked, and nothing created by a check.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuse/kvfsd.h"
#include "kvstore/xfer.h"
#include "src/common/cli.h"
#include "tests/testutil.h"

static char mnt[512], state[512], pool[256];

/* a start's parse and check on argv: "kvfsd -f -o state=,pool=,EXTRA
 * [ARGS...] MOUNTPOINT"; the options are left in *o for the caller */
static int run(struct kvfsd_opts *o, const char *extra, ...)
{
	char opt[2048];
	char *argv[32];
	int argc = 0, rc;
	struct fuse_args args;
	va_list ap;
	const char *a;

	snprintf(opt, sizeof(opt), "state=%s,pool=%s%s%s", state, pool,
		 extra && *extra ? "," : "", extra ? extra : "");
	argv[argc++] = "kvfsd";
	argv[argc++] = "-f";
	argv[argc++] = "-o";
	argv[argc++] = opt;
	va_start(ap, extra);
	while ((a = va_arg(ap, const char *)) && argc < 30)
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc++] = mnt;
	argv[argc] = NULL;
	args = (struct fuse_args)FUSE_ARGS_INIT(argc, argv);
	memset(o, 0, sizeof(*o));
	rc = kvfsd_opts_parse(&args, o);
	if (rc == 0)
		rc = kvfsd_opts_check(o, &args);
	fuse_opt_free_args(&args);
	return rc;
}

static int run1(const char *extra)
{
	struct kvfsd_opts o;
	int rc = run(&o, extra, NULL);

	kvfsd_opts_free(&o);
	return rc;
}

static void setup(void)
{
	static unsigned n;

	snprintf(mnt, sizeof(mnt), "%s/mnt-%d-%u", tu_root, (int)getpid(), n);
	snprintf(state, sizeof(state), "%s/state-%d-%u/sub", tu_root,
		 (int)getpid(), n);
	snprintf(pool, sizeof(pool), "/dev/shm/%s-%d-%u.pool", tu_shm,
		 (int)getpid(), n++);
	ck_assert_int_eq(mkdir(mnt, 0700), 0);
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

START_TEST(test_sizes)
{
	struct kvfsd_opts o;

	ck_assert_int_eq(run(&o,
			     "slot_size=64K,slots=2K,block_tokens=16,"
			     "lease_ms=250,ctl_mode=0660",
			     NULL),
			 0);
	ck_assert_uint_eq(o.slot_size, 64u << 10);
	ck_assert_uint_eq(o.slots, 2048);
	ck_assert_uint_eq(o.block_tokens, 16);
	ck_assert_uint_eq(o.lease_ms, 250);
	ck_assert_uint_eq(o.ctl_mode, 0660);
	kvfsd_opts_free(&o);

	ck_assert_int_eq(run(&o, "slot_size=1m,slots=3", NULL), 0);
	ck_assert_uint_eq(o.slot_size, 1u << 20);
	ck_assert_uint_eq(o.slots, 3);
	kvfsd_opts_free(&o);

	/* G parses; whether a 1 GiB slot fits here is the room's business */
	run(&o, "slot_size=1G,slots=1", NULL);
	ck_assert_uint_eq(o.slot_size, 1ull << 30);
	kvfsd_opts_free(&o);
}
END_TEST

START_TEST(test_bad_values)
{
	static const char *const bad[] = {
		"slot_size=5000",
		"slot_size=0",
		"slot_size=-4096",
		"slot_size=4K5",
		"slot_size=12Q",
		"slot_size=",
		"slot_size=2T",
		"slot_size=+4096",
		"slot_size= 4096",
		"slot_size=0x1000",
		"slot_size=2048G",
		"slot_size=99999999999999999999999",
		"slots=0",
		"slots=x",
		"slots=4294967295",
		"slots=-1",
		"slots=1.5",
		"slots=4G",
		"block_tokens=0",
		"block_tokens=1K",
		"block_tokens=abc",
		"block_tokens=99999999",
		"lease_ms=0",
		"lease_ms=abc",
		"lease_ms=4294967296",
		"ctl_mode=999",
		"ctl_mode=abc",
		"ctl_mode=-1",
		"ctl_mode=8",
		"ctl_mode=",
		"pool=relative.pool",
		"ctl=relative.sock",
		"slot=5",
		"nosuchoption",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(run1(bad[i]) == -EINVAL, "%s accepted", bad[i]);
	ck_assert(!exists(state));
	ck_assert(!exists(pool));
}
END_TEST

START_TEST(test_bad_cluster)
{
	struct kvfsd_opts o;
	const char *sec = "/nonexistent-secret";

	ck_assert_int_eq(run(&o, "", "--replicas", "3", NULL), -EINVAL);
	kvfsd_opts_free(&o);
	ck_assert_int_eq(run(&o, "", "--listen", "127.0.0.1:0", NULL), -EINVAL);
	kvfsd_opts_free(&o);
	ck_assert_int_eq(run(&o, "", "--conductor", "nocolon", NULL), -EINVAL);
	kvfsd_opts_free(&o);
	ck_assert_int_eq(run(&o, "", "--conductor", "127.0.0.1:1", "--node-id",
			     "abc", NULL),
			 -EINVAL);
	kvfsd_opts_free(&o);
	ck_assert_int_eq(run(&o, "", "--conductor", "127.0.0.1:1", "--node-id",
			     "65536", NULL),
			 -EINVAL);
	kvfsd_opts_free(&o);
	ck_assert_int_eq(run(&o, "", "--node-id", "bad id", NULL), -EINVAL);
	kvfsd_opts_free(&o);
	ck_assert_int_eq(run(&o, "", "--cluster", "http://x/y", "--node-id",
			     "1", "--listen", "127.0.0.1:0", "--secret-file",
			     sec, NULL),
			 -EINVAL);
	kvfsd_opts_free(&o);
	ck_assert_int_eq(run(&o, "", "--cluster", "etcd://127.0.0.1:1/c",
			     "--listen", "127.0.0.1:0", "--secret-file", sec,
			     NULL),
			 -EINVAL);
	kvfsd_opts_free(&o);
	ck_assert_int_eq(run(&o, "", "--cluster", "etcd://127.0.0.1:1/c",
			     "--node-id", "1", "--listen", "127.0.0.1:0",
			     "--secret-file", sec, "--replicas", "17", NULL),
			 -EINVAL);
	kvfsd_opts_free(&o);
	ck_assert_int_eq(run(&o, "", "--cluster", "etcd://127.0.0.1:1/c",
			     "--node-id", "1", "--listen", "127.0.0.1:0",
			     "--secret-file", sec, "--timeout-ms", "5", NULL),
			 -EINVAL);
	kvfsd_opts_free(&o);
	ck_assert_int_eq(run(&o, "", "--cluster", "etcd://127.0.0.1:1/c",
			     "--node-id", "1", "--listen", "127.0.0.1:0",
			     "--secret-file", sec, "--transport", "ib", NULL),
			 -EINVAL);
	kvfsd_opts_free(&o);
	/* and a FUSE option nobody knows, before anything exists */
	ck_assert_int_eq(run(&o, "", "-x", NULL), -EINVAL);
	kvfsd_opts_free(&o);
	ck_assert(!exists(state));
	ck_assert(!exists(pool));
}
END_TEST

START_TEST(test_good_cluster)
{
	struct kvfsd_opts o;

	ck_assert_int_eq(run(&o, "", "--cluster", "etcd://127.0.0.1:1/c",
			     "--node-id", "n-1.a", "--listen=127.0.0.1:0",
			     "--secret-file", "/s", "--replicas", "3",
			     "--timeout-ms=100", NULL),
			 0);
	ck_assert_uint_eq(o.replicas, 3);
	ck_assert_uint_eq(o.timeout_ms, 100);
	ck_assert_str_eq(o.node_id, "n-1.a");
	kvfsd_opts_free(&o);
	/* a conductor without a cluster: node 0 unless told */
	ck_assert_int_eq(run(&o, "", "--conductor", "127.0.0.1:1", NULL), 0);
	ck_assert_str_eq(o.node_id, "0");
	ck_assert_str_eq(o.conductor_o, "127.0.0.1:1");
	kvfsd_opts_free(&o);
	ck_assert_int_eq(run(&o, "", "--conductor", "127.0.0.1:1", "--node-id",
			     "65535", NULL),
			 0);
	kvfsd_opts_free(&o);
}
END_TEST

START_TEST(test_defaults)
{
	struct kvfsd_opts o;
	char want[600];

	ck_assert_int_eq(run(&o, "slots=4", NULL), 0);
	ck_assert_uint_eq(o.slot_size, KVFSD_SLOT_SIZE);
	ck_assert_uint_eq(o.block_tokens, KVFSD_BLOCK_TOKENS);
	ck_assert_uint_eq(o.ctl_mode, KVFSD_CTL_MODE);
	ck_assert_uint_eq(o.lease_ms, 0); /* the store's default */
	ck_assert_uint_eq(o.replicas, 2);
	ck_assert_uint_eq(o.timeout_ms, KV_XFER_TIMEOUT_MS);
	ck_assert_str_eq(o.node_id, KVFSD_NODE_ID);
	ck_assert_str_eq(o.state_dir, state);
	snprintf(want, sizeof(want), "%s/index", state);
	ck_assert_str_eq(o.index_dir, want);
	snprintf(want, sizeof(want), "%s/ctl.sock", state);
	ck_assert_str_eq(o.ctl_path, want);
	ck_assert_str_eq(o.pool_path, pool);
	/* checked, not made */
	ck_assert(!exists(state));
	ck_assert(!exists(pool));
	/* made, and undone */
	ck_assert_int_eq(kvfsd_opts_create(&o), 0);
	ck_assert(exists(state));
	kvfsd_opts_undo(&o);
	ck_assert(!exists(state));
	*strrchr(state, '/') = '\0';
	ck_assert(!exists(state)); /* the parent it made, too */
	kvfsd_opts_free(&o);
}
END_TEST

START_TEST(test_default_paths)
{
	struct kvfsd_opts o;
	struct fuse_args args;
	char xdg[600], *argv[] = { "kvfsd", "-f", "-o", "slots=1", mnt, NULL };

	snprintf(xdg, sizeof(xdg), "%s/xdg-%d", tu_root, (int)getpid());
	setenv("XDG_STATE_HOME", xdg, 1);
	args = (struct fuse_args)FUSE_ARGS_INIT(5, argv);
	memset(&o, 0, sizeof(o));
	ck_assert_int_eq(kvfsd_opts_parse(&args, &o), 0);
	ck_assert_int_eq(kvfsd_opts_check(&o, &args), 0);
	if (geteuid() == 0)
		ck_assert(!strncmp(o.state_dir, "/var/lib/kvfs/", 14));
	else
		ck_assert(!strncmp(o.state_dir, xdg, strlen(xdg)));
	ck_assert(!strncmp(o.pool_path, KVFSD_SHM_DIR "/kvfs-", 14));
	ck_assert(!exists(xdg));
	ck_assert(!exists(o.state_dir));
	ck_assert(!exists(o.pool_path));
	kvfsd_opts_free(&o);
	fuse_opt_free_args(&args);
}
END_TEST

START_TEST(test_mountpoint)
{
	struct kvfsd_opts o;
	char file[600];
	FILE *fp;

	snprintf(file, sizeof(file), "%s/file", mnt);
	fp = fopen(file, "w");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	snprintf(mnt + strlen(mnt), sizeof(mnt) - strlen(mnt), "/file");
	ck_assert_int_eq(run(&o, "slots=1", NULL), -ENOTDIR);
	kvfsd_opts_free(&o);
	ck_assert(!exists(state));
	ck_assert(!exists(pool));
	/* a pool its file system cannot hold: refused, nothing made */
	*strrchr(mnt, '/') = '\0';
	ck_assert_int_eq(run(&o, "slots=4294967294", NULL), -ENOSPC);
	kvfsd_opts_free(&o);
	ck_assert(!exists(state));
	ck_assert(!exists(pool));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("kvfsd_opts");
	TCase *tc = tcase_create("parse");
	SRunner *sr;
	int failed;

	tu_init("kvfsd_opts");
	cli_init("kvfsd");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_sizes);
	tcase_add_test(tc, test_bad_values);
	tcase_add_test(tc, test_bad_cluster);
	tcase_add_test(tc, test_good_cluster);
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_default_paths);
	tcase_add_test(tc, test_mountpoint);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	tu_cleanup();
	return failed ? 1 : 0;
}

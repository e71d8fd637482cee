/*
 * check_cluster.c - the parts of kvstore/cluster.h that need no etcd:
 * node ids, cluster urls, and join's refusals (a bad url or id, an etcd
 * that is not there).  tests/cluster_etcd.sh covers a live etcd.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kvstore/cluster.h"
#include "src/common/log.h"

START_TEST(test_node_id)
{
	char id[KV_NODE_ID_MAX + 2];

	ck_assert_int_eq(kv_node_id_valid("a"), 0);
	ck_assert_int_eq(kv_node_id_valid("gpu-node_01.rack-3"), 0);
	ck_assert_int_eq(kv_node_id_valid(""), -EINVAL);
	ck_assert_int_eq(kv_node_id_valid(NULL), -EINVAL);
	ck_assert_int_eq(kv_node_id_valid("a/b"), -EINVAL);
	ck_assert_int_eq(kv_node_id_valid("a b"), -EINVAL);
	ck_assert_int_eq(kv_node_id_valid("n\303\266de"), -EINVAL);
	memset(id, 'x', KV_NODE_ID_MAX);
	id[KV_NODE_ID_MAX] = '\0';
	ck_assert_int_eq(kv_node_id_valid(id), 0);
	id[KV_NODE_ID_MAX] = 'x';
	id[KV_NODE_ID_MAX + 1] = '\0';
	ck_assert_int_eq(kv_node_id_valid(id), -EINVAL);
}
END_TEST

START_TEST(test_url_ok)
{
	char ep[300], name[64];

	ck_assert_int_eq(kv_cluster_url_parse("etcd://127.0.0.1:2379/prod", ep,
					      sizeof(ep), name, sizeof(name)),
			 0);
	ck_assert_str_eq(ep, "http://127.0.0.1:2379");
	ck_assert_str_eq(name, "prod");
	ck_assert_int_eq(kv_cluster_url_parse("etcd://etcd-0.svc:1/a.b_c-d", ep,
					      sizeof(ep), name, sizeof(name)),
			 0);
	ck_assert_str_eq(ep, "http://etcd-0.svc:1");
	ck_assert_str_eq(name, "a.b_c-d");
	ck_assert_int_eq(kv_cluster_url_parse("etcd://[::1]:65535/x", ep,
					      sizeof(ep), name, sizeof(name)),
			 0);
	ck_assert_str_eq(ep, "http://[::1]:65535");
	ck_assert_str_eq(name, "x");
	/* several endpoints, tried in turn */
	ck_assert_int_eq(kv_cluster_url_parse(
				 "etcd://10.0.0.1:2379,[::1]:2380,e-2.svc:1/p",
				 ep, sizeof(ep), name, sizeof(name)),
			 0);
	ck_assert_str_eq(
		ep, "http://10.0.0.1:2379,http://[::1]:2380,http://e-2.svc:1");
	ck_assert_str_eq(name, "p");
}
END_TEST

START_TEST(test_url_bad)
{
	static const char *const bad[] = {
		"",
		"http://127.0.0.1:2379/x",
		"etcd://",
		"etcd://127.0.0.1/x", /* no port */
		"etcd://127.0.0.1:/x",
		"etcd://127.0.0.1:0/x",
		"etcd://127.0.0.1:65536/x",
		"etcd://127.0.0.1:99999999999999999999/x",
		"etcd://127.0.0.1:2379", /* no name */
		"etcd://127.0.0.1:2379/",
		"etcd://127.0.0.1:2379/a/b",
		"etcd://127.0.0.1:2379/x/",
		"etcd://127.0.0.1:2379/a b",
		"etcd://:2379/x",
		"etcd://user@host:2379/x",
		"etcd://[::1/x",
		"etcd://[]:1/x",
		"etcd://h:12ab/x",
		"etcd://h:1x/x",
		"etcd://h:1,/x", /* an empty endpoint */
		"etcd://,h:1/x",
		"etcd://h:1,,h:2/x",
		"etcd://h:1,h/x",
		"etcd://h:1;h:2/x",
		"etcd://a:1,b:1,c:1,d:1,e:1,f:1,g:1,h:1,i:1/x", /* 9 */
	};
	char ep[300], name[64];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(kv_cluster_url_parse(bad[i], ep, sizeof(ep), name,
						   sizeof(name)) == -EINVAL,
			      "accepted '%s'", bad[i]);
	ck_assert_int_eq(
		kv_cluster_url_parse(NULL, ep, sizeof(ep), name, sizeof(name)),
		-EINVAL);
	/* results that do not fit */
	ck_assert_int_eq(kv_cluster_url_parse("etcd://127.0.0.1:2379/prod", ep,
					      10, name, sizeof(name)),
			 -EINVAL);
	ck_assert_int_eq(kv_cluster_url_parse("etcd://127.0.0.1:2379/prod", ep,
					      sizeof(ep), name, 4),
			 -EINVAL);
}
END_TEST

static struct kv_cluster_config cfg_for(const char *url, const char *id)
{
	struct kv_cluster_config cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.url = url;
	snprintf(cfg.self.id, sizeof(cfg.self.id), "%s", id);
	snprintf(cfg.self.addr, sizeof(cfg.self.addr), "127.0.0.1:1");
	cfg.ttl_s = 2;
	return cfg;
}

START_TEST(test_join_bad_args)
{
	struct kv_cluster_config cfg = cfg_for("etcd://127.0.0.1:1/x", "a b");
	struct kv_cluster *c = (struct kv_cluster *)&cfg;

	ck_assert_int_eq(kv_cluster_join(&cfg, &c), -EINVAL);
	ck_assert_ptr_null(c);
	cfg = cfg_for("etcd://127.0.0.1/x", "a");
	ck_assert_int_eq(kv_cluster_join(&cfg, &c), -EINVAL);
	ck_assert_int_eq(kv_cluster_join(NULL, &c), -EINVAL);
	ck_assert_int_eq(kv_cluster_join(&cfg, NULL), -EINVAL);
	kv_cluster_leave(NULL);
}
END_TEST

/* a loopback port nobody listens on: bound, then closed */
static int closed_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	ck_assert_int_ge(fd, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

/* no etcd there: refused at once, no hang */
START_TEST(test_join_refused)
{
	char url[64];
	struct kv_cluster_config cfg;
	struct kv_cluster *c = NULL;
	struct timespec t0, t1;
	double s;

	snprintf(url, sizeof(url), "etcd://127.0.0.1:%d/x", closed_port());
	cfg = cfg_for(url, "a");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(kv_cluster_join(&cfg, &c), -ECONNREFUSED);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_ptr_null(c);
	s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	ck_assert_msg(s < 1.5, "join took %.2f s", s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cluster");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	/* join's refusals log one line each: keep the test output quiet */
	kvfs_log_init("check_cluster", KVFS_LOG_ERR);
	tcase_add_test(tc, test_node_id);
	tcase_add_test(tc, test_url_ok);
	tcase_add_test(tc, test_url_bad);
	tcase_add_test(tc, test_join_bad_args);
	tcase_add_test(tc, test_join_refused);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

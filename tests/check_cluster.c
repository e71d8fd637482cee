/*
 * check_cluster.c - the parts of kvstore/cluster.h that need no etcd:
 * node ids, cluster urls, the MAC of the records in etcd, and join's
 * refusals (a bad url, id, secret or auth option, an etcd that is not
 * there); and the same for the election of kvstore/elect.h.
 * tests/cluster_etcd.sh and tests/security/etcd.sh cover a live etcd.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kvstore/cluster.h"
#include "kvstore/elect.h"
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
	/* etcds://: every endpoint over TLS */
	ck_assert_int_eq(kv_cluster_url_parse("etcds://a:1,[::1]:2/q", ep,
					      sizeof(ep), name, sizeof(name)),
			 0);
	ck_assert_str_eq(ep, "https://a:1,https://[::1]:2");
	ck_assert_str_eq(name, "q");
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
		"etcds:/a:1/x",
		"etcdss://a:1/x",
		"https://a:1/x",
		"etcds://a/x",
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
	cfg.secret = (const uint8_t *)"check_cluster secret";
	cfg.secret_len = 20;
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

/* the secret and the etcd TLS and auth options, refused before any
 * connection (the port is closed: reaching it would be -ECONNREFUSED) */
START_TEST(test_join_bad_auth)
{
	const char *dir = getenv("TMPDIR");
	struct kv_cluster_config cfg = cfg_for("etcd://127.0.0.1:1/x", "a");
	struct kv_cluster *c = NULL;
	char pw[4096];
	int fd;

	snprintf(pw, sizeof(pw), "%s/check_cluster.pw.XXXXXX",
		 dir && *dir ? dir : "/tmp");

	cfg.secret = NULL; /* a cluster without a secret: none */
	ck_assert_int_eq(kv_cluster_join(&cfg, &c), -EINVAL);
	cfg = cfg_for("etcd://127.0.0.1:1/x", "a");
	cfg.secret_len = KV_CLUSTER_SECRET_MIN - 1;
	ck_assert_int_eq(kv_cluster_join(&cfg, &c), -EINVAL);
	cfg = cfg_for("etcds://127.0.0.1:1/x", "a");
	cfg.etcd.cert_file = "client.pem"; /* no key */
	ck_assert_int_eq(kv_cluster_join(&cfg, &c), -EINVAL);
	cfg = cfg_for("etcd://127.0.0.1:1/x", "a");
	cfg.etcd.ca_file = "ca.pem"; /* TLS files on plain http */
	ck_assert_int_eq(kv_cluster_join(&cfg, &c), -EINVAL);
	cfg = cfg_for("etcd://127.0.0.1:1/x", "a");
	cfg.etcd.user = "kvfs"; /* no password file */
	ck_assert_int_eq(kv_cluster_join(&cfg, &c), -EINVAL);
	/* a password file others may read is refused */
	fd = mkstemp(pw);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "pw\n", 3), 3);
	close(fd);
	ck_assert_int_eq(chmod(pw, 0644), 0);
	cfg.etcd.password_file = pw;
	ck_assert_int_eq(kv_cluster_join(&cfg, &c), -EPERM);
	ck_assert_ptr_null(c);
	/* mode 0600: read, then the closed port answers */
	ck_assert_int_eq(chmod(pw, 0600), 0);
	ck_assert_int_ne(kv_cluster_join(&cfg, &c), -EPERM);
	ck_assert_ptr_null(c);
	unlink(pw);
}
END_TEST

/*
 * The record MAC (cluster.h).  The vectors come from Python's hmac
 * module over the documented bytes; a change here is a format break for
 * every cluster, never a test to fix.
 */
static const uint8_t key16[] = "0123456789abcdef";

static int open_str(const char *key, int64_t lease, const char *val,
		    size_t *blen)
{
	return kv_cluster_rec_open(key16, 16, key, lease, val, strlen(val),
				   blen);
}

START_TEST(test_rec_mac)
{
	static const char node[] =
		"{\"addr\":\"x\"} mac=41ac64c23dd5c2df3332c9f1759784c2"
		"e5b1434a7dea45800d14b3383963ab73";
	static const char ns[] = "512 open mac=1c18668315ad5a114aa77dfe48bb03d5"
				 "1e9be0661c12fd272d6079c14457618c";
	char *v, bad[sizeof(node)];
	size_t vlen, blen = 0;

	ck_assert_int_eq(kv_cluster_rec_seal(key16, 16, "/kvfs/c/nodes/a", 7,
					     "{\"addr\":\"x\"}", 12, &v, &vlen),
			 0);
	ck_assert_str_eq(v, node);
	ck_assert_uint_eq(vlen, strlen(node));
	free(v);
	ck_assert_int_eq(kv_cluster_rec_seal(key16, 16, "/kvfs/c/ns/m", 0,
					     "512 open", 8, &v, &vlen),
			 0);
	ck_assert_str_eq(v, ns);
	free(v);

	ck_assert_int_eq(open_str("/kvfs/c/nodes/a", 7, node, &blen), 0);
	ck_assert_uint_eq(blen, 12);
	ck_assert_int_eq(open_str("/kvfs/c/ns/m", 0, ns, &blen), 0);
	ck_assert_uint_eq(blen, 8);
	/* another key (a copy under another id), lease, secret */
	ck_assert_int_eq(open_str("/kvfs/c/nodes/b", 7, node, &blen), -EBADMSG);
	ck_assert_int_eq(open_str("/kvfs/c/nodes/a", 8, node, &blen), -EBADMSG);
	ck_assert_int_eq(open_str("/kvfs/c/nodes/a", 0, node, &blen), -EBADMSG);
	ck_assert_int_eq(
		kv_cluster_rec_open((const uint8_t *)"0123456789abcdeF", 16,
				    "/kvfs/c/nodes/a", 7, node, strlen(node),
				    &blen),
		-EBADMSG);
	/* a changed body, a changed MAC digit */
	memcpy(bad, node, sizeof(node));
	bad[10] = 'y';
	ck_assert_int_eq(open_str("/kvfs/c/nodes/a", 7, bad, &blen), -EBADMSG);
	memcpy(bad, node, sizeof(node));
	bad[sizeof(node) - 2] ^= 1;
	ck_assert_int_eq(open_str("/kvfs/c/nodes/a", 7, bad, &blen), -EBADMSG);
	/* not a MAC at all: none, uppercase, short, long, tag misspelt */
	ck_assert_int_eq(open_str("/kvfs/c/ns/m", 0, "512 open", &blen),
			 -ENOMSG);
	ck_assert_int_eq(open_str("/kvfs/c/ns/m", 0, "", &blen), -ENOMSG);
	memcpy(bad, node, sizeof(node));
	bad[sizeof(node) - 2] = 'A';
	ck_assert_int_eq(open_str("/kvfs/c/nodes/a", 7, bad, &blen), -ENOMSG);
	ck_assert_int_eq(
		open_str("/kvfs/c/ns/m", 0,
			 "512 open mac=1c18668315ad5a114aa77dfe48bb03d5"
			 "1e9be0661c12fd272d6079c14457618",
			 &blen),
		-ENOMSG);
	ck_assert_int_eq(
		open_str("/kvfs/c/ns/m", 0,
			 "512 open mac=1c18668315ad5a114aa77dfe48bb03d5"
			 "1e9be0661c12fd272d6079c14457618c0",
			 &blen),
		-ENOMSG);
	ck_assert_int_eq(
		open_str("/kvfs/c/ns/m", 0,
			 "512 open mac:1c18668315ad5a114aa77dfe48bb03d5"
			 "1e9be0661c12fd272d6079c14457618c",
			 &blen),
		-ENOMSG);
	/* a body that holds the tag itself: the MAC is the last field */
	ck_assert_int_eq(kv_cluster_rec_seal(key16, 16, "/k", 1, "a mac=b", 7,
					     &v, &vlen),
			 0);
	ck_assert_int_eq(
		kv_cluster_rec_open(key16, 16, "/k", 1, v, vlen, &blen), 0);
	ck_assert_uint_eq(blen, 7);
	free(v);
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

/* the election's parts that need no etcd (kvstore/elect.h) */
START_TEST(test_elect_field)
{
	char out[64];

	ck_assert_int_eq(kv_elect_field("{\"http\":\"127.0.0.1:7400\","
					"\"events\":\"\"}",
					"http", out, sizeof(out)),
			 0);
	ck_assert_str_eq(out, "127.0.0.1:7400");
	/* empty, absent, not a string, too long, not JSON */
	ck_assert_int_eq(
		kv_elect_field("{\"events\":\"\"}", "events", out, sizeof(out)),
		-ENOENT);
	ck_assert_int_eq(kv_elect_field("{}", "http", out, sizeof(out)),
			 -ENOENT);
	ck_assert_int_eq(
		kv_elect_field("{\"http\":7}", "http", out, sizeof(out)),
		-ENOENT);
	ck_assert_int_eq(
		kv_elect_field("{\"http\":\"1.2.3.4:5\"}", "http", out, 4),
		-ENOENT);
	ck_assert_int_eq(kv_elect_field("http", "http", out, sizeof(out)),
			 -ENOENT);
	ck_assert_int_eq(kv_elect_field(NULL, "http", out, sizeof(out)),
			 -ENOENT);
}
END_TEST

START_TEST(test_elect_bad)
{
	struct kv_elect_config cfg = { .url = "etcd://127.0.0.1/x",
				       .value = "{}" };
	struct kv_elect *el = (struct kv_elect *)1;
	struct kv_etcd_auth a = { .user = "u" };
	char val[64], err[256];
	const char *why;

	ck_assert_int_eq(kv_elect_start(&cfg, &el), -EINVAL);
	ck_assert_ptr_null(el);
	cfg.url = "etcd://127.0.0.1:1/x";
	cfg.etcd.ca_file = "ca.pem"; /* TLS files need etcds:// */
	ck_assert_int_eq(kv_elect_start(&cfg, &el), -EINVAL);
	ck_assert_int_eq(kv_elect_get("etcd://127.0.0.1:1/x", &a, val,
				      sizeof(val), err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(etcd_auth_check(&a, false, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "--etcd-password-file"));
	a = (struct kv_etcd_auth){ .cert_file = "c", .key_file = "k" };
	ck_assert_int_eq(etcd_auth_check(&a, true, &why), 0);
	ck_assert_int_eq(etcd_auth_check(&a, false, &why), -EINVAL);
}
END_TEST

/* no etcd there: a candidate keeps trying as a standby, never leads,
 * and stops at once; a look says why */
START_TEST(test_elect_refused)
{
	struct kv_elect_config cfg = { .value = "{\"http\":\"h:1\"}" };
	struct kv_etcd_auth none = { 0 };
	struct kv_elect_state st;
	struct kv_elect *el;
	char url[64], val[64], err[256];

	snprintf(url, sizeof(url), "etcd://127.0.0.1:%d/x", closed_port());
	cfg.url = url;
	ck_assert_int_eq(kv_elect_start(&cfg, &el), 0);
	usleep(200 * 1000);
	ck_assert(!kv_elect_leading(el));
	kv_elect_state(el, &st);
	ck_assert(!st.leading);
	ck_assert_uint_eq(st.won, 0);
	ck_assert_str_eq(st.leader, "");
	kv_elect_stop(el);
	ck_assert_int_eq(
		kv_elect_get(url, &none, val, sizeof(val), err, sizeof(err)),
		-ECONNREFUSED);
	ck_assert_ptr_nonnull(strstr(err, "cannot reach etcd"));
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
	tcase_add_test(tc, test_join_bad_auth);
	tcase_add_test(tc, test_rec_mac);
	tcase_add_test(tc, test_join_refused);
	tcase_add_test(tc, test_elect_field);
	tcase_add_test(tc, test_elect_bad);
	tcase_add_test(tc, test_elect_refused);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

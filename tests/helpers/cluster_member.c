/*
 * cluster_member.c - one cluster member for tests/cluster_etcd.sh.
 *
 *   cluster_member URL ID [TTL]
 *
 * Joins (stdout: "joined ID E a,b", or "join failed: ENAME" and exit 2),
 * prints "change E a,b" on every change of membership (E the epoch, then
 * the live ids), and reads commands on stdin, one a line:
 *
 *   nodes            "nodes E a,b"
 *   publish NS BT    "publish 0" or "publish ENAME"
 *   find NS          "find BT" or "find ENAME"
 *   quit (or EOF)    leaves, prints "left", exits 0
 *
 * The cluster secret (the MAC key of the records in etcd) is
 * $CLUSTER_SECRET, or a fixed test secret.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvstore/cluster.h"
#include "src/common/log.h"

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kv_cluster *cl;

static const char *errname(int rc)
{
	static char buf[16];

	switch (-rc) {
	case 0:
		return "0";
	case EEXIST:
		return "EEXIST";
	case ENOENT:
		return "ENOENT";
	case EINVAL:
		return "EINVAL";
	case ECONNREFUSED:
		return "ECONNREFUSED";
	case ETIMEDOUT:
		return "ETIMEDOUT";
	case EHOSTUNREACH:
		return "EHOSTUNREACH";
	case ECONNRESET:
		return "ECONNRESET";
	case EPROTO:
		return "EPROTO";
	case EIO:
		return "EIO";
	default:
		snprintf(buf, sizeof(buf), "E%d", -rc);
		return buf;
	}
}

/* "WHAT E a,b" */
static void print_nodes(const char *what, struct kv_cluster *c)
{
	struct kv_node_info *v = NULL;
	uint64_t epoch = kv_cluster_epoch(c);
	long n = kv_cluster_nodes(c, &v);

	pthread_mutex_lock(&out_lock);
	printf("%s %llu ", what, (unsigned long long)epoch);
	for (long i = 0; i < n; i++)
		printf("%s%s", i ? "," : "", v[i].id);
	if (n == 0)
		printf("-");
	printf("\n");
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
	free(v);
}

/* the watcher may see a change before join has handed cl back */
static void on_change(void *arg)
{
	struct kv_cluster *c = __atomic_load_n(&cl, __ATOMIC_ACQUIRE);

	if (c)
		print_nodes("change", c);
}

static void say(const char *what, const char *val)
{
	pthread_mutex_lock(&out_lock);
	printf("%s %s\n", what, val);
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
}

int main(int argc, char **argv)
{
	struct kv_cluster_config cfg;
	char line[512], ns[300];
	unsigned bt;
	int rc;

	kvfs_log_init("cluster_member", KVFS_LOG_INFO);
	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: cluster_member URL ID [TTL]\n");
		return 1;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.url = argv[1];
	snprintf(cfg.self.id, sizeof(cfg.self.id), "%s", argv[2]);
	snprintf(cfg.self.addr, sizeof(cfg.self.addr), "127.0.0.1:7000");
	snprintf(cfg.self.transports, sizeof(cfg.self.transports), "tcp");
	cfg.self.slot_size = 1u << 20;
	cfg.self.nslots = 64;
	cfg.ttl_s = argc == 4 ? (uint32_t)strtoul(argv[3], NULL, 10) : 0;
	cfg.on_change = on_change;
	cfg.arg = NULL;
	{
		const char *sec = getenv("CLUSTER_SECRET");

		if (!sec || !*sec)
			sec = "cluster_member test secret";
		cfg.secret = (const uint8_t *)sec;
		cfg.secret_len = strlen(sec);
	}
	{
		struct kv_cluster *c;

		rc = kv_cluster_join(&cfg, &c);
		if (rc < 0) {
			say("join failed:", errname(rc));
			return 2;
		}
		__atomic_store_n(&cl, c, __ATOMIC_RELEASE);
	}
	print_nodes("joined", cl);
	while (fgets(line, sizeof(line), stdin)) {
		if (strcmp(line, "nodes\n") == 0) {
			print_nodes("nodes", cl);
		} else if (sscanf(line, "publish %299s %u", ns, &bt) == 2) {
			say("publish",
			    errname(kv_cluster_ns_publish(cl, ns, bt, 0)));
		} else if (sscanf(line, "find %299s", ns) == 1) {
			uint32_t got;
			char num[16];

			rc = kv_cluster_ns_find(cl, ns, &got, NULL);
			snprintf(num, sizeof(num), "%u", got);
			say("find", rc == 0 ? num : errname(rc));
		} else if (strcmp(line, "quit\n") == 0) {
			break;
		} else {
			say("unknown", line);
		}
	}
	kv_cluster_leave(cl);
	say("left", argv[2]);
	return 0;
}

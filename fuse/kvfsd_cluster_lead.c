/*
 * kvfsd_cluster_lead.c - finding the conductor through etcd:
 * --conductor etcd:NAME (the etcd of --cluster, with its --etcd-*
 * options) or --conductor etcd[s]://HOST:PORT[,HOST:PORT...]/NAME.
 *
 * A follower (kvstore/elect.h) watches election NAME and, at every change
 * of leader, points the event stream at the new leader's "events"
 * address (cl_ev_target).  The stream then leaves the old conductor and
 * opens on the new one with RESET and a full resync, as after any break,
 * so the new leader's index holds this node's blocks once that resync
 * is in.  While no conductor leads the stream waits; the ring of events
 * meanwhile is dropped by the resync, which sends the blocks as they are.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fuse/kvfsd_cluster_int.h"
#include "kvstore/elect.h"
#include "src/common/log.h"

bool cl_lead_wanted(const char *conductor)
{
	return conductor && (!strncmp(conductor, "etcd:", 5) ||
			     !strncmp(conductor, "etcds:", 6));
}

static void on_leader(void *arg, const char *value)
{
	struct kvfsd_cluster *c = arg;
	char addr[256];

	if (value && kv_elect_field(value, "events", addr, sizeof(addr)) == 0)
		cl_ev_target(c, addr);
	else
		cl_ev_target(c, NULL);
}

/* etcd:NAME -> the --cluster url with its NAME replaced */
static int lead_url(const struct kvfsd_cluster_config *cfg, char *url,
		    size_t len)
{
	const char *name, *slash;

	if (strstr(cfg->conductor, "://")) {
		snprintf(url, len, "%s", cfg->conductor);
		return 0;
	}
	name = cfg->conductor + strlen("etcd:");
	slash = cfg->url ? strrchr(cfg->url, '/') : NULL;
	if (!slash || strncmp(cfg->conductor, "etcd:", 5) ||
	    (size_t)(slash - cfg->url) + 1 + strlen(name) >= len) {
		kvfs_err("--conductor %s needs --cluster (its etcd)",
			 cfg->conductor);
		return -EINVAL;
	}
	snprintf(url, len, "%.*s/%s", (int)(slash - cfg->url), cfg->url, name);
	return 0;
}

int cl_lead_start(struct kvfsd_cluster *c,
		  const struct kvfsd_cluster_config *cfg)
{
	char url[ETCD_URLS_MAX + 128];
	uint8_t *secret = NULL;
	size_t slen = 0;
	int rc;

	if (!cl_lead_wanted(cfg->conductor))
		return 0;
	rc = lead_url(cfg, url, sizeof(url));
	/* the leader's record is signed with the cluster secret: one that
	 * is not cannot send our events elsewhere */
	if (rc == 0 && cfg->secret_file)
		rc = cl_read_secret(cfg->secret_file, &secret, &slen);
	if (rc == 0)
		rc = kv_elect_follow(url, &cfg->etcd, secret, slen, on_leader,
				     c, &c->lead);
	if (secret) {
		explicit_bzero(secret, slen);
		free(secret);
	}
	if (rc < 0)
		kvfs_err("--conductor %s: cannot follow the election: %s",
			 cfg->conductor, strerror(-rc));
	return rc;
}

void cl_lead_stop(struct kvfsd_cluster *c)
{
	kv_elect_unfollow(c->lead);
	c->lead = NULL;
}

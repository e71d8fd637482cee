/*
 * ctl_cmd.c - parse and run one control request (src/ctlproto.h) against
 * the store, through store.h only.
 *
 * A request is split into words in place.  Each command takes its words
 * through the arg_* helpers, which check every field and leave a message
 * in req.msg on failure; a command returns 0 after appending its fields
 * to the response, or a negative errno, and then whatever it appended is
 * dropped and an error response is written instead.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/clock.h"
#include "fuse/ctl_int.h"
#include "kvstore/pool.h"
#include "fuse/render.h"

struct req {
	struct ctl_server *srv;
	struct ctl_conn *conn;
	char *next; /* next word, NULL when none is left */
	struct kvfs_buf *out;
	char msg[320];
	bool deferred; /* a job answers (ctl_job_start): write nothing */
};

/* a namespace argument, decoded and found */
struct ns_arg {
	char name[KVFS_NS_MAX + 1];
	uint32_t id;
	uint32_t block_tokens;
};

static int fail(struct req *r, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct req *r, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
	va_end(ap);
	return err;
}

/* ---- words ---------------------------------------------------------- */

static char *next_word(struct req *r)
{
	char *w = r->next, *sp;

	if (!w)
		return NULL;
	sp = strchr(w, ' ');
	if (sp) {
		*sp = '\0';
		r->next = sp + 1;
	} else {
		r->next = NULL;
	}
	return w;
}

static size_t words_left(const struct req *r)
{
	const char *p = r->next;
	size_t n = 0;

	while (p) {
		n++;
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	return n;
}

static int arg_word(struct req *r, const char *what, char **w)
{
	*w = next_word(r);
	if (!*w)
		return fail(r, -EINVAL, "missing %s", what);
	return 0;
}

static int arg_end(struct req *r)
{
	if (r->next)
		return fail(r, -EINVAL, "too many arguments");
	return 0;
}

/* decimal, no sign, at most 20 digits, min..max */
static int arg_u64(struct req *r, const char *what, uint64_t min, uint64_t max,
		   uint64_t *v)
{
	uint64_t x = 0;
	size_t len;
	char *w;
	int rc;

	rc = arg_word(r, what, &w);
	if (rc)
		return rc;
	len = strlen(w);
	if (len > 20 || strspn(w, "0123456789") != len)
		goto out_bad;
	for (size_t i = 0; i < len; i++) {
		uint64_t d = (uint64_t)(w[i] - '0');

		if (x > (UINT64_MAX - d) / 10)
			goto out_bad;
		x = x * 10 + d;
	}
	if (x < min || x > max)
		goto out_bad;
	*v = x;
	return 0;
out_bad:
	return fail(r, -EINVAL, "bad %s \"%.40s\": need %llu..%llu", what, w,
		    (unsigned long long)min, (unsigned long long)max);
}

static int arg_u32(struct req *r, const char *what, uint32_t min, uint32_t max,
		   uint32_t *v)
{
	uint64_t x;
	int rc = arg_u64(r, what, min, max, &x);

	if (!rc)
		*v = (uint32_t)x;
	return rc;
}

static int arg_hash(struct req *r, uint8_t h[KVFS_HASH_LEN])
{
	char *w;
	int rc;

	rc = arg_word(r, "hash", &w);
	if (rc)
		return rc;
	if (kvfs_hash_from_hex(w, h) < 0)
		return fail(r, -EINVAL,
			    "bad hash \"%.70s\": need 64 lowercase hex digits",
			    w);
	return 0;
}

/* a name, decoded and checked, not looked up */
static int arg_name(struct req *r, char name[KVFS_NS_MAX + 1])
{
	size_t len;
	char *w;
	int rc;

	rc = arg_word(r, "namespace", &w);
	if (rc)
		return rc;
	rc = kvfs_ctlp_pct_decode(w, strlen(w), name, KVFS_NS_MAX + 1, &len);
	if (rc == -ENAMETOOLONG)
		return fail(r, -EINVAL, "bad namespace: longer than %d bytes",
			    KVFS_NS_MAX);
	if (rc)
		return fail(r, -EINVAL,
			    "bad namespace \"%.64s\": bad %%-escape", w);
	if (strlen(name) != len || kvfs_ns_valid(name))
		return fail(r, -EINVAL, "bad namespace \"%.64s\"", w);
	return 0;
}

static int arg_ns(struct req *r, struct ns_arg *ns)
{
	int rc = arg_name(r, ns->name);

	if (rc)
		return rc;
	rc = kv_store_ns_find(r->srv->st, ns->name, &ns->id, &ns->block_tokens);
	if (rc == -ENOENT)
		return fail(r, rc, "unknown namespace \"%.255s\"", ns->name);
	if (rc)
		return fail(r, rc, "namespace \"%.255s\": %s", ns->name,
			    strerror(-rc));
	return 0;
}

/*
 * A namespace for the calls that name blocks by the hash chain (lookup,
 * match, pin, map, mapv, alloc): an open namespace keys its files by
 * their paths, so a chain hash there names nothing, and a block made by
 * hash would have no path (no name in the mount).  stat, evict, ls and
 * prefetch take any key, a path's included (kvctl -p).
 */
static int arg_chain_ns(struct req *r, struct ns_arg *ns)
{
	int rc = arg_ns(r, ns);

	if (rc == 0 && kv_store_ns_layout(r->srv->st, ns->id) == KV_LAYOUT_OPEN)
		return fail(r, -EOPNOTSUPP,
			    "namespace \"%.255s\" has the open layout: its "
			    "files are named by path, not by the hash chain "
			    "this call takes (kvfs(7), Layouts)",
			    ns->name);
	return rc;
}

/* every remaining word as a hash; *h is malloc'd (NULL for none) */
static int arg_hashes(struct req *r, uint8_t (**h)[KVFS_HASH_LEN], size_t *n)
{
	size_t count = words_left(r);
	int rc;

	*h = NULL;
	*n = 0;
	if (count > CTLP_HASHES_MAX)
		return fail(r, -E2BIG, "%zu hashes: at most %u per request",
			    count, CTLP_HASHES_MAX);
	if (!count)
		return 0;
	*h = malloc(count * KVFS_HASH_LEN);
	if (!*h)
		return fail(r, -ENOMEM, "out of memory for %zu hashes", count);
	for (size_t i = 0; i < count; i++) {
		rc = arg_hash(r, (*h)[i]);
		if (rc) {
			free(*h);
			*h = NULL;
			return rc;
		}
	}
	*n = count;
	return 0;
}

/* ---- output helpers ------------------------------------------------- */

static void put_hex(struct kvfs_buf *b, const char *key,
		    const uint8_t h[KVFS_HASH_LEN])
{
	char hex[KVFS_HASH_HEX_LEN + 1];

	kvfs_hash_to_hex(h, hex);
	kvfs_buf_printf(b, ",\"%s\":\"%s\"", key, hex);
}

static void put_name(struct kvfs_buf *b, const char *name)
{
	kvfs_buf_puts(b, ",\"name\":");
	kvfs_buf_json_str(b, name, strlen(name));
	kvfs_buf_puts(b, ",\"name_pct\":\"");
	kvfs_ctlp_pct_encode(b, name, strlen(name));
	kvfs_buf_puts(b, "\"");
}

static void put_block(struct kvfs_buf *b, const uint8_t h[KVFS_HASH_LEN],
		      const struct kv_block_info *bi)
{
	char hex[KVFS_HASH_HEX_LEN + 1];

	kvfs_hash_to_hex(h, hex);
	kvfs_buf_printf(b,
			"\"hash\":\"%s\",\"slot\":%u,\"size\":%llu,"
			"\"refs\":%u,\"seal_ns\":%llu",
			hex, bi->slot, (unsigned long long)bi->size, bi->refs,
			(unsigned long long)bi->seal_ns);
}

/* an open namespace's file: ,"path":"..." */
static void put_path(struct req *r, uint32_t ns, const uint8_t h[KVFS_HASH_LEN])
{
	char path[KV_STORE_PATH_MAX + 1];
	long n = kv_store_path(r->srv->st, ns, h, path, sizeof(path));

	if (n > 0) {
		kvfs_buf_puts(r->out, ",\"path\":");
		kvfs_buf_json_str(r->out, path, (size_t)n);
	}
}

/* ---- commands ------------------------------------------------------- */

/* what every connection holds, summed, for "status" */
struct conn_sums {
	uint64_t leases;
	uint64_t maps;
	uint64_t writers;
};

static struct conn_sums conn_sums(const struct ctl_server *srv)
{
	struct conn_sums n = { 0 };

	for (const struct ctl_conn *c = srv->conns; c; c = c->next) {
		n.leases += c->nleases;
		n.maps += ctl_map_count(c);
		n.writers += c->nwriters;
	}
	return n;
}

static int cmd_status(struct req *r)
{
	struct conn_sums sums;
	char *stats;
	size_t len;
	int rc;

	rc = arg_end(r);
	if (rc)
		return rc;
	rc = render_stats_json(r->srv->st, &stats, &len);
	if (rc)
		return fail(r, rc, "reading stats: %s", strerror(-rc));
	/* the stats file ends in a newline; a response line must not */
	while (len && stats[len - 1] == '\n')
		len--;
	kvfs_buf_printf(r->out, ",\"daemon\":%s,\"stats\":", r->srv->info_json);
	kvfs_buf_add(r->out, stats, len);
	free(stats);
	sums = conn_sums(r->srv);
	kvfs_buf_printf(r->out,
			",\"ctl\":{\"clients\":%u,\"requests\":%llu,"
			"\"conn_leases\":%llu,\"conn_maps\":%llu,"
			"\"conn_writers\":%llu}",
			r->srv->nconns, (unsigned long long)r->srv->requests,
			(unsigned long long)sums.leases,
			(unsigned long long)sums.maps,
			(unsigned long long)sums.writers);
	return 0;
}

static int cmd_ns_list(struct req *r)
{
	int rc = arg_end(r);

	if (rc)
		return rc;
	kvfs_buf_puts(r->out, ",\"namespaces\":");
	rc = render_ns_list_json(r->srv->st, r->out);
	if (rc)
		return fail(r, rc, "listing namespaces: %s", strerror(-rc));
	return 0;
}

static const struct ctl_cluster_ops *cluster_of(struct req *r);

/* ns create NAME BLOCK_TOKENS [chain|open] */
static int cmd_ns_create(struct req *r)
{
	char name[KVFS_NS_MAX + 1], *w;
	unsigned layout = KV_LAYOUT_CHAIN;
	uint32_t bt, id;
	int rc;

	rc = arg_name(r, name);
	if (!rc)
		rc = arg_u32(r, "block_tokens", 1, KVFS_BLOCK_TOKENS_MAX, &bt);
	if (!rc && r->next) {
		w = next_word(r);
		if (w && strcmp(w, "open") == 0)
			layout = KV_LAYOUT_OPEN;
		else if (!w || strcmp(w, "chain") != 0)
			rc = fail(r, -EINVAL, "layout: chain or open");
	}
	if (!rc)
		rc = arg_end(r);
	if (rc)
		return rc;
	rc = kv_store_ns_create_layout(r->srv->st, name, bt, layout, &id);
	if (rc == -EEXIST)
		return fail(r, rc, "namespace \"%.255s\" exists", name);
	if (rc)
		return fail(r, rc, "creating namespace \"%.255s\": %s", name,
			    strerror(-rc));
	if (cluster_of(r) && cluster_of(r)->ns_made)
		cluster_of(r)->ns_made(cluster_of(r)->arg);
	put_name(r->out, name);
	kvfs_buf_printf(r->out,
			",\"id\":%u,\"block_tokens\":%u,\"layout\":\"%s\"", id,
			bt, layout == KV_LAYOUT_OPEN ? "open" : "chain");
	return 0;
}

static int cmd_ns_rm(struct req *r)
{
	char name[KVFS_NS_MAX + 1];
	int rc;

	rc = arg_name(r, name);
	if (!rc)
		rc = arg_end(r);
	if (rc)
		return rc;
	rc = kv_store_ns_remove(r->srv->st, name);
	if (rc == -ENOENT)
		return fail(r, rc, "unknown namespace \"%.255s\"", name);
	if (rc == -ENOTEMPTY)
		return fail(r, rc, "namespace \"%.255s\" still holds blocks",
			    name);
	if (rc)
		return fail(r, rc, "removing namespace \"%.255s\": %s", name,
			    strerror(-rc));
	return 0;
}

static int ls_args(struct req *r, struct ns_arg *ns, uint64_t *cursor,
		   uint64_t *max)
{
	int rc = arg_ns(r, ns);

	*cursor = 0;
	*max = CTLP_LS_DEFAULT;
	if (!rc && r->next)
		rc = arg_u64(r, "cursor", 0, UINT64_MAX, cursor);
	if (!rc && r->next)
		rc = arg_u64(r, "max", 1, CTLP_LS_MAX, max);
	if (!rc)
		rc = arg_end(r);
	return rc;
}

static int cmd_ls(struct req *r)
{
	uint8_t h[KVFS_HASH_LEN];
	struct kv_block_info bi;
	uint64_t cursor, max, n = 0;
	struct ns_arg ns;
	int rc = 0;

	rc = ls_args(r, &ns, &cursor, &max);
	if (rc)
		return rc;
	kvfs_buf_puts(r->out, ",\"blocks\":[");
	while (n < max) {
		rc = kv_store_ns_next(r->srv->st, ns.id, &cursor, h, &bi);
		if (rc <= 0)
			break;
		kvfs_buf_puts(r->out, n++ ? ",{" : "{");
		put_block(r->out, h, &bi);
		put_path(r, ns.id, h);
		kvfs_buf_puts(r->out, "}");
	}
	if (rc < 0)
		return fail(r, rc, "listing \"%.255s\": %s", ns.name,
			    strerror(-rc));
	kvfs_buf_printf(r->out, "],\"next\":\"%llu\",\"end\":%s",
			(unsigned long long)cursor, rc == 0 ? "true" : "false");
	return 0;
}

static int cmd_stat(struct req *r)
{
	uint8_t h[KVFS_HASH_LEN];
	struct kv_block_info bi;
	struct ns_arg ns;
	int rc;

	rc = arg_ns(r, &ns);
	if (!rc)
		rc = arg_hash(r, h);
	if (!rc)
		rc = arg_end(r);
	if (rc)
		return rc;
	rc = kv_store_stat(r->srv->st, ns.id, h, &bi);
	if (rc == -ENOENT)
		return fail(r, rc, "no such block in \"%.255s\"", ns.name);
	if (rc)
		return fail(r, rc, "stat: %s", strerror(-rc));
	kvfs_buf_puts(r->out, ",");
	put_block(r->out, h, &bi);
	put_path(r, ns.id, h);
	kvfs_buf_printf(r->out, ",\"checksum\":\"%08x\"", bi.checksum);
	if (bi.has_parent)
		put_hex(r->out, "parent", bi.parent);
	else
		kvfs_buf_puts(r->out, ",\"parent\":null");
	return 0;
}

static int match_fail(struct req *r, long rc, const char *ns)
{
	if (rc == -EAGAIN)
		return fail(r, -EAGAIN, "too many live leases");
	/* the uid's cap: -EAGAIN like the others, as libkvfs documents */
	if (rc == -EDQUOT)
		return fail(r, -EAGAIN,
			    "uid %u holds %u live leases (kvfsd -o "
			    "ctl_uid_leases)",
			    (unsigned)r->conn->uid, r->srv->lim.uid_leases);
	return fail(r, (int)rc, "matching in \"%.255s\": %s", ns,
		    strerror((int)-rc));
}

static int cmd_lookup(struct req *r)
{
	uint8_t(*h)[KVFS_HASH_LEN];
	struct ns_arg ns;
	size_t n;
	long k;
	int rc;

	rc = arg_chain_ns(r, &ns);
	if (!rc)
		rc = arg_hashes(r, &h, &n);
	if (rc)
		return rc;
	k = kv_store_match(r->srv->st, ns.id, (const uint8_t(*)[32])h, n, 0,
			   NULL);
	free(h);
	if (k < 0)
		return match_fail(r, k, ns.name);
	kvfs_buf_printf(r->out, ",\"count\":%ld,\"n\":%zu", k, n);
	return 0;
}

/* room for one more connection lease, made before pinning so that no
 * allocation can fail between the pin and its bookkeeping */
static int lease_room(struct req *r)
{
	int rc = ctl_lease_room(r->srv, r->conn);

	if (rc == -EAGAIN)
		return fail(r, rc,
			    "this connection holds %u live leases (kvfsd -o "
			    "ctl_leases)",
			    r->srv->lim.conn_leases);
	if (rc)
		return fail(r, rc, "out of memory");
	return 0;
}

/* a lease length asked for, clamped to -o lease_max_ms: the answer's
 * "lease_ms" is what was granted, so the client can renew in time */
static int arg_lease_ms(struct req *r, uint32_t *ms)
{
	int rc = arg_u32(r, "lease_ms", 1, CTLP_LEASE_MS_MAX, ms);

	if (!rc && r->srv->lim.lease_max_ms && *ms > r->srv->lim.lease_max_ms)
		*ms = r->srv->lim.lease_max_ms;
	return rc;
}

/* match (scoped to this connection) and pin (not): the same but for who
 * releases the lease */
static int match_or_pin(struct req *r, bool scoped)
{
	uint8_t(*h)[KVFS_HASH_LEN] = NULL;
	struct kv_lease_owner owner = {
		.uid = (uint32_t)r->conn->uid,
		.pid = (int32_t)r->conn->pid,
		.conn = r->conn->id,
		.scoped = scoped,
	};
	uint64_t lease = 0, expires;
	struct ns_arg ns;
	uint32_t ms;
	size_t n;
	long k;
	int rc;

	rc = arg_chain_ns(r, &ns);
	if (!rc)
		rc = arg_lease_ms(r, &ms);
	if (!rc && scoped)
		rc = lease_room(r);
	if (!rc)
		rc = arg_hashes(r, &h, &n);
	if (rc)
		return rc;
	/* taken before the match, so the entry can only expire later than
	 * the lease does, never sooner */
	expires = kvfs_mono_ns() + (uint64_t)ms * 1000000;
	k = kv_store_match_owned(r->srv->st, ns.id, (const uint8_t(*)[32])h, n,
				 ms, &owner, r->srv->lim.uid_leases, &lease);
	free(h);
	if (k < 0)
		return match_fail(r, k, ns.name);
	if (scoped && lease)
		ctl_lease_track(r->conn, lease, expires);
	kvfs_buf_printf(r->out,
			",\"count\":%ld,\"n\":%zu,\"lease\":\"%llu\","
			"\"lease_ms\":%u",
			k, n, (unsigned long long)lease, ms);
	return 0;
}

static int cmd_match(struct req *r)
{
	return match_or_pin(r, true);
}

static int cmd_pin(struct req *r)
{
	return match_or_pin(r, false);
}

static int lease_fail(struct req *r, int rc, uint64_t lease)
{
	if (rc == -ENOENT)
		return fail(r, rc, "no lease %llu (released or expired)",
			    (unsigned long long)lease);
	return fail(r, rc, "lease %llu: %s", (unsigned long long)lease,
		    strerror(-rc));
}

/*
 * Only the uid that took a lease, or root, may release or renew it: a
 * lease is what keeps an engine's blocks from being evicted under it.
 * Lease ids are never reused, so the lease checked is the one released.
 */
static int lease_mine(struct req *r, uint64_t lease)
{
	struct kv_lease_info li;
	int rc = kv_store_lease_stat(r->srv->st, lease, &li);

	if (rc)
		return lease_fail(r, rc, lease);
	if (r->conn->uid != 0 && li.owner.uid != (uint32_t)r->conn->uid)
		return fail(r, -EPERM,
			    "lease %llu belongs to uid %u; only it or root "
			    "may release or renew it",
			    (unsigned long long)lease, (unsigned)li.owner.uid);
	return 0;
}

static int cmd_unpin(struct req *r)
{
	uint64_t lease;
	int rc;

	rc = arg_u64(r, "lease", 1, UINT64_MAX, &lease);
	if (!rc)
		rc = arg_end(r);
	if (!rc)
		rc = lease_mine(r, lease);
	if (rc)
		return rc;
	rc = kv_store_lease_release(r->srv->st, lease);
	if (rc)
		return lease_fail(r, rc, lease);
	ctl_lease_forget(r->srv, r->conn, lease);
	return 0;
}

static int cmd_renew(struct req *r)
{
	uint64_t lease, expires;
	uint32_t ms;
	int rc;

	rc = arg_u64(r, "lease", 1, UINT64_MAX, &lease);
	if (!rc)
		rc = arg_lease_ms(r, &ms);
	if (!rc)
		rc = arg_end(r);
	if (!rc)
		rc = lease_mine(r, lease);
	if (rc)
		return rc;
	expires = kvfs_mono_ns() + (uint64_t)ms * 1000000;
	rc = kv_store_lease_renew(r->srv->st, lease, ms);
	if (rc)
		return lease_fail(r, rc, lease);
	ctl_lease_renewed(r->srv, r->conn, lease, expires);
	kvfs_buf_printf(r->out, ",\"lease\":\"%llu\",\"lease_ms\":%u",
			(unsigned long long)lease, ms);
	return 0;
}

/* lease list [CURSOR [MAX]]: every live lease, in id order, a page at a
 * time as ls does; anyone may look (ids do not let one take a lease) */
static int cmd_lease_list(struct req *r)
{
	struct kv_lease_info *li;
	uint64_t cursor = 0, max = CTL_LEASES_PAGE, now = kvfs_mono_ns();
	long n;
	int rc = 0;

	if (r->next)
		rc = arg_u64(r, "cursor", 0, UINT64_MAX, &cursor);
	if (!rc && r->next)
		rc = arg_u64(r, "max", 1, CTL_LEASES_PAGE, &max);
	if (!rc)
		rc = arg_end(r);
	if (rc)
		return rc;
	li = malloc(max * sizeof(*li));
	if (!li)
		return fail(r, -ENOMEM, "out of memory");
	n = kv_store_lease_list(r->srv->st, cursor, li, max);
	if (n < 0) {
		free(li);
		return fail(r, (int)n, "listing leases: %s", strerror((int)-n));
	}
	kvfs_buf_puts(r->out, ",\"leases\":[");
	for (long i = 0; i < n; i++) {
		const struct kv_lease_info *l = &li[i];

		kvfs_buf_printf(r->out,
				"%s{\"lease\":\"%llu\",\"kind\":\"%s\","
				"\"blocks\":%u,\"expires_ms\":%llu,",
				i ? "," : "", (unsigned long long)l->id,
				l->owner.scoped ? "match" : "pin", l->blocks,
				(unsigned long long)(l->expires_ns > now
							     ? (l->expires_ns -
								now) / 1000000
							     : 0));
		if (l->owner.uid == KV_LEASE_NOBODY)
			kvfs_buf_puts(r->out, "\"uid\":null,\"pid\":null}");
		else
			kvfs_buf_printf(r->out, "\"uid\":%u,\"pid\":%d}",
					l->owner.uid, l->owner.pid);
	}
	kvfs_buf_printf(r->out, "],\"next\":\"%llu\",\"end\":%s",
			(unsigned long long)(n ? li[n - 1].id : cursor),
			(uint64_t)n < max ? "true" : "false");
	free(li);
	return 0;
}

/* lease revoke LEASE: unpin under its own name, for an administrator */
static int cmd_lease_revoke(struct req *r)
{
	return cmd_unpin(r);
}

static int cmd_evict(struct req *r)
{
	uint8_t h[KVFS_HASH_LEN];
	struct ns_arg ns;
	int rc;

	rc = arg_ns(r, &ns);
	if (!rc)
		rc = arg_hash(r, h);
	if (!rc)
		rc = arg_end(r);
	if (rc)
		return rc;
	rc = kv_store_evict(r->srv->st, ns.id, h);
	if (rc == -ENOENT)
		return fail(r, rc, "no such block in \"%.255s\"", ns.name);
	if (rc == -EBUSY)
		return fail(r, rc,
			    "block is referenced (open, mapped or "
			    "pinned)");
	if (rc)
		return fail(r, rc, "evict: %s", strerror(-rc));
	return 0;
}

/* ---- zero-copy map and write (libkvfs) ------------------------------ */

/*
 * Where a slot's bytes lie in the pool file (pool.h's layout).  A write
 * handle is the slot it writes, as store.h promises for kv_store_create.
 */
static uint64_t slot_offset(struct req *r, uint32_t slot)
{
	return kv_pool_slot_offset(kv_store_pool(r->srv->st), slot);
}

static int room_fail(struct req *r, int rc, const char *what, unsigned max)
{
	if (rc == -EAGAIN)
		return fail(r, rc, "this connection holds %u %s", max, what);
	return fail(r, rc, "out of memory");
}

static struct ctl_writer *writer_find(struct ctl_conn *c, uint64_t id)
{
	for (size_t i = 0; i < c->nwriters; i++)
		if (c->writers[i].id == id)
			return &c->writers[i];
	return NULL;
}

/* take a reference on block h and describe it as one map in out;
 * ctl_map_room made room for it */
static int map_one(struct req *r, const struct ns_arg *ns, const uint8_t *h)
{
	struct kv_block_info bi;
	struct kv_ref ref;
	uint64_t id;
	int rc;

	rc = kv_store_get(r->srv->st, ns->id, h, &ref);
	if (rc)
		return rc;
	/* not in the pool file a client maps (store.h, spilled): read it
	 * through the mount */
	if (ref.spilled) {
		kv_store_put(r->srv->st, &ref);
		return -EFBIG;
	}
	/* the reference keeps the block, so stat finds it unless it was
	 * unlinked in between: then the name is gone, and so is the map */
	rc = kv_store_stat(r->srv->st, ns->id, h, &bi);
	if (rc) {
		kv_store_put(r->srv->st, &ref);
		return rc;
	}
	id = ++r->srv->next_ref;
	ctl_map_add(r->conn, id, &ref);
	kvfs_buf_printf(r->out,
			"\"ref\":\"%llu\",\"slot\":%u,\"offset\":%llu,"
			"\"size\":%llu,\"checksum\":\"%08x\"",
			(unsigned long long)id, ref.slot,
			(unsigned long long)slot_offset(r, ref.slot),
			(unsigned long long)ref.size, bi.checksum);
	return 0;
}

static int map_room(struct req *r, size_t n)
{
	/* room first, so that no allocation can fail holding a ref */
	int rc = ctl_map_room(r->srv, r->conn, n);

	return rc ? room_fail(r, rc, "maps (kvfsd -o ctl_maps)",
			      r->srv->lim.conn_maps)
		  : 0;
}

static int cmd_map(struct req *r)
{
	uint8_t h[KVFS_HASH_LEN];
	struct ns_arg ns;
	int rc;

	rc = arg_chain_ns(r, &ns);
	if (!rc)
		rc = arg_hash(r, h);
	if (!rc)
		rc = arg_end(r);
	if (!rc)
		rc = map_room(r, 1);
	if (rc)
		return rc;
	kvfs_buf_puts(r->out, ",");
	rc = map_one(r, &ns, h);
	if (rc == -ENOENT)
		return fail(r, rc, "no such block in \"%.255s\"", ns.name);
	if (!rc && r->out->err) {
		/* the answer is lost, so must the map be */
		ctl_map_drop_last(r->srv, r->conn, 1);
		rc = -ENOMEM;
	}
	if (rc)
		return fail(r, rc, "map: %s", strerror(-rc));
	return 0;
}

/* map the longest cached prefix of the hashes, in one request */
static int cmd_mapv(struct req *r)
{
	uint8_t(*h)[KVFS_HASH_LEN];
	struct ns_arg ns;
	size_t n, k;
	int rc;

	rc = arg_chain_ns(r, &ns);
	if (!rc)
		rc = arg_hashes(r, &h, &n);
	if (rc)
		return rc;
	rc = map_room(r, n);
	if (rc) {
		free(h);
		return rc;
	}
	kvfs_buf_puts(r->out, ",\"maps\":[");
	for (k = 0; k < n; k++) {
		kvfs_buf_puts(r->out, k ? ",{" : "{");
		rc = map_one(r, &ns, h[k]);
		if (rc)
			break;
		kvfs_buf_puts(r->out, "}");
	}
	free(h);
	if (rc == -ENOENT && !r->out->err) {
		/* the first miss ends the prefix: drop its "{" */
		r->out->len -= k ? 2 : 1;
		r->out->p[r->out->len] = '\0';
		rc = 0;
	}
	kvfs_buf_printf(r->out, "],\"count\":%zu,\"n\":%zu", k, n);
	if (r->out->err && !rc)
		rc = -ENOMEM;
	if (rc) {
		/* all or nothing: a client told of an error holds no map */
		ctl_map_drop_last(r->srv, r->conn, k);
		return fail(r, rc, "mapv: %s", strerror(-rc));
	}
	return 0;
}

/* every REF is checked before any is dropped, so a bad one (or one
 * named twice) unmaps nothing */
static int cmd_unmap(struct req *r)
{
	size_t n = words_left(r), bad;
	uint64_t *ids;
	int rc = 0;

	if (!n)
		return fail(r, -EINVAL, "missing ref");
	if (n > CTLP_HASHES_MAX)
		return fail(r, -E2BIG, "%zu refs: at most %u per request", n,
			    CTLP_HASHES_MAX);
	ids = malloc(n * sizeof(*ids));
	if (!ids)
		return fail(r, -ENOMEM, "out of memory for %zu refs", n);
	for (size_t i = 0; i < n && !rc; i++)
		rc = arg_u64(r, "ref", 1, UINT64_MAX, &ids[i]);
	if (!rc && ctl_map_unmap(r->srv, r->conn, ids, n, &bad))
		rc = fail(r, -ENOENT,
			  "no map %llu on this connection%s; nothing unmapped",
			  (unsigned long long)ids[bad],
			  n > 1 ? " (or named twice)" : "");
	free(ids);
	return rc;
}

static int alloc_args(struct req *r, struct ns_arg *ns, uint8_t *h,
		      uint8_t *parent, bool *has_parent)
{
	int rc = arg_chain_ns(r, ns);

	if (!rc)
		rc = arg_hash(r, h);
	*has_parent = !rc && r->next;
	if (*has_parent)
		rc = arg_hash(r, parent);
	if (!rc)
		rc = arg_end(r);
	if (rc)
		return rc;
	rc = ctl_writer_room(r->conn);
	return rc ? room_fail(r, rc, "writers", CTL_CONN_WRITERS_MAX) : 0;
}

static int cmd_alloc(struct req *r)
{
	uint8_t h[KVFS_HASH_LEN], parent[KVFS_HASH_LEN];
	struct ctl_writer *w;
	struct ns_arg ns;
	bool has_parent;
	uint32_t wh;
	int rc;

	rc = alloc_args(r, &ns, h, parent, &has_parent);
	if (rc)
		return rc;
	rc = kv_store_create(r->srv->st, ns.id, h, has_parent ? parent : NULL,
			     &wh);
	if (rc == -EEXIST)
		return fail(r, rc, "block exists or is being written");
	if (rc == -ENOSPC)
		return fail(r, rc, "every slot is referenced or being written");
	if (rc)
		return fail(r, rc, "alloc: %s", strerror(-rc));
	w = &r->conn->writers[r->conn->nwriters++];
	w->id = ++r->srv->next_ref;
	w->wh = wh;
	w->ns = ns.id;
	memcpy(w->hash, h, KVFS_HASH_LEN);
	kvfs_buf_printf(r->out,
			",\"ref\":\"%llu\",\"slot\":%u,\"offset\":%llu,"
			"\"cap\":%llu",
			(unsigned long long)w->id, wh,
			(unsigned long long)slot_offset(r, wh),
			(unsigned long long)kv_store_slot_size(r->srv->st));
	return 0;
}

static int writer_arg(struct req *r, struct ctl_writer **w)
{
	uint64_t id;
	int rc;

	rc = arg_u64(r, "ref", 1, UINT64_MAX, &id);
	if (rc)
		return rc;
	*w = writer_find(r->conn, id);
	if (!*w)
		return fail(r, -ENOENT, "no writer %llu on this connection",
			    (unsigned long long)id);
	return 0;
}

/* a CRC-32C: 8 hex digits */
static int arg_crc(struct req *r, uint32_t *crc)
{
	char *w;
	int rc = arg_word(r, "crc", &w);

	if (rc)
		return rc;
	if (strlen(w) != 8 || strspn(w, "0123456789abcdefABCDEF") != 8)
		return fail(r, -EINVAL, "bad crc \"%.40s\": need 8 hex digits",
			    w);
	*crc = (uint32_t)strtoul(w, NULL, 16);
	return 0;
}

static int cmd_commit(struct req *r)
{
	struct ctl_writer *w;
	bool have_crc = false;
	uint32_t crc = 0;
	uint64_t size;
	int rc;

	rc = writer_arg(r, &w);
	if (!rc)
		rc = arg_u64(r, "size", 0, kv_store_slot_size(r->srv->st),
			     &size);
	if (!rc && r->next) {
		rc = arg_crc(r, &crc);
		have_crc = rc == 0;
	}
	if (!rc)
		rc = arg_end(r);
	if (rc)
		return rc;
	rc = kv_store_set_size(r->srv->st, w->wh, size);
	if (rc)
		return fail(r, rc, "commit: %s", strerror(-rc));
	/* a failed seal aborts the block (store.h): the writer is done
	 * either way.  The writer's own CRC, when given, is taken as it is:
	 * it wrote the bytes, and a wrong one only fails the block later */
	rc = have_crc ? kv_store_seal_crc(r->srv->st, w->wh, crc)
		      : kv_store_seal(r->srv->st, w->wh);
	if (rc == 0 && cluster_of(r)) {
		char ns[KVFS_NS_MAX + 1];

		if (kv_store_ns_find_id(r->srv->st, w->ns, ns) == 0)
			cluster_of(r)->sealed(cluster_of(r)->arg, ns, w->hash);
	}
	*w = r->conn->writers[--r->conn->nwriters];
	if (rc)
		return fail(r, rc, "sealing: %s", strerror(-rc));
	return 0;
}

static int cmd_abort(struct req *r)
{
	struct ctl_writer *w;
	int rc;

	rc = writer_arg(r, &w);
	if (!rc)
		rc = arg_end(r);
	if (rc)
		return rc;
	rc = kv_store_abort(r->srv->st, w->wh);
	*w = r->conn->writers[--r->conn->nwriters];
	if (rc)
		return fail(r, rc, "abort: %s", strerror(-rc));
	return 0;
}

/* ---- dispatch ------------------------------------------------------- */

struct ctl_cmd {
	const char *name;
	const char *sub; /* second word, or NULL */
	int (*fn)(struct req *r);
};

/* ---- cluster -------------------------------------------------------- */

static const struct ctl_cluster_ops *cluster_of(struct req *r)
{
	return atomic_load(&r->srv->cluster);
}

static int no_cluster(struct req *r)
{
	return fail(r, -ENOTSUP,
		    "this node is not in a cluster "
		    "(kvfsd --cluster)");
}

static int cmd_nodes(struct req *r)
{
	int rc = arg_end(r);

	if (rc)
		return rc;
	if (!cluster_of(r))
		return no_cluster(r);
	rc = cluster_of(r)->nodes(cluster_of(r)->arg, r->out);
	if (rc)
		return fail(r, rc, "nodes: %s", strerror(-rc));
	return 0;
}

/* what a prefetch job needs, all its own: the request line is gone by
 * the time it runs */
struct prefetch_job {
	const struct ctl_cluster_ops *ops;
	char node[KVFS_NS_MAX + 1]; /* "" for this node */
	char ns[KVFS_NS_MAX + 1];
	uint8_t (*h)[KVFS_HASH_LEN];
	size_t n;
};

static void prefetch_run(void *arg, const atomic_bool *stop,
			 struct kvfs_buf *out)
{
	struct prefetch_job *pj = arg;
	char msg[128];
	int *res = calloc(pj->n ? pj->n : 1, sizeof(*res));
	long k = res ? pj->ops->prefetch(pj->ops->arg,
					 pj->node[0] ? pj->node : NULL, pj->ns,
					 (const uint8_t(*)[32])pj->h, pj->n,
					 res, stop)
		     : -ENOMEM;

	if (k < 0) {
		if (k == -ENXIO)
			snprintf(msg, sizeof(msg), "no live node \"%.64s\"",
				 pj->node);
		else
			snprintf(msg, sizeof(msg), "prefetch: %s",
				 strerror((int)-k));
		ctl_cmd_error(out, (int)-k, msg);
	} else {
		kvfs_buf_printf(out,
				"{\"ok\":true,\"count\":%ld,\"n\":%zu,"
				"\"errors\":[",
				k, pj->n);
		for (size_t i = 0; i < pj->n; i++)
			kvfs_buf_printf(out, "%s%d", i ? "," : "", -res[i]);
		kvfs_buf_puts(out, "]}\n");
		if (out->err) {
			kvfs_buf_release(out);
			ctl_cmd_error(out, ENOMEM, "out of memory");
		}
	}
	free(res);
	free(pj->h);
	free(pj);
}

/*
 * prefetch NODE NS HASH...: NODE "-" is this node.  Each block may wait
 * on the network (the transfer engine's timeout), so it runs as a job:
 * other clients are served meanwhile, this one is answered when it ends.
 */
static int cmd_prefetch(struct req *r)
{
	struct prefetch_job *pj;
	char *node;
	int rc;

	pj = calloc(1, sizeof(*pj));
	if (!pj)
		return fail(r, -ENOMEM, "out of memory");
	rc = arg_word(r, "node", &node);
	if (!rc && strlen(node) >= sizeof(pj->node))
		rc = fail(r, -EINVAL, "bad node id: longer than %zu bytes",
			  sizeof(pj->node) - 1);
	if (!rc)
		rc = arg_name(r, pj->ns);
	if (!rc)
		rc = arg_hashes(r, &pj->h, &pj->n);
	if (!rc && !(pj->ops = cluster_of(r)))
		rc = no_cluster(r);
	if (!rc) {
		if (strcmp(node, "-"))
			memcpy(pj->node, node, strlen(node) + 1);
		rc = ctl_job_start(r->srv, r->conn, prefetch_run, pj);
		if (rc == -EAGAIN)
			rc = fail(r, rc, "%u prefetches are running already",
				  CTL_JOBS_MAX);
		else if (rc)
			rc = fail(r, rc, "prefetch: %s", strerror(-rc));
	}
	if (rc) {
		free(pj->h);
		free(pj);
		return rc;
	}
	r->deferred = true;
	return 0;
}

static const struct ctl_cmd ctl_cmds[] = {
	{ "status", NULL, cmd_status },
	{ "ns", "list", cmd_ns_list },
	{ "ns", "create", cmd_ns_create },
	{ "ns", "rm", cmd_ns_rm },
	{ "ls", NULL, cmd_ls },
	{ "stat", NULL, cmd_stat },
	{ "lookup", NULL, cmd_lookup },
	{ "match", NULL, cmd_match },
	{ "pin", NULL, cmd_pin },
	{ "unpin", NULL, cmd_unpin },
	{ "renew", NULL, cmd_renew },
	{ "lease", "list", cmd_lease_list },
	{ "lease", "revoke", cmd_lease_revoke },
	{ "evict", NULL, cmd_evict },
	{ "map", NULL, cmd_map },
	{ "mapv", NULL, cmd_mapv },
	{ "unmap", NULL, cmd_unmap },
	{ "alloc", NULL, cmd_alloc },
	{ "commit", NULL, cmd_commit },
	{ "abort", NULL, cmd_abort },
	{ "nodes", NULL, cmd_nodes },
	{ "prefetch", NULL, cmd_prefetch },
};

#define NCMDS (sizeof(ctl_cmds) / sizeof(ctl_cmds[0]))

/* the first word, and for "ns" and "lease" the second one too */
static const struct ctl_cmd *find_cmd(struct req *r)
{
	const char *w = next_word(r), *sub = NULL;
	bool has_subs = false;

	for (size_t i = 0; i < NCMDS; i++) {
		if (strcmp(ctl_cmds[i].name, w))
			continue;
		if (!ctl_cmds[i].sub)
			return &ctl_cmds[i];
		if (!has_subs) {
			has_subs = true;
			sub = next_word(r);
		}
		if (sub && !strcmp(ctl_cmds[i].sub, sub))
			return &ctl_cmds[i];
	}
	if (has_subs)
		fail(r, -ENOSYS, "%s: unknown or missing verb \"%.32s\"", w,
		     sub ? sub : "");
	else
		fail(r, -ENOSYS, "unknown command \"%.64s\"", w);
	return NULL;
}

/* the line rules of ctlproto.h: printable bytes, single spaces */
static int check_line(struct req *r, const char *line, size_t len)
{
	if (len == 0)
		return fail(r, -EINVAL, "empty request");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)line[i];

		if (c < 0x20 || c == 0x7f)
			return fail(r, -EINVAL,
				    "control byte 0x%02x at offset %zu", c, i);
		if (c == ' ' && (i == 0 || i == len - 1 || line[i + 1] == ' '))
			return fail(r, -EINVAL,
				    "empty word at offset %zu (words are "
				    "separated by one space)",
				    i);
	}
	return 0;
}

void ctl_cmd_error(struct kvfs_buf *out, int err, const char *msg)
{
	kvfs_buf_printf(out,
			"{\"ok\":false,\"errno\":%d,\"error\":\"%s\","
			"\"message\":",
			err, kvfs_ctlp_errno_name(err));
	kvfs_buf_json_str(out, msg, strlen(msg));
	kvfs_buf_puts(out, "}\n");
}

void ctl_cmd_serve(struct ctl_server *srv, struct ctl_conn *c, char *line,
		   size_t len, struct kvfs_buf *out)
{
	struct req r = { .srv = srv, .conn = c, .next = line, .out = out };
	const struct ctl_cmd *cmd;
	size_t start = out->len;
	int rc;

	rc = check_line(&r, line, len);
	if (!rc) {
		cmd = find_cmd(&r);
		rc = cmd ? 0 : -ENOSYS;
	}
	if (!rc) {
		kvfs_buf_puts(out, "{\"ok\":true");
		rc = cmd->fn(&r);
	}
	if (!rc && r.deferred) {
		out->len = start; /* the job writes the whole answer */
		if (out->p)
			out->p[start] = '\0';
		return;
	}
	if (!rc && !out->err) {
		kvfs_buf_puts(out, "}\n");
		return;
	}
	if (!rc)
		fail(&r, out->err, "out of memory for the response");
	/* drop the half-written success and answer with the error */
	out->len = start;
	out->err = 0;
	if (out->p)
		out->p[start] = '\0';
	ctl_cmd_error(out, -(rc ? rc : -ENOMEM), r.msg);
}

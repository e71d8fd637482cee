/*
 * elect.h - leader election through etcd (kvconductor serve --election),
 * and finding the leader (kvfsd --conductor etcd:..., kvconductor leader).
 *
 * One key per election NAME (the NAME of etcd[s]://HOST:PORT/NAME):
 *
 *   /kvfs/<NAME>/conductor/leader  ->  the leader's value, under its lease
 *
 * The conductor's value is JSON, {"http": "HOST:PORT", "events":
 * "HOST:PORT"} (events "" without --events); kv_elect_field reads one
 * member.
 *
 * A candidate (kv_elect_start):
 *   - grants itself a lease of ttl_s and renews it every ttl/3, leader or
 *     standby (a standby's claim then costs one request, not two);
 *   - claims the key with a txn that puts it only if it does not exist
 *     (create_revision 0), attached to its lease: the txn succeeding
 *     makes it the leader, failing tells it who leads;
 *   - watches the key (and looks again every ELECT_LOOK_MS anyway) and
 *     claims it as soon as it is gone: the leader resigned (its lease
 *     revoked) or died (its lease expired, ttl_s after its last renewal).
 *
 * Why not etcd's election service (/v3/election/campaign and leader,
 * which the JSON gateway serves too): a campaign is one call that blocks
 * inside etcd until the candidate leads.  Through the gateway that is an
 * HTTP request held open for as long as a standby waits, which this
 * client (every call bounded, retried on another endpoint) does not do,
 * and a campaign whose connection is cut leaves its key queued under the
 * lease.  Its leader is the key of lowest create revision under the
 * election's prefix; one key claimed by create-if-absent is the same
 * rule for two or three candidates, built from the calls etcd.h has.
 *
 * Never two leaders acting: kv_elect_leading() is true only until the
 * send time of the last renewal etcd answered plus the TTL it reported,
 * less ELECT_MARGIN_MS.  etcd counts the TTL from when it received that
 * renewal, later, so by our clock the lease is still valid in etcd while
 * it says true (the margin covers clock rates).  A leader that cannot
 * renew stops acting at that deadline even if its thread is stuck in a
 * call, before any standby can claim the key; it also stops at once
 * when a renewal says the lease is gone or the key holds another lease.
 *
 * Calls return 0 or a negative errno; failures are logged (at most once
 * per failing streak).
 */
#ifndef KVFS_ELECT_H
#define KVFS_ELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvstore/etcd.h"

#define KV_ELECT_TTL_S                                                         \
	3u /* etcd's default minimum TTL is 2 s (1.5 x its                     \
	    * 1 s election timeout, rounded up) */
#define KV_ELECT_TTL_MAX 600u
#define KV_ELECT_VALUE_MAX 512

struct kv_elect_config {
	const char *url; /* etcd[s]://HOST:PORT[,HOST:PORT...]/NAME */
	struct kv_etcd_auth etcd;
	const char *value; /* what the key holds while we lead */
	/* the cluster secret (copied): the record is signed with it, for
	 * this lease, and others' are read only when their MAC checks;
	 * NULL: unsigned, and read as they are */
	const uint8_t *secret;
	size_t secret_len;
	uint32_t ttl_s; /* 0: KV_ELECT_TTL_S */
};

struct kv_elect;

/* check, connect and start campaigning (a thread); -EINVAL (bad url or
 * options, logged), -ENOMEM, or the password file's error.  etcd being
 * unreachable is no error: the thread keeps trying, as a standby. */
int kv_elect_start(const struct kv_elect_config *cfg, struct kv_elect **out);
/* stop campaigning and resign: the lease is revoked, so a standby takes
 * over at once instead of after ttl_s.  el stays valid, a standby for
 * good, for the threads that still read it; NULL or twice: no-op */
void kv_elect_resign(struct kv_elect *el);
/* resign if not done, and free el; NULL: no-op */
void kv_elect_stop(struct kv_elect *el);

/* true while we lead on a lease that is valid by our clock (above) */
bool kv_elect_leading(struct kv_elect *el);

struct kv_elect_state {
	bool leading;
	uint64_t won; /* times this candidate became leader */
	uint32_t ttl_s;
	char leader[KV_ELECT_VALUE_MAX]; /* its value; "" none known */
};
void kv_elect_state(struct kv_elect *el, struct kv_elect_state *st);

/*
 * Follow an election: fn(arg, value) on a thread, first with what the
 * key holds (NULL: no leader, or one whose record fails its MAC under
 * secret, when there is one: kv_elect_config) and then at every change;
 * fn must return soon.  -EINVAL (bad url or options, logged), -ENOMEM.
 */
struct kv_elect_watch;
int kv_elect_follow(const char *url, const struct kv_etcd_auth *a,
		    const uint8_t *secret, size_t secret_len,
		    void (*fn)(void *arg, const char *value), void *arg,
		    struct kv_elect_watch **out);
void kv_elect_unfollow(struct kv_elect_watch *w);

/* the leader's value now: 0, -ENOENT (no leader), -EINVAL (bad url or
 * options), or etcd's error; err gets a one-line reason */
int kv_elect_get(const char *url, const struct kv_etcd_auth *a, char *value,
		 size_t len, char *err, size_t errlen);

/*
 * Records of the leader's that outlive its lease, for whoever leads next:
 * /kvfs/NAME/conductor/WHAT (what: [a-z]+, a plural noun as the log
 * names it), written without a lease.  With the config's secret a record
 * is written signed for its key, and read only when its MAC checks.
 * kv_elect_put_rec: 0, or etcd's error (logged).  kv_elect_get_rec: 0
 * with *val malloc'd and NUL-terminated (the body, without its MAC),
 * -ENOENT, -ENOMSG (not signed) or -EBADMSG (a wrong MAC), logged, or
 * etcd's error.  Each call makes its own connection: any thread may call
 * them.
 */
int kv_elect_put_rec(struct kv_elect *el, const char *what, const char *val,
		     size_t vlen);
int kv_elect_get_rec(struct kv_elect *el, const char *what, char **val,
		     size_t *vlen);

/* the string member name of a leader's JSON value: 0, or -ENOENT (none,
 * empty, or too long for len) */
int kv_elect_field(const char *value, const char *name, char *out, size_t len);

#endif /* KVFS_ELECT_H */

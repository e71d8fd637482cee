/*
 * ctl_client.h - the client side of kvfsd's control socket (src/ctlproto.h
 * has the protocol), shared by kvctl, kvbench and libkvfs.
 */
#ifndef KVFS_CTL_CLIENT_H
#define KVFS_CTL_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "src/common/hash.h"

struct kvfs_ctl;

/*
 * Connect to the daemon behind target: a mountpoint (its control socket
 * path is read from the mount root's "user.kvfs.socket" xattr) or the
 * socket path itself.  -ENOENT / -ECONNREFUSED when no daemon answers;
 * err gets one human-readable line.
 */
int kvfs_ctl_connect(const char *target, struct kvfs_ctl **out, char *err,
		     size_t errlen);
void kvfs_ctl_close(struct kvfs_ctl *c);

/* one request line (no newline) -> one response line (malloc'd, no
 * newline, caller frees); -EIO/-EPIPE when the daemon went away */
int kvfs_ctl_call(struct kvfs_ctl *c, const char *req, char **resp);

/*
 * Send a request whose response does not matter (an unmap): it is read
 * and dropped by the next kvfs_ctl_call, whose own request goes out
 * first, so both cost one round trip.  At most KVFS_CTL_POST_MAX are
 * owed at once (then this call reads them).  Transport errors as
 * kvfs_ctl_call.
 */
#define KVFS_CTL_POST_MAX 64u
int kvfs_ctl_post(struct kvfs_ctl *c, const char *req);
/* read the answers owed to posted requests: at 0 the daemon has served
 * every one of them (what a path around the socket, such as a write
 * through the mount, must wait for); 0 at once when none is owed or the
 * connection is closed already; transport errors as kvfs_ctl_call */
int kvfs_ctl_settle(struct kvfs_ctl *c);

/*
 * Longest cached prefix of hashes in ns, in one round trip; with
 * lease_ms > 0 the matched blocks are pinned under *lease (0 when none).
 * Returns the number of leading cached blocks or a negative errno.
 *
 * The lease is the protocol's "match" lease: it belongs to this
 * connection and is released when kvfs_ctl_close() (or the death of the
 * process) closes it, whichever comes before lease_ms.  At most
 * CTLP_HASHES_MAX hashes (-E2BIG) and CTLP_LEASE_MS_MAX ms (-EINVAL).  A
 * daemon's refusal is its negative errno (-ENOENT: unknown namespace).
 */
long kvfs_ctl_match(struct kvfs_ctl *c, const char *ns,
		    const uint8_t (*hashes)[KVFS_HASH_LEN], size_t n,
		    uint32_t lease_ms, uint64_t *lease);
int kvfs_ctl_unpin(struct kvfs_ctl *c, uint64_t lease);

/* ---- added for kvctl: the pieces the calls above are made of -------- */

struct kvfs_buf;
struct kvfs_json;

/* the socket path connected to (after resolving a mountpoint) */
const char *kvfs_ctl_path(const struct kvfs_ctl *c);

/*
 * kvfs_ctl_call, then parse: 0 with the response object in *resp (free
 * with kvfs_json_free) when it says "ok":true; the daemon's negative errno
 * when it says "ok":false, with its message in err; -EPROTO for a line
 * that is not a response; transport errors as kvfs_ctl_call.  When raw is
 * not NULL it receives the response line (caller frees) in every case
 * where one was read.
 */
int kvfs_ctl_request(struct kvfs_ctl *c, const char *req,
		     struct kvfs_json **resp, char **raw, char *err,
		     size_t errlen);

/*
 * Append "VERB NS [MS] HASH..." to b: the request of lookup (ms < 0: no
 * lease word), match and pin.  -EINVAL for a bad namespace, -E2BIG for
 * more than CTLP_HASHES_MAX hashes.
 */
int kvfs_ctl_prefix_req(struct kvfs_buf *b, const char *verb, const char *ns,
			long ms, const uint8_t (*hashes)[KVFS_HASH_LEN],
			size_t n);

#endif /* KVFS_CTL_CLIENT_H */

/*
 * ctl_client.c - the client side of the control socket (ctlproto.h).
 *
 * Blocking I/O with a timeout on each send and receive, so a wedged daemon
 * turns into -ETIMEDOUT instead of a hung kvctl.  SIGPIPE is never raised
 * (MSG_NOSIGNAL): a library must not kill its host because a daemon died.
 */
#include "config.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "src/common/ctl_client.h"
#include "src/common/ctlproto.h"
#include "src/common/json.h"

#define CTL_TIMEOUT_S 30
#define XATTR_SOCKET "user.kvfs.socket"

struct kvfs_ctl {
	int fd;
	unsigned owed; /* responses of kvfs_ctl_post requests not read yet */
	char *in;      /* bytes received past the last response */
	size_t in_len;
	size_t in_cap;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* "connection refused", as a clause inside a line */
static void errno_words(int e, char *out, size_t len)
{
	snprintf(out, len, "%s", strerror(e));
	if (out[0] && out[1] && !isupper((unsigned char)out[1]))
		out[0] = (char)tolower((unsigned char)out[0]);
}

/* ---- finding the socket --------------------------------------------- */

/* the socket behind a mountpoint; -ENOENT when it is no kvfs mount */
static int socket_of_mount(const char *mount, char *path, size_t len, char *err,
			   size_t errlen)
{
	ssize_t n = getxattr(mount, XATTR_SOCKET, path, len - 1);

	if (n < 0 &&
	    (errno == ENODATA || errno == ENOTSUP || errno == EOPNOTSUPP)) {
		set_err(err, errlen, "no kvfs daemon behind %s", mount);
		return -ENOENT;
	}
	if (n < 0) {
		int e = errno;
		char why[128];

		errno_words(e, why, sizeof(why));
		set_err(err, errlen, "%s: reading %s: %s", mount, XATTR_SOCKET,
			why);
		return -e;
	}
	path[n] = '\0';
	if (n == 0 || strlen(path) != (size_t)n) {
		set_err(err, errlen, "%s: bad %s", mount, XATTR_SOCKET);
		return -EPROTO;
	}
	return 0;
}

static int resolve(const char *target, char *path, size_t len, char *err,
		   size_t errlen)
{
	struct stat sb;
	char why[128];

	if (stat(target, &sb) < 0) {
		int e = errno;

		errno_words(e, why, sizeof(why));
		set_err(err, errlen, "no kvfs daemon at %s (%s)", target, why);
		return -e;
	}
	if (S_ISDIR(sb.st_mode))
		return socket_of_mount(target, path, len, err, errlen);
	if (!S_ISSOCK(sb.st_mode)) {
		set_err(err, errlen, "%s is neither a socket nor a kvfs mount",
			target);
		return -ENOTSOCK;
	}
	if (strlen(target) >= len) {
		set_err(err, errlen, "socket path too long: %s", target);
		return -ENAMETOOLONG;
	}
	memcpy(path, target, strlen(target) + 1);
	return 0;
}

static void set_timeouts(int fd)
{
	struct timeval tv = { .tv_sec = CTL_TIMEOUT_S };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int dial(struct kvfs_ctl *c, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char why[128];
	int e;

	if (strlen(c->path) >= sizeof(sa.sun_path)) {
		set_err(err, errlen, "socket path too long: %s", c->path);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, c->path, strlen(c->path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		e = errno;
		goto out_err;
	}
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		set_timeouts(c->fd);
		return 0;
	}
	e = errno;
	close(c->fd);
	c->fd = -1;
out_err:
	errno_words(e, why, sizeof(why));
	set_err(err, errlen, "no kvfs daemon at %s (%s)", c->path, why);
	return -e;
}

int kvfs_ctl_connect(const char *target, struct kvfs_ctl **out, char *err,
		     size_t errlen)
{
	struct kvfs_ctl *c;
	int rc;

	if (!target || !*target || !out) {
		set_err(err, errlen, "no control socket given");
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		set_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	c->fd = -1;
	rc = resolve(target, c->path, sizeof(c->path), err, errlen);
	if (!rc)
		rc = dial(c, err, errlen);
	if (rc) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void kvfs_ctl_close(struct kvfs_ctl *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->in);
	free(c);
}

const char *kvfs_ctl_path(const struct kvfs_ctl *c)
{
	return c ? c->path : NULL;
}

/* ---- one round trip ------------------------------------------------- */

static int io_errno(int e)
{
	if (e == EAGAIN || e == EWOULDBLOCK)
		return -ETIMEDOUT;
	if (e == ECONNRESET || e == EPIPE)
		return -EPIPE;
	return -e;
}

static int send_line(int fd, const char *req, size_t len)
{
	struct iovec iov[2] = {
		{ .iov_base = (void *)req, .iov_len = len },
		{ .iov_base = "\n", .iov_len = 1 },
	};
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };

	while (mh.msg_iovlen) {
		ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return io_errno(errno);
		while (mh.msg_iovlen && (size_t)n >= mh.msg_iov->iov_len) {
			n -= (ssize_t)mh.msg_iov->iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen) {
			mh.msg_iov->iov_base = (char *)mh.msg_iov->iov_base + n;
			mh.msg_iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

static int grow_in(struct kvfs_ctl *c)
{
	size_t cap;
	char *p;

	if (c->in_cap - c->in_len >= 4096)
		return 0;
	if (c->in_cap >= CTLP_RESP_MAX + 4096)
		return -EMSGSIZE;
	cap = c->in_cap ? c->in_cap * 2 : 16384;
	p = realloc(c->in, cap);
	if (!p)
		return -ENOMEM;
	c->in = p;
	c->in_cap = cap;
	return 0;
}

/* one response line into *resp (malloc'd, no "\n") */
static int recv_line(struct kvfs_ctl *c, char **resp)
{
	size_t scanned = 0;
	char *nl;
	int rc;

	for (;;) {
		ssize_t n;

		nl = c->in_len > scanned ? memchr(c->in + scanned, '\n',
						  c->in_len - scanned)
					 : NULL;
		if (nl)
			break;

		scanned = c->in_len;
		if (c->in_len > CTLP_RESP_MAX)
			return -EMSGSIZE;
		rc = grow_in(c);
		if (rc)
			return rc;
		n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return io_errno(errno);
		if (n == 0)
			return -EPIPE;
		c->in_len += (size_t)n;
	}
	*resp = strndup(c->in, (size_t)(nl - c->in));
	if (!*resp)
		return -ENOMEM;
	c->in_len -= (size_t)(nl - c->in) + 1;
	memmove(c->in, nl + 1, c->in_len);
	return 0;
}

static int check_req(struct kvfs_ctl *c, const char *req, size_t *len)
{
	if (c->fd < 0)
		return -EPIPE;
	*len = strlen(req);
	if (memchr(req, '\n', *len))
		return -EINVAL;
	if (*len + 1 > CTLP_LINE_MAX)
		return -E2BIG;
	return 0;
}

/* read and drop the responses owed to posted requests */
static int settle(struct kvfs_ctl *c)
{
	while (c->owed) {
		char *line = NULL;
		int rc = recv_line(c, &line);

		free(line);
		if (rc)
			return rc;
		c->owed--;
	}
	return 0;
}

int kvfs_ctl_settle(struct kvfs_ctl *c)
{
	int rc;

	if (!c)
		return -EINVAL;
	if (c->fd < 0 || !c->owed)
		return 0; /* nothing is owed, or nothing can come */
	rc = settle(c);
	if (rc) {
		close(c->fd);
		c->fd = -1;
	}
	return rc;
}

int kvfs_ctl_post(struct kvfs_ctl *c, const char *req)
{
	size_t len;
	int rc;

	if (!c || !req)
		return -EINVAL;
	rc = check_req(c, req, &len);
	if (rc)
		return rc;
	/* bounded, so that the daemon never blocks on responses we have
	 * not read (it stops reading us until they are out) */
	if (c->owed >= KVFS_CTL_POST_MAX)
		rc = settle(c);
	if (!rc)
		rc = send_line(c->fd, req, len);
	if (!rc)
		c->owed++;
	if (rc) {
		close(c->fd);
		c->fd = -1;
	}
	return rc;
}

int kvfs_ctl_call(struct kvfs_ctl *c, const char *req, char **resp)
{
	bool fresh = c && !c->owed && !c->in_len;
	size_t len;
	int rc;

	if (!c || !req || !resp)
		return -EINVAL;
	rc = check_req(c, req, &len);
	if (rc)
		return rc;
	/* sent first: it travels with the posted ones, one round trip */
	rc = send_line(c->fd, req, len);
	if (!rc)
		rc = settle(c);
	if (!rc)
		rc = recv_line(c, resp);
	/*
	 * Closed before a byte of the answer, with nothing else owed: the
	 * daemon let an idle connection go (it only does that to one that
	 * holds nothing, and never after reading a request), or restarted.
	 * The request was not run, so it goes once more on a new one.
	 */
	if (rc == -EPIPE && fresh && !c->in_len) {
		close(c->fd);
		/* no daemon to dial: still the daemon gone, EPIPE */
		rc = dial(c, NULL, 0) ? -EPIPE : 0;
		if (!rc)
			rc = send_line(c->fd, req, len);
		if (!rc)
			rc = recv_line(c, resp);
	}
	if (rc) {
		/* the stream is out of step now: no later call may read
		 * this request's response as its own */
		close(c->fd);
		c->fd = -1;
	}
	return rc;
}

/* "ok":false -> its negative errno and message */
static int resp_error(const struct kvfs_json *j, char *err, size_t errlen)
{
	const char *msg = kvfs_json_str(kvfs_json_get(j, "message"));
	uint64_t e;

	if (kvfs_json_u64(kvfs_json_get(j, "errno"), &e) || e == 0 ||
	    e > 4095) {
		set_err(err, errlen, "bad error response from the daemon");
		return -EPROTO;
	}
	set_err(err, errlen, "%s", msg ? msg : strerror((int)e));
	return -(int)e;
}

int kvfs_ctl_request(struct kvfs_ctl *c, const char *req,
		     struct kvfs_json **resp, char **raw, char *err,
		     size_t errlen)
{
	struct kvfs_json *j = NULL;
	const struct kvfs_json *ok;
	char *line = NULL;
	int rc;

	if (raw)
		*raw = NULL;
	rc = kvfs_ctl_call(c, req, &line);
	if (rc) {
		char why[128];

		errno_words(-rc, why, sizeof(why));
		set_err(err, errlen, "talking to the daemon at %s: %s",
			c ? c->path : "?", why);
		return rc;
	}
	rc = kvfs_json_parse(line, strlen(line), &j);
	ok = rc ? NULL : kvfs_json_get(j, "ok");
	if (!ok || ok->type != KVFS_JSON_BOOL) {
		set_err(err, errlen, "bad response from the daemon at %s",
			c->path);
		rc = rc == -ENOMEM ? rc : -EPROTO;
	} else if (!ok->b) {
		rc = resp_error(j, err, errlen);
	}
	if (rc || !resp)
		kvfs_json_free(j);
	else
		*resp = j;
	if (raw)
		*raw = line;
	else
		free(line);
	return rc;
}

/* ---- requests ------------------------------------------------------- */

int kvfs_ctl_prefix_req(struct kvfs_buf *b, const char *verb, const char *ns,
			long ms, const uint8_t (*hashes)[KVFS_HASH_LEN],
			size_t n)
{
	char hex[KVFS_HASH_HEX_LEN + 1];

	if (kvfs_ns_valid(ns) || (!hashes && n))
		return -EINVAL;
	if (n > CTLP_HASHES_MAX)
		return -E2BIG;
	kvfs_buf_puts(b, verb);
	kvfs_buf_puts(b, " ");
	kvfs_ctlp_pct_encode(b, ns, strlen(ns));
	if (ms >= 0)
		kvfs_buf_printf(b, " %ld", ms);
	for (size_t i = 0; i < n; i++) {
		kvfs_hash_to_hex(hashes[i], hex);
		kvfs_buf_add(b, " ", 1);
		kvfs_buf_add(b, hex, KVFS_HASH_HEX_LEN);
	}
	return b->err;
}

long kvfs_ctl_match(struct kvfs_ctl *c, const char *ns,
		    const uint8_t (*hashes)[KVFS_HASH_LEN], size_t n,
		    uint32_t lease_ms, uint64_t *lease)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	struct kvfs_json *j;
	uint64_t count;
	int rc;

	if (lease)
		*lease = 0;
	if (!c || (lease_ms && !lease) || lease_ms > CTLP_LEASE_MS_MAX)
		return -EINVAL;
	rc = kvfs_ctl_prefix_req(&b, lease_ms ? "match" : "lookup", ns,
				 lease_ms ? (long)lease_ms : -1, hashes, n);
	if (!rc)
		rc = kvfs_ctl_request(c, b.p, &j, NULL, NULL, 0);
	kvfs_buf_release(&b);
	if (rc)
		return rc;
	if (kvfs_json_u64(kvfs_json_get(j, "count"), &count) || count > n ||
	    (lease_ms && kvfs_json_u64(kvfs_json_get(j, "lease"), lease)))
		rc = -EPROTO;
	kvfs_json_free(j);
	return rc ? rc : (long)count;
}

int kvfs_ctl_unpin(struct kvfs_ctl *c, uint64_t lease)
{
	char req[64];

	if (!c || !lease)
		return -EINVAL;
	snprintf(req, sizeof(req), "unpin %llu", (unsigned long long)lease);
	return kvfs_ctl_request(c, req, NULL, NULL, NULL, 0);
}

/*
 * ctl.c - the control socket's server: bind, the epoll loop, connections.
 * Commands are in ctl_cmd.c; ctl_int.h says why one thread serves all.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "src/common/clock.h"
#include "fuse/ctl_int.h"
#include "src/common/log.h"

#define ACCEPT_PAUSE_NS 100000000ull /* out of fds: retry in 100 ms */
#define LISTEN_BACKLOG 64
#define IN_KEEP 65536 /* input buffer kept between requests */

/* epoll tags for the fds that are not clients */
static char tag_listen, tag_stop, tag_job;

/* ---- binding -------------------------------------------------------- */

static int make_addr(const char *path, struct sockaddr_un *sa)
{
	size_t len = strlen(path);

	if (len == 0)
		return -EINVAL;
	if (len >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, path, len + 1);
	return 0;
}

/*
 * Somebody's socket file is at sa: is a daemon behind it?  0 when nobody
 * answers (the file is stale), -EADDRINUSE when somebody does (a full
 * backlog, EAGAIN, is somebody too), -EEXIST when the path is not a
 * socket at all: that file is not ours to remove.
 */
static int probe_stale(const struct sockaddr_un *sa)
{
	struct stat sb;
	int fd, rc;

	if (lstat(sa->sun_path, &sb) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(sb.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
	if (rc == 0)
		rc = -EADDRINUSE;
	else if (errno == ECONNREFUSED || errno == ENOENT)
		rc = 0;
	else if (errno == EAGAIN || errno == EINPROGRESS)
		rc = -EADDRINUSE;
	else
		rc = -errno;
	close(fd);
	return rc;
}

/* bind fd to sa, replacing a stale socket file once */
static int bind_path(int fd, const struct sockaddr_un *sa)
{
	int rc;

	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
		return 0;
	if (errno != EADDRINUSE)
		return -errno;
	rc = probe_stale(sa);
	if (rc < 0)
		return rc;
	kvfs_info("replacing stale control socket %s", sa->sun_path);
	if (unlink(sa->sun_path) < 0 && errno != ENOENT)
		return -errno;
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0)
		return -errno;
	return 0;
}

static int listen_on(struct ctl_server *srv, mode_t mode)
{
	struct sockaddr_un sa;
	struct stat sb;
	mode_t old_mask;
	int rc;

	rc = make_addr(srv->path, &sa);
	if (rc < 0)
		return rc;
	if (lstat(srv->path, &sb) == 0 && S_ISLNK(sb.st_mode)) {
		kvfs_err("control socket %s is a symbolic link; refusing it",
			 srv->path);
		return -ELOOP;
	}
	srv->lfd =
		socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (srv->lfd < 0)
		return -errno;
	/*
	 * The mode is set before the file exists, never by path after (a
	 * chmod by name follows whatever link is put there meanwhile): bind
	 * makes the file with the socket inode's mode less umask, so give
	 * both the mode wanted; connecting needs write permission, which
	 * the usual umask does not grant to others.  The umask is the
	 * whole process's: loosen it only by the bits mode grants, only
	 * for the bind.
	 */
	if (fchmod(srv->lfd, mode) < 0)
		return -errno;
	old_mask = umask(0777);
	umask(old_mask & ~mode);
	rc = bind_path(srv->lfd, &sa);
	umask(old_mask);
	if (rc < 0)
		return rc;
	if (lstat(srv->path, &sb) < 0 || listen(srv->lfd, LISTEN_BACKLOG) < 0) {
		rc = -errno;
		unlink(srv->path);
		return rc;
	}
	srv->dev = sb.st_dev;
	srv->ino = sb.st_ino;
	return 0;
}

/* ---- connections ---------------------------------------------------- */

static int conn_set_events(struct ctl_server *srv, struct ctl_conn *c,
			   uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = c };

	if (c->events == events)
		return 0;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
		return -errno;
	c->events = events;
	return 0;
}

/* releasing on close is what keeps a dead engine from pinning blocks
 * until its leases expire */
static void conn_close(struct ctl_server *srv, struct ctl_conn *c)
{
	for (size_t i = 0; i < c->nleases; i++)
		kv_store_lease_release(srv->st, c->leases[i].id);
	/* the same for maps (their slots may be reused once the client is
	 * gone, and its mapping went with it) and for unfinished writers */
	for (size_t i = 0; i < c->nmaps; i++)
		if (!c->maps[i].dead)
			kv_store_put(srv->st, &c->maps[i].ref);
	for (size_t i = 0; i < c->nwriters; i++)
		kv_store_abort(srv->st, c->writers[i].wh);
	epoll_ctl(srv->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	srv->nconns--;
	free(c->leases);
	free(c->maps);
	free(c->writers);
	free(c->in);
	free(c->out);
	free(c);
}

/* ---- connection leases --------------------------------------------- */

static void lease_prune(struct ctl_conn *c)
{
	uint64_t now = kvfs_mono_ns();

	for (size_t i = 0; i < c->nleases;)
		if (c->leases[i].expires_ns <= now)
			c->leases[i] = c->leases[--c->nleases];
		else
			i++;
}

int ctl_lease_room(const struct ctl_server *srv, struct ctl_conn *c)
{
	size_t max = srv->lim.conn_leases ? srv->lim.conn_leases : SIZE_MAX;
	struct ctl_lease *p;
	size_t cap;

	if (c->nleases >= max)
		lease_prune(c);
	if (c->nleases >= max)
		return -EAGAIN;
	if (c->nleases < c->leases_cap)
		return 0;
	cap = c->leases_cap ? c->leases_cap * 2 : 16;
	p = realloc(c->leases, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	c->leases = p;
	c->leases_cap = cap;
	return 0;
}

/* grow an array of n used entries of size sz toward want more, up to
 * max entries */
static int room(void **arr, size_t n, size_t want, size_t *cap, size_t sz,
		size_t max)
{
	size_t ncap;
	void *p;

	if (n > max || want > max - n)
		return -EAGAIN;
	if (n + want <= *cap)
		return 0;
	ncap = *cap ? *cap : 16;
	while (ncap < n + want)
		ncap *= 2;
	p = realloc(*arr, ncap * sz);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

/* ---- maps ------------------------------------------------------------ */

/* squeeze the holes out, keeping the id order */
static void map_compact(struct ctl_conn *c)
{
	size_t j = 0;

	for (size_t i = 0; i < c->nmaps; i++)
		if (!c->maps[i].dead)
			c->maps[j++] = c->maps[i];
	c->nmaps = j;
	c->maps_dead = 0;
}

int ctl_map_room(const struct ctl_server *srv, struct ctl_conn *c, size_t n)
{
	size_t max = srv->lim.conn_maps ? srv->lim.conn_maps : SIZE_MAX;

	if (ctl_map_count(c) > max || n > max - ctl_map_count(c))
		return -EAGAIN;
	if (c->maps_dead && c->nmaps + n > c->maps_cap)
		map_compact(c);
	return room((void **)&c->maps, c->nmaps, n, &c->maps_cap,
		    sizeof(*c->maps), SIZE_MAX / sizeof(*c->maps));
}

void ctl_map_add(struct ctl_conn *c, uint64_t id, const struct kv_ref *ref)
{
	struct ctl_map *m = &c->maps[c->nmaps++];

	m->id = id;
	m->ref = *ref;
	m->dead = false;
}

/* the entry with this id, holes included, or NULL: a binary search, as
 * ids only grow and entries are added in id order */
static struct ctl_map *map_at(struct ctl_conn *c, uint64_t id)
{
	size_t lo = 0, hi = c->nmaps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->maps[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < c->nmaps && c->maps[lo].id == id ? &c->maps[lo] : NULL;
}

int ctl_map_unmap(struct ctl_server *srv, struct ctl_conn *c,
		  const uint64_t *ids, size_t n, size_t *bad)
{
	struct ctl_map *m;
	size_t i;

	/* mark first: a map named twice is a hole the second time */
	for (i = 0; i < n; i++) {
		m = map_at(c, ids[i]);
		if (!m || m->dead)
			break;
		m->dead = true;
	}
	if (i < n) {
		*bad = i;
		while (i--)
			map_at(c, ids[i])->dead = false;
		return -ENOENT;
	}
	for (i = 0; i < n; i++)
		kv_store_put(srv->st, &map_at(c, ids[i])->ref);
	c->maps_dead += n;
	if (c->maps_dead >= c->nmaps / 2)
		map_compact(c);
	return 0;
}

void ctl_map_drop_last(struct ctl_server *srv, struct ctl_conn *c, size_t n)
{
	while (n--)
		kv_store_put(srv->st, &c->maps[--c->nmaps].ref);
}

int ctl_writer_room(struct ctl_conn *c)
{
	return room((void **)&c->writers, c->nwriters, 1, &c->writers_cap,
		    sizeof(*c->writers), CTL_CONN_WRITERS_MAX);
}

bool ctl_conn_holds(const struct ctl_conn *c)
{
	/* an expired lease entry counts: it is pruned only when the array
	 * is full, and keeping such a client a little longer costs little */
	return c->busy || c->nleases || ctl_map_count(c) || c->nwriters;
}

void ctl_lease_track(struct ctl_conn *c, uint64_t id, uint64_t expires_ns)
{
	c->leases[c->nleases].id = id;
	c->leases[c->nleases].expires_ns = expires_ns;
	c->nleases++;
}

static struct ctl_lease *conn_lease(struct ctl_conn *c, uint64_t id)
{
	for (size_t i = 0; i < c->nleases; i++)
		if (c->leases[i].id == id)
			return &c->leases[i];
	return NULL;
}

/* the client that took a lease is nearly always the one that unpins or
 * renews it: look there first */
static struct ctl_lease *lease_find(struct ctl_server *srv, struct ctl_conn *c,
				    uint64_t id, struct ctl_conn **owner)
{
	struct ctl_lease *l = conn_lease(c, id);

	*owner = c;
	for (struct ctl_conn *o = srv->conns; !l && o; o = o->next) {
		if (o == c)
			continue;
		l = conn_lease(o, id);
		*owner = o;
	}
	return l;
}

void ctl_lease_forget(struct ctl_server *srv, struct ctl_conn *c, uint64_t id)
{
	struct ctl_conn *o;
	struct ctl_lease *l = lease_find(srv, c, id, &o);

	if (l)
		*l = o->leases[--o->nleases];
}

void ctl_lease_renewed(struct ctl_server *srv, struct ctl_conn *c, uint64_t id,
		       uint64_t expires_ns)
{
	struct ctl_conn *o;
	struct ctl_lease *l = lease_find(srv, c, id, &o);

	if (l)
		l->expires_ns = expires_ns;
}

/* over a cap: say why, best effort (the socket is fresh, the line is
 * short, so it fits the socket buffer), and hang up */
static void refuse_client(int fd, const char *why)
{
	struct kvfs_buf b = KVFS_BUF_INIT;

	ctl_cmd_error(&b, EMFILE, why);
	if (!b.err)
		(void)!send(fd, b.p, b.len, MSG_NOSIGNAL | MSG_DONTWAIT);
	kvfs_buf_release(&b);
	close(fd);
}

static void accept_pause(struct ctl_server *srv, int err)
{
	struct epoll_event ev = { .events = 0, .data.ptr = &tag_listen };

	kvfs_warn("control socket: accept: %s; pausing", strerror(err));
	epoll_ctl(srv->epfd, EPOLL_CTL_MOD, srv->lfd, &ev);
	srv->accept_paused = true;
	srv->resume_ns = kvfs_mono_ns() + ACCEPT_PAUSE_NS;
}

static void accept_resume(struct ctl_server *srv)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &tag_listen };

	if (!srv->accept_paused || kvfs_mono_ns() < srv->resume_ns)
		return;
	epoll_ctl(srv->epfd, EPOLL_CTL_MOD, srv->lfd, &ev);
	srv->accept_paused = false;
}

static int conn_add(struct ctl_server *srv, int fd, const struct ucred *cred)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct ctl_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->id = ++srv->next_conn;
	c->fd = fd;
	c->uid = cred->uid;
	c->pid = cred->pid;
	c->last_ns = kvfs_mono_ns();
	c->events = EPOLLIN;
	ev.data.ptr = c;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		free(c);
		return -errno;
	}
	c->next = srv->conns;
	if (srv->conns)
		srv->conns->prev = c;
	srv->conns = c;
	srv->nconns++;
	return 0;
}

/*
 * Close the connection of uid (any uid: NULL) that has been idle longest,
 * if it holds nothing and has been idle CTL_EVICT_IDLE_MS at least; false
 * when there is none.  This is what keeps idle clients from holding every
 * slot before their idle timeout comes: a client that holds nothing
 * loses nothing by its close but the socket.
 */
static bool evict_idle(struct ctl_server *srv, const uid_t *uid)
{
	uint64_t now = kvfs_mono_ns();
	struct ctl_conn *victim = NULL;

	for (struct ctl_conn *c = srv->conns; c; c = c->next) {
		if ((uid && c->uid != *uid) || ctl_conn_holds(c) ||
		    now - c->last_ns < CTL_EVICT_IDLE_MS * 1000000ull)
			continue;
		if (!victim || c->last_ns < victim->last_ns)
			victim = c;
	}
	if (!victim)
		return false;
	kvfs_debug("control socket: closing idle client (uid %u, pid %d) "
		   "for a new one",
		   (unsigned)victim->uid, (int)victim->pid);
	conn_close(srv, victim);
	return true;
}

static unsigned uid_conns(const struct ctl_server *srv, uid_t uid)
{
	unsigned n = 0;

	for (const struct ctl_conn *c = srv->conns; c; c = c->next)
		n += c->uid == uid;
	return n;
}

/* a slot for a client of cred->uid: 0, or -EMFILE with why filled in */
static int admit(struct ctl_server *srv, const struct ucred *cred, char *why,
		 size_t len)
{
	unsigned max = srv->lim.uid_clients;

	if (max && uid_conns(srv, cred->uid) >= max &&
	    !evict_idle(srv, &cred->uid)) {
		snprintf(why, len,
			 "uid %u has %u control connections (kvfsd -o "
			 "ctl_uid_clients)",
			 (unsigned)cred->uid, max);
		return -EMFILE;
	}
	if (srv->nconns >= CTL_MAX_CLIENTS && !evict_idle(srv, NULL)) {
		snprintf(why, len, "too many control clients (%u)",
			 CTL_MAX_CLIENTS);
		return -EMFILE;
	}
	return 0;
}

/*
 * Runs after the loop has handled every event of its turn: admitting a
 * client may close another one, whose event may still be in that turn's
 * list.
 */
static void accept_clients(struct ctl_server *srv)
{
	for (;;) {
		int fd = accept4(srv->lfd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ucred cred = { .pid = 0, .uid = (uid_t)-1 };
		socklen_t len = sizeof(cred);
		char why[128];

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				accept_pause(srv, errno);
			/* EAGAIN: all taken; others (ECONNABORTED) are
			 * the client's problem */
			return;
		}
		/* a unix socket always has its peer's credentials; should
		 * it not, the client counts as uid -1, a stranger to all */
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
			cred = (struct ucred){ .pid = 0, .uid = (uid_t)-1 };
		if (admit(srv, &cred, why, sizeof(why)) < 0)
			refuse_client(fd, why);
		else if (conn_add(srv, fd, &cred) < 0)
			close(fd);
	}
}

/* ---- idle clients ---------------------------------------------------- */

/* when the first connection that may time out does (UINT64_MAX: none) */
static uint64_t idle_deadline(const struct ctl_server *srv)
{
	uint64_t idle = (uint64_t)srv->lim.idle_s * 1000000000ull;
	uint64_t first = UINT64_MAX;

	if (!idle)
		return first;
	for (const struct ctl_conn *c = srv->conns; c; c = c->next)
		if (!ctl_conn_holds(c) && c->last_ns + idle < first)
			first = c->last_ns + idle;
	return first;
}

/* close the connections idle past lim.idle_s that hold nothing; also
 * after the turn's events, for the same reason as accept_clients */
static void idle_sweep(struct ctl_server *srv)
{
	uint64_t idle = (uint64_t)srv->lim.idle_s * 1000000000ull;
	uint64_t now = kvfs_mono_ns();
	struct ctl_conn *c, *next;
	unsigned n = 0;

	if (!idle)
		return;
	for (c = srv->conns; c; c = next) {
		next = c->next;
		if (ctl_conn_holds(c) || now - c->last_ns < idle)
			continue;
		kvfs_debug("control socket: closing a client idle for %u s "
			   "(uid %u, pid %d)",
			   srv->lim.idle_s, (unsigned)c->uid, (int)c->pid);
		conn_close(srv, c);
		n++;
	}
	/* one line a sweep: a crowd of idle clients must not flood the
	 * log */
	if (n)
		kvfs_info("control socket: closed %u client%s idle for %u s", n,
			  n == 1 ? "" : "s", srv->lim.idle_s);
}

/* ---- serving -------------------------------------------------------- */

/* send what is queued; 0 when all is out, 1 when the socket is full */
static int conn_flush(struct ctl_conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off,
				 c->out_len - c->out_off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 1;
		if (n < 0)
			return -errno;
		c->out_off += (size_t)n;
	}
	free(c->out);
	c->out = NULL;
	c->out_len = c->out_off = 0;
	return 0;
}

static void conn_queue(struct ctl_conn *c, struct kvfs_buf *b)
{
	char *text;
	size_t len;

	if (kvfs_buf_finish(b, &text, &len) < 0) {
		/* no memory for the response: the client would wait for an
		 * answer forever, so hang up instead */
		c->closing = true;
		return;
	}
	c->out = text;
	c->out_len = len;
	c->out_off = 0;
}

/* a big request's buffer is not kept around for the next small one */
static void conn_consume(struct ctl_conn *c, size_t n)
{
	c->in_len -= n;
	memmove(c->in, c->in + n, c->in_len);
	if (c->in_len == 0 && c->in_cap > IN_KEEP) {
		free(c->in);
		c->in = NULL;
		c->in_cap = 0;
	}
}

/*
 * Serve the next complete line, if any: 1 when one was served (its
 * response queued), 0 when no complete line is buffered.
 */
static int conn_serve_one(struct ctl_server *srv, struct ctl_conn *c)
{
	struct kvfs_buf b = KVFS_BUF_INIT;
	char *nl;
	size_t len;

	nl = c->in_len ? memchr(c->in, '\n', c->in_len) : NULL;
	if (!nl) {
		if (c->in_len < CTLP_LINE_MAX)
			return 0;
		ctl_cmd_error(&b, E2BIG, "request longer than 1048576 bytes");
		conn_queue(c, &b);
		c->closing = true;
		c->in_len = 0;
		return 1;
	}
	len = (size_t)(nl - c->in);
	*nl = '\0';
	c->last_ns = kvfs_mono_ns();
	if (len && c->in[len - 1] == '\r')
		c->in[--len] = '\0';
	srv->requests++;
	ctl_cmd_serve(srv, c, c->in, len, &b);
	if (c->busy) /* a job answers it (ctl_job_start) */
		kvfs_buf_release(&b);
	else
		conn_queue(c, &b);
	conn_consume(c, (size_t)(nl - c->in) + 1);
	return 1;
}

/* read what the socket has, up to one request's worth; -errno or 0 */
static int conn_read(struct ctl_conn *c)
{
	while (!c->eof && c->in_len < CTLP_LINE_MAX) {
		size_t want = CTLP_LINE_MAX - c->in_len;
		ssize_t n;

		if (want > CTL_READ_CHUNK)
			want = CTL_READ_CHUNK;
		if (c->in_cap - c->in_len < want) {
			size_t cap = c->in_len + want;
			char *p = realloc(c->in, cap);

			if (!p)
				return -ENOMEM;
			c->in = p;
			c->in_cap = cap;
		}
		n = recv(c->fd, c->in + c->in_len, want, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n < 0)
			return -errno;
		if (n == 0)
			c->eof = true;
		c->in_len += (size_t)n;
		/* a full line is enough: leave the rest to the kernel so a
		 * pipelining client is held back by its socket buffer */
		if (memchr(c->in + c->in_len - (size_t)n, '\n', (size_t)n))
			return 0;
	}
	return 0;
}

/*
 * Move c forward as far as it goes without blocking: send, serve up to
 * CTL_BATCH buffered requests, read.  Returns -1 when c was closed, 1 when
 * complete requests are still buffered (come back without waiting for
 * epoll), else 0.
 */
static int conn_step(struct ctl_server *srv, struct ctl_conn *c, bool readable)
{
	int rc, served = 0;

	if (readable && conn_read(c) < 0)
		goto out_close;
	for (;;) {
		rc = conn_flush(c);
		if (rc < 0)
			goto out_close;
		if (rc > 0)
			return conn_set_events(srv, c, EPOLLOUT) < 0 ? -1 : 0;
		if (c->closing)
			goto out_close;
		if (c->busy) {
			/* its job answers first, even after the client shut
			 * its writing side (EOF).  No events: HUP (it hung
			 * up for good, conn_event) and ERR come anyway */
			return conn_set_events(srv, c, 0) < 0 ? -1 : 0;
		}
		if (served == CTL_BATCH)
			return 1;
		if (!conn_serve_one(srv, c))
			break;
		served++;
	}
	if (c->eof)
		goto out_close; /* a partial last line is no request */
	/* reading stopped at a full buffer: the check above ends it */
	return conn_set_events(srv, c, EPOLLIN) < 0 ? -1 : 0;
out_close:
	conn_close(srv, c);
	return -1;
}

static void conn_event(struct ctl_server *srv, struct ctl_conn *c,
		       uint32_t events)
{
	/* EPOLLHUP with data still buffered: read it, serve, then close;
	 * but a client gone while its job runs is answered by nobody */
	if ((events & EPOLLERR) || ((events & EPOLLHUP) && c->busy)) {
		conn_close(srv, c);
		return;
	}
	conn_step(srv, c, events & (EPOLLIN | EPOLLHUP));
}

/* clients with complete requests left over from their last turn */
static bool serve_backlog(struct ctl_server *srv)
{
	struct ctl_conn *c, *next;
	bool more = false;

	for (c = srv->conns; c; c = next) {
		next = c->next;
		if (c->out_len || !c->in_len || !memchr(c->in, '\n', c->in_len))
			continue;
		if (conn_step(srv, c, false) > 0)
			more = true;
	}
	return more;
}

/* ---- jobs ----------------------------------------------------------- */

static void *job_main(void *arg)
{
	struct ctl_job *j = arg;
	struct ctl_server *srv = j->srv;
	uint64_t one = 1;

	j->run(j->arg, &srv->stopping, &j->out);
	/* the last touch of srv is under the lock: stop frees it once
	 * njobs is 0 */
	pthread_mutex_lock(&srv->job_mu);
	j->next = srv->done;
	srv->done = j;
	(void)!write(srv->jfd, &one, sizeof(one));
	srv->njobs--;
	pthread_cond_broadcast(&srv->job_cv);
	pthread_mutex_unlock(&srv->job_mu);
	return NULL;
}

int ctl_job_start(struct ctl_server *srv, struct ctl_conn *c, ctl_job_fn *run,
		  void *arg)
{
	struct ctl_job *j = calloc(1, sizeof(*j));
	sigset_t all, old;
	pthread_attr_t at;
	pthread_t t;
	int rc;

	if (!j)
		return -ENOMEM;
	pthread_mutex_lock(&srv->job_mu);
	rc = srv->njobs < CTL_JOBS_MAX ? 0 : -EAGAIN;
	if (!rc)
		srv->njobs++;
	pthread_mutex_unlock(&srv->job_mu);
	if (rc) {
		free(j);
		return rc;
	}
	j->srv = srv;
	j->conn_id = c->id;
	j->run = run;
	j->arg = arg;
	/* detached, signals blocked (kvfsd's main thread takes them) */
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&t, &at, job_main, j);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&at);
	if (rc) {
		free(j);
		pthread_mutex_lock(&srv->job_mu);
		srv->njobs--;
		pthread_mutex_unlock(&srv->job_mu);
		return rc;
	}
	c->busy = true;
	return 0;
}

/* answer the clients whose jobs are done, if they are still here */
static void jobs_deliver(struct ctl_server *srv)
{
	struct ctl_job *j, *next;
	struct ctl_conn *c;
	uint64_t n;

	(void)!read(srv->jfd, &n, sizeof(n));
	pthread_mutex_lock(&srv->job_mu);
	j = srv->done;
	srv->done = NULL;
	pthread_mutex_unlock(&srv->job_mu);
	for (; j; j = next) {
		next = j->next;
		for (c = srv->conns; c && c->id != j->conn_id; c = c->next)
			;
		if (c) {
			c->busy = false;
			conn_queue(c, &j->out); /* takes the buffer */
			conn_step(srv, c, false);
		} else {
			kvfs_buf_release(&j->out);
		}
		free(j);
	}
}

static int loop_timeout(const struct ctl_server *srv, bool backlog)
{
	uint64_t now, first = idle_deadline(srv);

	if (backlog)
		return 0;
	if (srv->accept_paused && srv->resume_ns < first)
		first = srv->resume_ns;
	if (first == UINT64_MAX)
		return -1;
	now = kvfs_mono_ns();
	if (now >= first)
		return 0;
	/* capped so that the ms count fits an int */
	return first - now > 3600000000000ull
		       ? 3600000
		       : (int)((first - now) / 1000000 + 1);
}

static void *ctl_loop(void *arg)
{
	struct ctl_server *srv = arg;
	struct epoll_event ev[64];
	bool backlog = false;

	for (;;) {
		bool accepting = false;
		int n = epoll_wait(srv->epfd, ev, 64,
				   loop_timeout(srv, backlog));

		if (n < 0 && errno != EINTR) {
			kvfs_err("control socket: epoll_wait: %s",
				 strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			void *p = ev[i].data.ptr;

			if (p == &tag_stop)
				return NULL;
			if (p == &tag_listen)
				accepting = true;
			else if (p == &tag_job)
				jobs_deliver(srv);
			else
				conn_event(srv, p, ev[i].events);
		}
		/* a client only ever closes itself in the turn, and epoll
		 * reports each fd once per wait, so no entry of ev[] is
		 * stale; closing others (a new client's room, idle ones)
		 * waits until the turn is over */
		if (accepting)
			accept_clients(srv);
		idle_sweep(srv);
		accept_resume(srv);
		backlog = serve_backlog(srv);
	}
	return NULL;
}

/* ---- start and stop ------------------------------------------------- */

static int info_valid(const char *info)
{
	struct kvfs_json *j;
	int rc = kvfs_json_parse(info, strlen(info), &j);

	if (rc < 0)
		return rc;
	rc = j->type == KVFS_JSON_OBJ ? 0 : -EINVAL;
	kvfs_json_free(j);
	return rc;
}

static int epoll_add(int epfd, int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* the loop thread takes no signals: kvfsd's main thread handles them */
static int start_thread(struct ctl_server *srv)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&srv->thread, NULL, ctl_loop, srv);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

static void srv_free(struct ctl_server *srv)
{
	if (srv->epfd >= 0)
		close(srv->epfd);
	if (srv->efd >= 0)
		close(srv->efd);
	if (srv->jfd >= 0)
		close(srv->jfd);
	pthread_mutex_destroy(&srv->job_mu);
	pthread_cond_destroy(&srv->job_cv);
	if (srv->lfd >= 0)
		close(srv->lfd);
	free(srv->info_json);
	free(srv->path);
	free(srv);
}

static int srv_setup(struct ctl_server *srv, mode_t mode)
{
	int rc;

	rc = listen_on(srv, mode);
	if (rc < 0)
		return rc;
	srv->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	srv->jfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	srv->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (srv->efd < 0 || srv->jfd < 0 || srv->epfd < 0) {
		rc = -errno;
		goto out_unlink;
	}
	rc = epoll_add(srv->epfd, srv->lfd, &tag_listen);
	if (!rc)
		rc = epoll_add(srv->epfd, srv->efd, &tag_stop);
	if (!rc)
		rc = epoll_add(srv->epfd, srv->jfd, &tag_job);
	if (!rc)
		rc = start_thread(srv);
	if (rc < 0)
		goto out_unlink;
	return 0;
out_unlink:
	unlink(srv->path);
	return rc;
}

void ctl_limits_default(struct ctl_limits *lim)
{
	*lim = (struct ctl_limits){
		.idle_s = CTL_IDLE_S_DEFAULT,
		.uid_clients = CTL_UID_CLIENTS_DEFAULT,
		.conn_leases = CTL_CONN_LEASES_DEFAULT,
		.uid_leases = CTL_UID_LEASES_DEFAULT,
		.conn_maps = CTL_CONN_MAPS_DEFAULT,
		.lease_max_ms = CTL_LEASE_MAX_MS_DEFAULT,
	};
}

int ctl_server_start(struct kv_store *st, const char *path, mode_t mode,
		     const char *info_json, struct ctl_server **out)
{
	return ctl_server_start_limits(st, path, mode, info_json, NULL, out);
}

int ctl_server_start_limits(struct kv_store *st, const char *path, mode_t mode,
			    const char *info_json, const struct ctl_limits *lim,
			    struct ctl_server **out)
{
	struct ctl_server *srv;
	int rc;

	if (!st || !path || !out)
		return -EINVAL;
	if (!info_json)
		info_json = "{}";
	rc = info_valid(info_json);
	if (rc < 0)
		return rc;
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->st = st;
	if (lim)
		srv->lim = *lim;
	else
		ctl_limits_default(&srv->lim);
	srv->lfd = srv->efd = srv->jfd = srv->epfd = -1;
	pthread_mutex_init(&srv->job_mu, NULL);
	pthread_cond_init(&srv->job_cv, NULL);
	srv->path = strdup(path);
	srv->info_json = strdup(info_json);
	if (!srv->path || !srv->info_json) {
		rc = -ENOMEM;
		goto out_free;
	}
	rc = srv_setup(srv, mode);
	if (rc < 0)
		goto out_free;
	*out = srv;
	return 0;
out_free:
	srv_free(srv);
	return rc;
}

/* a daemon that took the path over after us keeps its socket */
static void unlink_ours(const struct ctl_server *srv)
{
	struct stat sb;

	if (lstat(srv->path, &sb) == 0 && sb.st_dev == srv->dev &&
	    sb.st_ino == srv->ino)
		unlink(srv->path);
}

void ctl_server_set_cluster(struct ctl_server *srv,
			    const struct ctl_cluster_ops *ops)
{
	atomic_store(&srv->cluster, ops);
}

void ctl_server_stop(struct ctl_server *srv)
{
	uint64_t one = 1;

	if (!srv)
		return;
	/* running jobs give up on what is left; their answers go nowhere */
	atomic_store(&srv->stopping, true);
	/* an eventfd write of 1 cannot fail short of a counter overflow */
	(void)!write(srv->efd, &one, sizeof(one));
	pthread_join(srv->thread, NULL);
	pthread_mutex_lock(&srv->job_mu);
	while (srv->njobs)
		pthread_cond_wait(&srv->job_cv, &srv->job_mu);
	pthread_mutex_unlock(&srv->job_mu);
	for (struct ctl_job *j = srv->done, *next; j; j = next) {
		next = j->next;
		kvfs_buf_release(&j->out);
		free(j);
	}
	while (srv->conns)
		conn_close(srv, srv->conns);
	unlink_ours(srv);
	srv_free(srv);
}

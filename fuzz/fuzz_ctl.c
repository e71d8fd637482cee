/*
 * fuzz_ctl.c - libFuzzer target: arbitrary bytes down kvfsd's control
 * socket (src/common/ctlproto.h), served by the real server (fuse/ctl.c,
 * fuse/ctl_cmd.c) over a real store in a private directory.
 *
 * Each input is one client: its bytes are sent, the socket is shut for
 * writing, and everything the server answers is read until it closes.
 * Every answer line must be one JSON object ({"ok":...), and the server
 * must close the connection within a few seconds, whatever was sent.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fuse/ctl.h"
#include "kvstore/store.h"

static struct kv_store *st;
static struct ctl_server *srv;
static char dir[64], sock[128], pool[128];

static void cleanup(void)
{
	char cmd[160];

	if (srv)
		ctl_server_stop(srv);
	if (st)
		kv_store_close(st);
	unlink(pool);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz_ctl: could not remove %s\n", dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct kv_store_config cfg = { .slot_size = 4096, .nslots = 64 };
	char index[160];
	uint32_t ns;

	snprintf(dir, sizeof(dir), "%s/kvfs-fuzz-ctl.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		abort();
	snprintf(sock, sizeof(sock), "%s/ctl.sock", dir);
	snprintf(index, sizeof(index), "%s/index", dir);
	/* in the directory too: a crash (no atexit) leaves nothing else */
	snprintf(pool, sizeof(pool), "%s/pool", dir);
	cfg.pool_path = pool;
	cfg.index_dir = index;
	if (kv_store_open(&cfg, &st) < 0 ||
	    kv_store_ns_create(st, "m", 16, &ns) < 0 ||
	    ctl_server_start(st, sock, 0600, NULL, &srv) < 0)
		abort();
	atexit(cleanup);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 5 };
	static char buf[1 << 20];
	size_t got = 0;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ssize_t n;

	if (fd < 0)
		abort();
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		abort();
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (size)
		(void)send(fd, data, size, MSG_NOSIGNAL);
	shutdown(fd, SHUT_WR);
	while ((n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0) {
		got += (size_t)n;
		if (got == sizeof(buf) - 1)
			got = 0; /* keep reading; only the shape matters */
	}
	if (n < 0)
		abort(); /* the server did not close within 5 s */
	buf[got] = 0;
	for (char *line = buf; *line; line = strchr(line, '\n') + 1) {
		if (strncmp(line, "{\"ok\":", 6) != 0)
			abort(); /* not an answer of the protocol */
		if (!strchr(line, '\n'))
			break; /* the last one, cut by the buffer */
	}
	close(fd);
	return 0;
}

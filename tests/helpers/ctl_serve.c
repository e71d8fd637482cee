/*
 * ctl_serve - a control socket without FUSE, for tests/ctl_kvctl.sh.
 *
 *   ctl_serve DIR [NS BLOCK_TOKENS TOKEN...]
 *
 * Opens a store in DIR (pool file DIR/pool, index DIR/index; 64 slots of
 * 4096 bytes), optionally creates namespace NS and seals one block per
 * full block of the tokens (named by the kvfs v1 chain, each holding its
 * own name as bytes; skipped when NS exists, as after a restart over the
 * same DIR), serves DIR/ctl.sock, writes DIR/ready, and waits for
 * SIGTERM or SIGINT.  Then it stops the server, closes the store and exits
 * 0; the socket file is gone by then.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuse/ctl.h"
#include "src/common/hash.h"
#include "src/common/log.h"
#include "kvstore/store.h"
#include "src/common/tokens.h"

#define SLOT 4096
#define NSLOTS 64

static int seal_chain(struct kv_store *st, int argc, char **argv)
{
	uint8_t(*h)[KVFS_HASH_LEN] = NULL;
	uint32_t *tok = NULL, bt, id, wh;
	size_t ntok = 0;
	char err[256];
	long n;
	int rc = 0;

	bt = (uint32_t)strtoul(argv[1], NULL, 10);
	for (int i = 2; !rc && i < argc; i++)
		rc = kvfs_tokens_parse(argv[i], &tok, &ntok, err, sizeof(err));
	if (!rc)
		rc = kv_store_ns_create(st, argv[0], bt, &id);
	if (rc == -EEXIST) {
		/* a restart over the same DIR: the store kept the blocks */
		free(tok);
		return 0;
	}
	h = calloc(ntok / (bt ? bt : 1) + 1, KVFS_HASH_LEN);
	if (!rc && !h)
		rc = -ENOMEM;
	n = rc ? 0 : kvfs_hash_chain(argv[0], bt, tok, ntok, h, ntok / bt);
	for (long i = 0; !rc && i < n; i++) {
		rc = kv_store_create(st, id, h[i], i ? h[i - 1] : NULL, &wh);
		if (!rc)
			rc = kv_store_write(st, wh, 0, h[i], KVFS_HASH_LEN);
		if (!rc)
			rc = kv_store_seal(st, wh);
	}
	free(h);
	free(tok);
	if (rc)
		kvfs_err("seeding %s: %s", argv[0], strerror(-rc));
	return rc;
}

static int serve(const char *dir, int argc, char **argv, const sigset_t *set)
{
	char pool[4096], index[4096], sock[4096], ready[4096], info[128];
	struct kv_store_config cfg = {
		.pool_path = pool,
		.index_dir = index,
		.slot_size = SLOT,
		.nslots = NSLOTS,
		.reformat = true,
	};
	struct ctl_server *srv = NULL;
	struct kv_store *st = NULL;
	FILE *f;
	int rc, sig;

	snprintf(pool, sizeof(pool), "%s/pool", dir);
	snprintf(index, sizeof(index), "%s/index", dir);
	snprintf(sock, sizeof(sock), "%s/ctl.sock", dir);
	snprintf(ready, sizeof(ready), "%s/ready", dir);
	snprintf(info, sizeof(info),
		 "{\"program\":\"ctl_serve\",\"pid\":%d,\"version\":\"%s\"}",
		 (int)getpid(), PACKAGE_VERSION);
	rc = kv_store_open(&cfg, &st);
	if (rc)
		goto out_err;
	if (argc >= 2)
		rc = seal_chain(st, argc, argv);
	if (!rc)
		rc = ctl_server_start(st, sock, 0600, info, &srv);
	if (rc)
		goto out_close;
	f = fopen(ready, "w");
	if (f)
		fclose(f);
	sigwait(set, &sig);
	ctl_server_stop(srv);
out_close:
	kv_store_close(st);
out_err:
	if (rc)
		kvfs_err("%s", strerror(-rc));
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	sigset_t set;

	kvfs_log_init("ctl_serve", KVFS_LOG_WARN);
	if (argc < 2 || argc == 3) {
		fputs("usage: ctl_serve DIR [NS BLOCK_TOKENS TOKEN...]\n",
		      stderr);
		return 2;
	}
	/* blocked before any thread starts, so every thread inherits it and
	 * only sigwait() below takes them */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	return serve(argv[1], argc - 2, argv + 2, &set);
}

/*
 * engine.c - a toy inference engine on libkvfs (libkvfs(3)).
 *
 *   engine MOUNTPOINT NAMESPACE NTOKENS [SEED]
 *
 * It makes a prompt of NTOKENS tokens (SEED picks them), names its full
 * blocks with the kvfs hash chain, asks the node for the longest cached
 * prefix (pinned under a lease while it is read), maps the hits in one
 * request and checks their bytes, and "computes" each miss straight into a pool
 * slot with the zero-copy writer.  The KV bytes of a block are a function of
 * its hash, so a second run can verify what the first one stored.  It prints
 * "blocks N hits H misses M" and exits 0, or 1 on any error or a hit
 * whose bytes are wrong.
 *
 * It includes nothing of kvfs's build tree, only <kvfs.h>, so it builds
 * against the installed library as libkvfs(3) shows:
 *
 *   cc engine.c $(pkg-config --cflags --libs libkvfs) -o engine
 * (tests/example_build.sh does exactly that.)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvfs.h>

#define BLOCK_TOKENS 16 /* tokens per block of the namespace */
#define KV_BYTES 8192	/* KV bytes of one block, made up */
#define LEASE_MS 30000

/* the made-up KV bytes of block h */
static void kv_fill(uint8_t *p, size_t len, const uint8_t h[KVFS_HASH_LEN])
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(h[i % KVFS_HASH_LEN] ^ (i >> 5));
}

static int kv_check(const uint8_t *p, size_t len,
		    const uint8_t h[KVFS_HASH_LEN])
{
	if (len != KV_BYTES)
		return -EBADMSG;
	for (size_t i = 0; i < len; i++)
		if (p[i] != (uint8_t)(h[i % KVFS_HASH_LEN] ^ (i >> 5)))
			return -EBADMSG;
	return 0;
}

/* the cached prefix h[0..hits-1], mapped at once */
static int use_hits(struct kvfs *k, const char *ns,
		    const uint8_t (*h)[KVFS_HASH_LEN], size_t hits)
{
	const void **p = calloc(hits ? hits : 1, sizeof(*p));
	size_t *len = calloc(hits ? hits : 1, sizeof(*len));
	long got;
	int rc = -ENOMEM;

	if (!p || !len)
		goto out_free;
	got = kvfs_map_batch(k, ns, h, hits, p, len);
	rc = got < 0 ? (int)got : 0;
	/* the lease pins them: all are there */
	if (got >= 0 && (size_t)got != hits)
		rc = -ESTALE;
	/* an engine would copy them to the GPU here
	 * (kvfs_copy_to_device_batch) */
	for (long i = 0; i < got && !rc; i++)
		rc = kv_check(p[i], len[i], h[i]);
	if (got > 0)
		kvfs_unmap_batch(k, p, (size_t)got);
out_free:
	free(p);
	free(len);
	return rc;
}

static int compute_miss(struct kvfs *k, const char *ns,
			const uint8_t h[KVFS_HASH_LEN], const uint8_t *parent)
{
	struct kvfs_wblock *wb;
	size_t cap;
	void *p;
	int rc;

	rc = kvfs_alloc(k, ns, h, parent, &p, &cap, &wb);
	if (rc == -EEXIST)
		return 0; /* another engine stored it meanwhile */
	if (rc)
		return rc;
	if (cap < KV_BYTES) {
		kvfs_abort(wb);
		return -EFBIG;
	}
	kv_fill(p, KV_BYTES, h);
	return kvfs_commit(wb, KV_BYTES);
}

static int run(struct kvfs *k, const char *ns, const uint32_t *tok, size_t ntok)
{
	size_t n = ntok / BLOCK_TOKENS;
	uint8_t(*h)[KVFS_HASH_LEN] = calloc(n ? n : 1, KVFS_HASH_LEN);
	uint64_t lease = 0;
	long hits;
	int rc = 0;

	if (!h)
		return -ENOMEM;
	if (kvfs_hash_chain(ns, BLOCK_TOKENS, tok, ntok, h, n) != (long)n) {
		rc = -EINVAL;
		goto out_free;
	}
	hits = kvfs_match(k, ns, (const uint8_t(*)[KVFS_HASH_LEN])h, n,
			  LEASE_MS, &lease);
	if (hits < 0) {
		rc = (int)hits;
		goto out_free;
	}
	rc = use_hits(k, ns, (const uint8_t(*)[KVFS_HASH_LEN])h, (size_t)hits);
	for (size_t i = (size_t)hits; i < n && !rc; i++)
		rc = compute_miss(k, ns, h[i], i ? h[i - 1] : NULL);
	if (lease)
		kvfs_release(k, lease);
	if (!rc)
		printf("blocks %zu hits %ld misses %zu\n", n, hits,
		       n - (size_t)hits);
out_free:
	free(h);
	return rc;
}

int main(int argc, char **argv)
{
	struct kvfs *k;
	uint32_t *tok;
	size_t ntok;
	unsigned seed;
	int rc;

	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: engine MOUNTPOINT NAMESPACE NTOKENS "
				"[SEED]\n");
		return 2;
	}
	ntok = strtoul(argv[3], NULL, 10);
	seed = argc == 5 ? (unsigned)strtoul(argv[4], NULL, 10) : 1;
	tok = malloc((ntok ? ntok : 1) * sizeof(*tok));
	if (!tok)
		return 1;
	for (size_t i = 0; i < ntok; i++)
		tok[i] = (uint32_t)(seed * 2654435761u + i * 40503u) % 32000;
	rc = kvfs_connect(argv[1], &k);
	if (rc) {
		fprintf(stderr, "engine: %s: %s\n", argv[1], strerror(-rc));
		free(tok);
		return 1;
	}
	rc = run(k, argv[2], tok, ntok);
	if (rc)
		fprintf(stderr, "engine: %s\n", strerror(-rc));
	kvfs_disconnect(k);
	free(tok);
	return rc ? 1 : 0;
}

/*
 * hrw.c - rendezvous (highest random weight) placement, cluster.h.
 *
 * Weight input, hashed with SHA-256 (the first 8 bytes of the digest,
 * big-endian, are the weight):
 *
 *   off      size  field
 *   0        I     node id bytes (no NUL)
 *   I        1     0x00
 *   I+1      L     namespace bytes
 *   I+1+L    1     0x00
 *   I+2+L    32    block hash, raw
 *
 * The 0x00 separators keep ("ab", "c") and ("a", "bc") apart.  Order of a
 * home set: weight descending, then id ascending (strcmp), then index, so
 * that every node ranks the same membership the same way; equal ids only
 * happen in a broken membership, and the index keeps the order total.
 */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "kvstore/cluster.h"

/* the weights of one pick live on the stack up to this many nodes */
#define HRW_STACK 64

uint64_t kv_hrw_weight(const char *id, const char *ns,
		       const uint8_t hash[KVFS_HASH_LEN])
{
	static const uint8_t zero;
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint64_t w = 0;
	bool ok;

	if (!ctx)
		return 0;
	ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
	     EVP_DigestUpdate(ctx, id, strlen(id)) == 1 &&
	     EVP_DigestUpdate(ctx, &zero, 1) == 1 &&
	     EVP_DigestUpdate(ctx, ns, strlen(ns)) == 1 &&
	     EVP_DigestUpdate(ctx, &zero, 1) == 1 &&
	     EVP_DigestUpdate(ctx, hash, KVFS_HASH_LEN) == 1 &&
	     EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen >= 8;
	EVP_MD_CTX_free(ctx);
	if (!ok)
		return 0;
	for (int i = 0; i < 8; i++)
		w = (w << 8) | md[i];
	return w;
}

/* does (wa, a) rank before (wb, b)? */
static bool ranks_before(const struct kv_node_info *nodes, uint64_t wa,
			 size_t a, uint64_t wb, size_t b)
{
	int c;

	if (wa != wb)
		return wa > wb;
	c = strcmp(nodes[a].id, nodes[b].id);
	return c != 0 ? c < 0 : a < b;
}

/* weight of node i: from w[] when there is one, else computed again */
static uint64_t weight_at(const struct kv_node_info *nodes, const uint64_t *w,
			  size_t i, const char *ns,
			  const uint8_t hash[KVFS_HASH_LEN])
{
	return w ? w[i] : kv_hrw_weight(nodes[i].id, ns, hash);
}

size_t kv_hrw_pick(const struct kv_node_info *nodes, size_t n, const char *ns,
		   const uint8_t hash[KVFS_HASH_LEN], size_t r, size_t *out)
{
	uint64_t stack_w[HRW_STACK], *w = stack_w, prev_w = 0;
	size_t k, prev = 0;

	if (r > n)
		r = n;
	if (r == 0)
		return 0;
	/* no memory for the weights: the same answer, hashing more */
	if (n > HRW_STACK)
		w = malloc(n * sizeof(*w));
	for (size_t i = 0; w && i < n; i++)
		w[i] = kv_hrw_weight(nodes[i].id, ns, hash);
	/*
	 * r rounds of "the best node ranked after the previous pick": the
	 * order is total, so no node is taken twice and no flags are
	 * needed; O(n r), and r (the replica count) is small.
	 */
	for (k = 0; k < r; k++) {
		size_t best = n;
		uint64_t best_w = 0;

		for (size_t i = 0; i < n; i++) {
			uint64_t wi = weight_at(nodes, w, i, ns, hash);

			if (k > 0 && !ranks_before(nodes, prev_w, prev, wi, i))
				continue;
			if (best == n ||
			    ranks_before(nodes, wi, i, best_w, best)) {
				best = i;
				best_w = wi;
			}
		}
		out[k] = best;
		prev = best;
		prev_w = best_w;
	}
	if (w != stack_w)
		free(w);
	return k;
}

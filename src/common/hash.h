/*
 * hash.h - the kvfs v1 content-address chain, and SGLang's seedless one.
 *
 * One implementation, shared by kvctl, kvbench, the store, libkvfs and
 * kvfsd.  The chain is defined in kvfs(7):
 *
 *   seed  = SHA256("kvfs-v1" 0x00 namespace 0x00 u32le(block_tokens))
 *   H[i]  = SHA256(H[i-1] || u32le(tok[i*B]) ... u32le(tok[i*B+B-1]))
 *           with H[-1] = seed
 *   name  = lowercase hex of H[i]
 *
 * Only full blocks are named: a trailing partial block yields no hash.
 * SHA-256 rather than a fast non-cryptographic hash because a shared cache
 * keyed by a weak hash can be poisoned by crafted collisions.
 *
 * All calls return 0 or a negative errno and never touch errno.
 */
#ifndef KVFS_HASH_H
#define KVFS_HASH_H

#include <stddef.h>
#include <stdint.h>

#define KVFS_HASH_LEN 32		 /* bytes of one block hash */
#define KVFS_HASH_HEX_LEN 64		 /* chars of its name, no NUL */
#define KVFS_NS_MAX 255			 /* longest namespace name, bytes */
#define KVFS_BLOCK_TOKENS_MAX (1u << 20) /* largest block_tokens accepted */

/*
 * A namespace name is 1..KVFS_NS_MAX bytes, contains no '/' and no NUL, and
 * does not start with '.' (".kvfs" and friends are reserved).  Any other
 * bytes, non-ASCII included, are allowed and hashed as they are.
 * Returns 0 or -EINVAL.
 */
int kvfs_ns_valid(const char *ns);

/* seed of the chain for (ns, block_tokens); -EINVAL on a bad ns or B == 0 */
int kvfs_hash_seed(const char *ns, uint32_t block_tokens,
		   uint8_t out[KVFS_HASH_LEN]);

/* one link: out = SHA256(prev || u32le(tok[0]) .. u32le(tok[B-1])).
 * out may alias prev. */
int kvfs_hash_next(const uint8_t prev[KVFS_HASH_LEN], const uint32_t *tok,
		   uint32_t block_tokens, uint8_t out[KVFS_HASH_LEN]);

/*
 * The whole chain over ntokens tokens: writes min(ntokens / B, max_out)
 * hashes to out and returns that count (>= 0), or a negative errno
 * (-EINVAL for a bad ns, B == 0, or NULL tokens with ntokens > 0).
 */
long kvfs_hash_chain(const char *ns, uint32_t block_tokens, const uint32_t *tok,
		     size_t ntokens, uint8_t (*out)[KVFS_HASH_LEN],
		     size_t max_out);

/*
 * SGLang HiCache's page keys (kvfs(7), "SGLang chain"): the same links
 * with no seed, so neither a namespace nor page_tokens enters a hash:
 *
 *   H[0] = SHA256(u32le(tok[0]) ... u32le(tok[B-1]))
 *   H[i] = SHA256(H[i-1] || u32le(tok[i*B]) ... u32le(tok[i*B+B-1]))
 *
 * page_tokens (B) only cuts the tokens into pages.  Counts and errors as
 * kvfs_hash_chain() (-EINVAL for B == 0 or > KVFS_BLOCK_TOKENS_MAX, NULL
 * tokens with ntokens > 0, NULL out with max_out > 0).
 */
long kvfs_hash_chain_sglang(uint32_t page_tokens, const uint32_t *tok,
			    size_t ntokens, uint8_t (*out)[KVFS_HASH_LEN],
			    size_t max_out);

/* lowercase hex; hex must hold KVFS_HASH_HEX_LEN + 1 bytes (NUL added) */
void kvfs_hash_to_hex(const uint8_t h[KVFS_HASH_LEN],
		      char hex[KVFS_HASH_HEX_LEN + 1]);

/*
 * Parse a block name: exactly 64 lowercase hex chars, NUL-terminated.
 * Uppercase, short, long or non-hex names are -EINVAL (a block has one
 * name, so "ABC..." and "abc..." must not both open it).
 */
int kvfs_hash_from_hex(const char *hex, uint8_t h[KVFS_HASH_LEN]);

/*
 * The store key of a file in an open namespace (kvfs(7), "Layouts"):
 *
 *   key = SHA256("kvfs-path-v1" 0x00 path)
 *
 * path is relative to the namespace directory, components joined by '/',
 * no leading or trailing '/' ("a/b/c.bin").  Every node derives the same
 * key from the same path, so remote reads and replicas need no name table.
 * -EINVAL for an empty path.
 */
int kvfs_path_key(const char *path, size_t len, uint8_t out[KVFS_HASH_LEN]);

#endif /* KVFS_HASH_H */

#include "config.h"

#include <errno.h>
#include <string.h>

#include <openssl/evp.h>

#include "src/common/hash.h"
#include "src/common/le.h"

/*
 * Byte layout of the hashed inputs (kvfs(7), "HASH CHAIN"):
 *
 *   seed input                        link input
 *   off  size  field                  off  size  field
 *   0    7     "kvfs-v1"              0    32    previous hash, raw
 *   7    1     0x00                   32   4*B   B tokens, u32le each
 *   8    L     namespace bytes
 *   8+L  1     0x00
 *   9+L  4     block_tokens, u32le
 *
 * The SGLang chain has no seed; its links are the same, except that the
 * first page's input is its 4*B token bytes alone (no previous hash).
 */
static const char seed_magic[] = "kvfs-v1"; /* sizeof includes the 0x00 */

/* tokens encoded per EVP_DigestUpdate when the host is big-endian */
#define ENC_CHUNK 256

/* folds to a constant; keeps the byte-order choice out of the preprocessor */
static int host_is_le(void)
{
	const uint16_t one = 1;
	uint8_t first;

	memcpy(&first, &one, 1);
	return first == 1;
}

static int block_tokens_valid(uint32_t block_tokens)
{
	return block_tokens >= 1 && block_tokens <= KVFS_BLOCK_TOKENS_MAX;
}

int kvfs_ns_valid(const char *ns)
{
	size_t len;

	if (!ns)
		return -EINVAL;
	/* strnlen: a huge or unterminated-looking name costs at most MAX+1 */
	len = strnlen(ns, KVFS_NS_MAX + 1);
	if (len == 0 || len > KVFS_NS_MAX)
		return -EINVAL;
	if (ns[0] == '.' || memchr(ns, '/', len))
		return -EINVAL;
	return 0;
}

/* feed n tokens as u32le; on little-endian hosts memory already is that */
static int update_tokens(EVP_MD_CTX *ctx, const uint32_t *tok, size_t n)
{
	uint8_t buf[ENC_CHUNK * 4];
	size_t i, k;

	if (host_is_le())
		return EVP_DigestUpdate(ctx, tok, n * 4) == 1 ? 0 : -EIO;
	for (i = 0; i < n; i += k) {
		k = n - i < ENC_CHUNK ? n - i : ENC_CHUNK;
		for (size_t j = 0; j < k; j++)
			kv_put_le32(buf + 4 * j, tok[i + j]);
		if (EVP_DigestUpdate(ctx, buf, k * 4) != 1)
			return -EIO;
	}
	return 0;
}

/*
 * Start a SHA-256 in ctx.  The first init names the digest; later ones pass
 * NULL so OpenSSL 3 reuses the digest it already fetched instead of doing an
 * implicit fetch (a locked provider lookup) for every link of a chain.
 */
static int md_init(EVP_MD_CTX *ctx, int first)
{
	return EVP_DigestInit_ex(ctx, first ? EVP_sha256() : NULL, NULL) == 1
		       ? 0
		       : -EIO;
}

static int md_final(EVP_MD_CTX *ctx, uint8_t out[KVFS_HASH_LEN])
{
	unsigned int len = 0;

	if (EVP_DigestFinal_ex(ctx, out, &len) != 1 || len != KVFS_HASH_LEN)
		return -EIO;
	return 0;
}

static int seed_ctx(EVP_MD_CTX *ctx, const char *ns, uint32_t block_tokens,
		    uint8_t out[KVFS_HASH_LEN])
{
	uint8_t tail[5] = { 0 }; /* 0x00 then u32le(block_tokens) */
	int rc;

	kv_put_le32(tail + 1, block_tokens);
	rc = md_init(ctx, 1);
	if (rc)
		return rc;
	if (EVP_DigestUpdate(ctx, seed_magic, sizeof(seed_magic)) != 1 ||
	    EVP_DigestUpdate(ctx, ns, strlen(ns)) != 1 ||
	    EVP_DigestUpdate(ctx, tail, sizeof(tail)) != 1)
		return -EIO;
	return md_final(ctx, out);
}

/*
 * prev is read by DigestUpdate before Final writes out: aliasing is safe.
 * prev NULL hashes the tokens alone: the first page of the SGLang chain.
 */
static int link_ctx(EVP_MD_CTX *ctx, int first, const uint8_t *prev,
		    const uint32_t *tok, uint32_t block_tokens, uint8_t *out)
{
	int rc;

	rc = md_init(ctx, first);
	if (rc)
		return rc;
	if (prev && EVP_DigestUpdate(ctx, prev, KVFS_HASH_LEN) != 1)
		return -EIO;
	rc = update_tokens(ctx, tok, block_tokens);
	if (rc)
		return rc;
	return md_final(ctx, out);
}

/*
 * OpenSSL may set errno (malloc, reading its config on first use); the
 * contract in hash.h is that these calls never do, so each public entry
 * that reaches OpenSSL saves and restores it.
 */
int kvfs_hash_seed(const char *ns, uint32_t block_tokens,
		   uint8_t out[KVFS_HASH_LEN])
{
	int saved = errno;
	EVP_MD_CTX *ctx;
	int rc;

	if (kvfs_ns_valid(ns) || !block_tokens_valid(block_tokens) || !out)
		return -EINVAL;
	ctx = EVP_MD_CTX_new();
	if (!ctx) {
		rc = -ENOMEM;
		goto out_errno;
	}
	rc = seed_ctx(ctx, ns, block_tokens, out);
	EVP_MD_CTX_free(ctx);
out_errno:
	errno = saved;
	return rc;
}

int kvfs_hash_next(const uint8_t prev[KVFS_HASH_LEN], const uint32_t *tok,
		   uint32_t block_tokens, uint8_t out[KVFS_HASH_LEN])
{
	int saved = errno;
	EVP_MD_CTX *ctx;
	int rc;

	if (!prev || !tok || !out || !block_tokens_valid(block_tokens))
		return -EINVAL;
	ctx = EVP_MD_CTX_new();
	if (!ctx) {
		rc = -ENOMEM;
		goto out_errno;
	}
	rc = link_ctx(ctx, 1, prev, tok, block_tokens, out);
	EVP_MD_CTX_free(ctx);
out_errno:
	errno = saved;
	return rc;
}

/* seed then count links, all through one ctx (this is the hot path) */
/* the chain of count blocks; ns NULL: no seed (SGLang's page keys, whose
 * first link hashes its tokens alone) */
static int chain_ctx(EVP_MD_CTX *ctx, const char *ns, uint32_t block_tokens,
		     const uint32_t *tok, size_t count,
		     uint8_t (*out)[KVFS_HASH_LEN])
{
	uint8_t seed[KVFS_HASH_LEN];
	const uint8_t *prev = ns ? seed : NULL;
	int rc = ns ? seed_ctx(ctx, ns, block_tokens, seed) : 0;

	for (size_t i = 0; !rc && i < count; i++) {
		rc = link_ctx(ctx, !ns && i == 0, prev, tok + i * block_tokens,
			      block_tokens, out[i]);
		prev = out[i];
	}
	return rc;
}

/* kvfs_hash_chain and kvfs_hash_chain_sglang, ns checked (or NULL) */
static long chain_run(const char *ns, uint32_t block_tokens,
		      const uint32_t *tok, size_t ntokens,
		      uint8_t (*out)[KVFS_HASH_LEN], size_t max_out)
{
	int saved = errno;
	EVP_MD_CTX *ctx;
	size_t count;
	int rc;

	if (!block_tokens_valid(block_tokens))
		return -EINVAL;
	if ((!tok && ntokens > 0) || (!out && max_out > 0))
		return -EINVAL;
	count = ntokens / block_tokens;
	if (count > max_out)
		count = max_out;
	if (count == 0)
		return 0; /* nothing to name: skip the seed's SHA-256 */
	ctx = EVP_MD_CTX_new();
	if (!ctx) {
		rc = -ENOMEM;
		goto out_errno;
	}
	rc = chain_ctx(ctx, ns, block_tokens, tok, count, out);
	EVP_MD_CTX_free(ctx);
out_errno:
	errno = saved;
	/* count fits: out holds count 32-byte hashes in one address space */
	return rc ? rc : (long)count;
}

long kvfs_hash_chain(const char *ns, uint32_t block_tokens, const uint32_t *tok,
		     size_t ntokens, uint8_t (*out)[KVFS_HASH_LEN],
		     size_t max_out)
{
	if (kvfs_ns_valid(ns))
		return -EINVAL;
	return chain_run(ns, block_tokens, tok, ntokens, out, max_out);
}

long kvfs_hash_chain_sglang(uint32_t page_tokens, const uint32_t *tok,
			    size_t ntokens, uint8_t (*out)[KVFS_HASH_LEN],
			    size_t max_out)
{
	return chain_run(NULL, page_tokens, tok, ntokens, out, max_out);
}

void kvfs_hash_to_hex(const uint8_t h[KVFS_HASH_LEN],
		      char hex[KVFS_HASH_HEX_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < KVFS_HASH_LEN; i++) {
		hex[2 * i] = digits[h[i] >> 4];
		hex[2 * i + 1] = digits[h[i] & 0xf];
	}
	hex[KVFS_HASH_HEX_LEN] = '\0';
}

/* value of a lowercase hex digit, -1 for anything else (uppercase too) */
static int hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* h is written only on success, so a failed parse leaves it as it was */
int kvfs_hash_from_hex(const char *hex, uint8_t h[KVFS_HASH_LEN])
{
	uint8_t tmp[KVFS_HASH_LEN];

	if (!hex || !h ||
	    strnlen(hex, KVFS_HASH_HEX_LEN + 1) != KVFS_HASH_HEX_LEN)
		return -EINVAL;
	for (int i = 0; i < KVFS_HASH_LEN; i++) {
		int hi = hex_val(hex[2 * i]);
		int lo = hex_val(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		tmp[i] = (uint8_t)(hi << 4 | lo);
	}
	memcpy(h, tmp, sizeof(tmp));
	return 0;
}

int kvfs_path_key(const char *path, size_t len, uint8_t out[KVFS_HASH_LEN])
{
	static const char magic[] = "kvfs-path-v1"; /* and its NUL */
	EVP_MD_CTX *ctx;
	int saved = errno, rc = -EIO;

	if (!path || len == 0)
		return -EINVAL;
	ctx = EVP_MD_CTX_new();
	if (ctx && md_init(ctx, 1) == 0 &&
	    EVP_DigestUpdate(ctx, magic, sizeof(magic)) == 1 &&
	    EVP_DigestUpdate(ctx, path, len) == 1)
		rc = md_final(ctx, out);
	EVP_MD_CTX_free(ctx);
	errno = saved;
	return rc;
}

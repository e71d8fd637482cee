/* auth.c - the challenge-response, session keys and frame tags of auth.h:
 * HMAC-SHA-256, HKDF-SHA-256 and ChaCha20-Poly1305, all from libcrypto */
#include "config.h"

#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include "kvstore/auth.h"

static const char label_server[] = "kvfs-xfer-v2 server";
static const char label_client[] = "kvfs-xfer-v2 client";
static const char label_c2s[] = "kvfs-xfer-v2 c2s";
static const char label_s2c[] = "kvfs-xfer-v2 s2c";

#define BOUND (2 * KV_WIRE_NONCE_LEN + 2 * KV_WIRE_ID_LEN)
#ifndef TAG_CIPHER
#define TAG_CIPHER EVP_chacha20_poly1305
#endif

/* label 0 [Nc Ns] Idc Ids into msg: its length */
static size_t bind(const struct kv_auth *a, const char *label, size_t llen,
		   bool nonces, uint8_t *msg)
{
	size_t n = llen;

	memcpy(msg, label, llen);
	if (nonces) {
		memcpy(msg + n, a->nc, KV_WIRE_NONCE_LEN);
		memcpy(msg + n + KV_WIRE_NONCE_LEN, a->ns, KV_WIRE_NONCE_LEN);
		n += 2 * KV_WIRE_NONCE_LEN;
	}
	memcpy(msg + n, a->idc, KV_WIRE_ID_LEN);
	memcpy(msg + n + KV_WIRE_ID_LEN, a->ids, KV_WIRE_ID_LEN);
	return n + 2 * KV_WIRE_ID_LEN;
}

/* HMAC(K, label 0 Nc Ns Idc Ids); label includes its NUL */
static int proof(const struct kv_auth *a, const char *label, size_t llen,
		 uint8_t out[KV_WIRE_MAC_LEN])
{
	uint8_t msg[32 + BOUND];
	unsigned int olen = 0;
	size_t n = bind(a, label, llen, true, msg);

	if (!HMAC(EVP_sha256(), a->secret, (int)a->secret_len, msg, n, out,
		  &olen) ||
	    olen != KV_WIRE_MAC_LEN)
		return -EIO;
	return 0;
}

/* HKDF-SHA256(ikm K, salt Nc Ns, info label 0 Idc Ids) */
static int derive(const struct kv_auth *a, const char *label, size_t llen,
		  uint8_t out[KV_AUTH_KEY_LEN])
{
	uint8_t salt[2 * KV_WIRE_NONCE_LEN], info[32 + BOUND];
	size_t ilen = bind(a, label, llen, false, info), olen = KV_AUTH_KEY_LEN;
	EVP_PKEY_CTX *k = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	int ok;

	memcpy(salt, a->nc, KV_WIRE_NONCE_LEN);
	memcpy(salt + KV_WIRE_NONCE_LEN, a->ns, KV_WIRE_NONCE_LEN);
	ok = k && EVP_PKEY_derive_init(k) > 0 &&
	     EVP_PKEY_CTX_set_hkdf_md(k, EVP_sha256()) > 0 &&
	     EVP_PKEY_CTX_set1_hkdf_salt(k, salt, (int)sizeof(salt)) > 0 &&
	     EVP_PKEY_CTX_set1_hkdf_key(k, a->secret, (int)a->secret_len) > 0 &&
	     EVP_PKEY_CTX_add1_hkdf_info(k, info, (int)ilen) > 0 &&
	     EVP_PKEY_derive(k, out, &olen) > 0 && olen == KV_AUTH_KEY_LEN;
	EVP_PKEY_CTX_free(k);
	return ok ? 0 : -EIO;
}

/* a node id into its NUL-padded wire form */
static int id_field(const char *id, uint8_t out[KV_WIRE_ID_LEN])
{
	size_t n = id ? strlen(id) : 0;

	memset(out, 0, KV_WIRE_ID_LEN);
	if (n >= KV_WIRE_ID_LEN)
		return -EINVAL;
	if (n)
		memcpy(out, id, n);
	return 0;
}

static int fail(struct kv_auth *a, int rc)
{
	a->state = KV_AUTH_FAILED;
	return rc;
}

int kv_auth_init(struct kv_auth *a, enum kv_auth_role role,
		 const uint8_t *secret, size_t len, const char *self)
{
	if (!a || !secret || len == 0 || len > 1u << 20 ||
	    (self && strlen(self) >= KV_WIRE_ID_LEN))
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->role = role;
	a->secret = secret;
	a->secret_len = len;
	if (self)
		memcpy(a->self, self, strlen(self) + 1);
	return 0;
}

int kv_auth_client_hello(struct kv_auth *a, const char *target,
			 struct kv_wire_msg *hello)
{
	if (a->role != KV_AUTH_CLIENT || a->state != KV_AUTH_START)
		return fail(a, -EPROTO);
	if (id_field(a->self, a->idc) < 0 || id_field(target, a->ids) < 0)
		return fail(a, -EINVAL);
	if (RAND_bytes(a->nc, sizeof(a->nc)) != 1)
		return fail(a, -EIO);
	memset(hello, 0, sizeof(*hello));
	hello->type = KV_WIRE_HELLO;
	memcpy(hello->nonce, a->nc, sizeof(a->nc));
	memcpy(hello->node, a->idc, KV_WIRE_ID_LEN);
	memcpy(hello->target, a->ids, KV_WIRE_ID_LEN);
	a->state = KV_AUTH_SENT_HELLO;
	return 0;
}

int kv_auth_server_challenge(struct kv_auth *a, const struct kv_wire_msg *in,
			     struct kv_wire_msg *ch)
{
	if (a->role != KV_AUTH_SERVER || a->state != KV_AUTH_START ||
	    in->type != KV_WIRE_HELLO)
		return fail(a, -EPROTO);
	/* meant for another node: a relay, or a stale directory */
	if (strcmp(in->target, a->self) != 0)
		return fail(a, -EACCES);
	if (id_field(in->node, a->idc) < 0 || id_field(a->self, a->ids) < 0)
		return fail(a, -EPROTO);
	memcpy(a->nc, in->nonce, sizeof(a->nc));
	if (RAND_bytes(a->ns, sizeof(a->ns)) != 1)
		return fail(a, -EIO);
	if (CRYPTO_memcmp(a->nc, a->ns, sizeof(a->ns)) == 0)
		return fail(a, -EACCES);
	memset(ch, 0, sizeof(*ch));
	ch->type = KV_WIRE_CHALLENGE;
	ch->id = in->id;
	memcpy(ch->nonce, a->ns, sizeof(a->ns));
	if (proof(a, label_server, sizeof(label_server), ch->mac) < 0)
		return fail(a, -EIO);
	a->state = KV_AUTH_SENT_CHALLENGE;
	return 0;
}

int kv_auth_client_answer(struct kv_auth *a, const struct kv_wire_msg *in,
			  struct kv_wire_msg *auth)
{
	uint8_t want[KV_WIRE_MAC_LEN];

	if (a->role != KV_AUTH_CLIENT || a->state != KV_AUTH_SENT_HELLO ||
	    in->type != KV_WIRE_CHALLENGE)
		return fail(a, -EPROTO);
	memcpy(a->ns, in->nonce, sizeof(a->ns));
	if (CRYPTO_memcmp(a->nc, a->ns, sizeof(a->ns)) == 0)
		return fail(a, -EACCES);
	if (proof(a, label_server, sizeof(label_server), want) < 0)
		return fail(a, -EIO);
	if (CRYPTO_memcmp(want, in->mac, sizeof(want)) != 0)
		return fail(a, -EACCES);
	memset(auth, 0, sizeof(*auth));
	auth->type = KV_WIRE_AUTH;
	auth->id = in->id;
	if (proof(a, label_client, sizeof(label_client), auth->mac) < 0)
		return fail(a, -EIO);
	a->state = KV_AUTH_SENT_AUTH;
	return 0;
}

int kv_auth_server_verify(struct kv_auth *a, const struct kv_wire_msg *in)
{
	uint8_t want[KV_WIRE_MAC_LEN];

	if (a->role != KV_AUTH_SERVER || a->state != KV_AUTH_SENT_CHALLENGE ||
	    in->type != KV_WIRE_AUTH)
		return fail(a, -EPROTO);
	if (proof(a, label_client, sizeof(label_client), want) < 0)
		return fail(a, -EIO);
	if (CRYPTO_memcmp(want, in->mac, sizeof(want)) != 0)
		return fail(a, -EACCES);
	a->state = KV_AUTH_DONE;
	return 0;
}

const char *kv_auth_peer(const struct kv_auth *a)
{
	/* NUL-padded fields of at most 63 bytes: strings */
	return (const char *)(a->role == KV_AUTH_SERVER ? a->idc : a->ids);
}

int kv_auth_keys(const struct kv_auth *a, uint8_t send[KV_AUTH_KEY_LEN],
		 uint8_t recv[KV_AUTH_KEY_LEN])
{
	bool client = a->role == KV_AUTH_CLIENT;

	if (a->state != KV_AUTH_DONE)
		return -EPROTO;
	if (derive(a, label_c2s, sizeof(label_c2s), client ? send : recv) < 0 ||
	    derive(a, label_s2c, sizeof(label_s2c), client ? recv : send) < 0)
		return -EIO;
	return 0;
}

/* ---- frame tags ------------------------------------------------------ */

int kv_tagger_init(struct kv_tagger *t, const uint8_t key[KV_AUTH_KEY_LEN])
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();

	t->ctx = NULL;
	t->count = 0;
	if (!c)
		return -ENOMEM;
	/* the key once; each tag sets only its nonce */
	if (EVP_EncryptInit_ex(c, TAG_CIPHER(), NULL, key, NULL) != 1) {
		EVP_CIPHER_CTX_free(c);
		return -EIO;
	}
	t->ctx = c;
	return 0;
}

void kv_tagger_fini(struct kv_tagger *t)
{
	EVP_CIPHER_CTX_free(t->ctx);
	t->ctx = NULL;
}

int kv_tagger_begin(struct kv_tagger *t)
{
	uint8_t iv[12] = { 0 };
	uint64_t n = t->count++;

	for (int i = 0; i < 8; i++)
		iv[4 + i] = (uint8_t)(n >> (8 * i));
	return EVP_EncryptInit_ex(t->ctx, NULL, NULL, NULL, iv) == 1 ? 0 : -EIO;
}

int kv_tagger_update(struct kv_tagger *t, const void *p, size_t len)
{
	const uint8_t *b = p;

	/* no output buffer: the bytes are authenticated data only */
	while (len) {
		int n = len > (1u << 30) ? 1 << 30 : (int)len, out = 0;

		if (EVP_EncryptUpdate(t->ctx, NULL, &out, b, n) != 1)
			return -EIO;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

int kv_tagger_finish(struct kv_tagger *t, uint8_t tag[KV_WIRE_TAG_LEN])
{
	uint8_t none[16];
	int out = 0;

	if (EVP_EncryptFinal_ex(t->ctx, none, &out) != 1 ||
	    EVP_CIPHER_CTX_ctrl(t->ctx, EVP_CTRL_AEAD_GET_TAG, KV_WIRE_TAG_LEN,
				tag) != 1)
		return -EIO;
	return 0;
}

int kv_tagger_check(struct kv_tagger *t, const uint8_t tag[KV_WIRE_TAG_LEN])
{
	uint8_t want[KV_WIRE_TAG_LEN];
	int rc = kv_tagger_finish(t, want);

	if (rc < 0)
		return rc;
	return CRYPTO_memcmp(want, tag, KV_WIRE_TAG_LEN) == 0 ? 0 : -EBADMSG;
}

int kv_auth_client_finish(struct kv_auth *a, const struct kv_wire_msg *in)
{
	if (a->role != KV_AUTH_CLIENT || a->state != KV_AUTH_SENT_AUTH)
		return fail(a, -EPROTO);
	if (in->type == KV_WIRE_AUTH_FAIL)
		return fail(a, -EACCES);
	if (in->type != KV_WIRE_AUTH_OK)
		return fail(a, -EPROTO);
	a->state = KV_AUTH_DONE;
	return 0;
}

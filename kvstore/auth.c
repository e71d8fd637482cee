/* auth.c - the challenge-response of auth.h, HMAC-SHA-256 via libcrypto */
#include "config.h"

#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "kvstore/auth.h"

static const char label_server[] = "kvfs-xfer-v1 server";
static const char label_client[] = "kvfs-xfer-v1 client";

/* HMAC(K, label 0 Nc Ns); label includes its NUL as the separator */
static int proof(const struct kv_auth *a, const char *label, size_t llen,
		 uint8_t out[KV_WIRE_MAC_LEN])
{
	uint8_t msg[32 + 2 * KV_WIRE_NONCE_LEN];
	unsigned int olen = 0;

	memcpy(msg, label, llen);
	memcpy(msg + llen, a->nc, KV_WIRE_NONCE_LEN);
	memcpy(msg + llen + KV_WIRE_NONCE_LEN, a->ns, KV_WIRE_NONCE_LEN);
	if (!HMAC(EVP_sha256(), a->secret, (int)a->secret_len, msg,
		  llen + 2 * KV_WIRE_NONCE_LEN, out, &olen) ||
	    olen != KV_WIRE_MAC_LEN)
		return -EIO;
	return 0;
}

static int fail(struct kv_auth *a, int rc)
{
	a->state = KV_AUTH_FAILED;
	return rc;
}

int kv_auth_init(struct kv_auth *a, enum kv_auth_role role,
		 const uint8_t *secret, size_t len)
{
	if (!a || !secret || len == 0 || len > 1u << 20)
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->role = role;
	a->secret = secret;
	a->secret_len = len;
	return 0;
}

int kv_auth_client_hello(struct kv_auth *a, struct kv_wire_msg *hello)
{
	if (a->role != KV_AUTH_CLIENT || a->state != KV_AUTH_START)
		return fail(a, -EPROTO);
	if (RAND_bytes(a->nc, sizeof(a->nc)) != 1)
		return fail(a, -EIO);
	memset(hello, 0, sizeof(*hello));
	hello->type = KV_WIRE_HELLO;
	memcpy(hello->nonce, a->nc, sizeof(a->nc));
	a->state = KV_AUTH_SENT_HELLO;
	return 0;
}

int kv_auth_server_challenge(struct kv_auth *a, const struct kv_wire_msg *in,
			     struct kv_wire_msg *ch)
{
	if (a->role != KV_AUTH_SERVER || a->state != KV_AUTH_START ||
	    in->type != KV_WIRE_HELLO)
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

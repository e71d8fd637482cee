/*
 * auth.h - mutual challenge-response over the cluster secret.
 *
 * Both ends prove they know the secret K without sending it, each over a
 * fresh random nonce of the other, so no answer can be replayed:
 *
 *   client -> HELLO      Nc (32 random bytes), client transports
 *   server -> CHALLENGE  Ns, Ms = HMAC-SHA256(K, "kvfs-xfer-v1 server" 0 Nc Ns)
 *   client    checks Ms; a wrong Ms means a server without K: -EACCES,
 *             and the client hangs up without answering
 *   client -> AUTH       Mc = HMAC-SHA256(K, "kvfs-xfer-v1 client" 0 Nc Ns)
 *   server    checks Mc; -> AUTH_OK (server transports) or AUTH_FAIL and
 *             hangs up
 *
 * The two labels differ, so a proof one side makes can never pass as the
 * other side's.  Proofs are compared in constant time (CRYPTO_memcmp).
 * A nonce equal to one's own is refused (a reflected HELLO).
 *
 * The state machine is pure apart from RAND_bytes: it consumes and fills
 * struct kv_wire_msg, and the engine moves the frames.  Each step checks
 * that it comes in order; out of order is -EPROTO.
 */
#ifndef KVFS_AUTH_H
#define KVFS_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvstore/wire.h"

enum kv_auth_role { KV_AUTH_CLIENT, KV_AUTH_SERVER };

enum kv_auth_state {
	KV_AUTH_START = 0,
	KV_AUTH_SENT_HELLO,	/* client */
	KV_AUTH_SENT_CHALLENGE, /* server */
	KV_AUTH_SENT_AUTH,	/* client */
	KV_AUTH_DONE,
	KV_AUTH_FAILED,
};

struct kv_auth {
	enum kv_auth_role role;
	enum kv_auth_state state;
	const uint8_t *secret; /* borrowed; outlives the exchange */
	size_t secret_len;
	uint8_t nc[KV_WIRE_NONCE_LEN];
	uint8_t ns[KV_WIRE_NONCE_LEN];
};

/* -EINVAL for an empty secret */
int kv_auth_init(struct kv_auth *a, enum kv_auth_role role,
		 const uint8_t *secret, size_t len);
/* client: fill the HELLO (type, nonce); transports left to the caller */
int kv_auth_client_hello(struct kv_auth *a, struct kv_wire_msg *hello);
/* server: take a HELLO, fill the CHALLENGE */
int kv_auth_server_challenge(struct kv_auth *a, const struct kv_wire_msg *in,
			     struct kv_wire_msg *challenge);
/* client: check the server's proof (-EACCES), fill the AUTH */
int kv_auth_client_answer(struct kv_auth *a, const struct kv_wire_msg *in,
			  struct kv_wire_msg *auth);
/* server: check the client's proof: 0 (state DONE) or -EACCES */
int kv_auth_server_verify(struct kv_auth *a, const struct kv_wire_msg *in);
/* client: AUTH_OK -> 0 (DONE), AUTH_FAIL -> -EACCES */
int kv_auth_client_finish(struct kv_auth *a, const struct kv_wire_msg *in);

static inline bool kv_auth_done(const struct kv_auth *a)
{
	return a->state == KV_AUTH_DONE;
}

#endif /* KVFS_AUTH_H */

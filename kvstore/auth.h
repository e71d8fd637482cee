/*
 * auth.h - mutual challenge-response over the cluster secret, bound to
 * both node ids, and the session keys that authenticate every frame after
 * it (wire.h, "Tags").
 *
 * Both ends prove they know the secret K without sending it, each over a
 * fresh random nonce of the other, so no answer can be replayed.  Idc is
 * the client's node id and Ids the id of the node it means to reach (the
 * one its directory gave for the address it dialled), both 64 bytes
 * NUL-padded as on the wire ("" where a side has no id):
 *
 *   client -> HELLO      Nc (32 random bytes), client transports, Idc, Ids
 *   server    refuses (-EACCES) unless Ids is its own id
 *   server -> CHALLENGE  Ns, Ms = HMAC-SHA256(K, "kvfs-xfer-v2 server" 0
 *                                             Nc Ns Idc Ids)
 *   client    checks Ms; a wrong Ms means a server without K, or one that
 *             is not Ids: -EACCES, and the client hangs up
 *   client -> AUTH       Mc = HMAC-SHA256(K, "kvfs-xfer-v2 client" 0
 *                                         Nc Ns Idc Ids)
 *   server    checks Mc; -> AUTH_OK (server transports) or AUTH_FAIL and
 *             hangs up
 *
 * Then each side derives two keys with HKDF-SHA256 (ikm K, salt Nc Ns,
 * info "kvfs-xfer-v2 c2s" or "... s2c" 0 Idc Ids): the client tags what it
 * sends with c2s and checks what it receives with s2c, the server the
 * other way round.  A relay between two nodes gets nowhere: the node a
 * client dialled through it is not the node the relay reached (Ids), and
 * without K it can neither answer a challenge nor tag a frame.  Two
 * directions, two keys: a frame reflected back to its sender fails.
 *
 * The two labels differ, so a proof one side makes can never pass as the
 * other side's.  Proofs and tags are compared in constant time
 * (CRYPTO_memcmp).  A nonce equal to one's own is refused (a reflected
 * HELLO).
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

#define KV_AUTH_KEY_LEN 32

struct kv_auth {
	enum kv_auth_role role;
	enum kv_auth_state state;
	const uint8_t *secret; /* borrowed; outlives the exchange */
	size_t secret_len;
	uint8_t nc[KV_WIRE_NONCE_LEN];
	uint8_t ns[KV_WIRE_NONCE_LEN];
	char self[KV_WIRE_ID_LEN]; /* our node id, "" for none */
	uint8_t idc[KV_WIRE_ID_LEN], ids[KV_WIRE_ID_LEN]; /* NUL-padded */
};

/* -EINVAL for an empty secret or an id of 64 bytes or more; self is our
 * node id (NULL or "" for none) */
int kv_auth_init(struct kv_auth *a, enum kv_auth_role role,
		 const uint8_t *secret, size_t len, const char *self);
/* client: fill the HELLO (type, nonce, ids) for reaching node target
 * (NULL or "" for none); transports left to the caller */
int kv_auth_client_hello(struct kv_auth *a, const char *target,
			 struct kv_wire_msg *hello);
/* server: take a HELLO, fill the CHALLENGE; -EACCES when the HELLO is for
 * another node than ours */
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

/* once done: the peer's node id as its HELLO said (server) or as the
 * client meant to reach (client) */
const char *kv_auth_peer(const struct kv_auth *a);
/* once done: the key to tag what we send and the one to check what we
 * receive; -EPROTO before, -EIO from libcrypto */
int kv_auth_keys(const struct kv_auth *a, uint8_t send[KV_AUTH_KEY_LEN],
		 uint8_t recv[KV_AUTH_KEY_LEN]);

/*
 * Frame tags (wire.h, "Tags"): ChaCha20-Poly1305 over no plaintext under
 * one direction's key, the nonce counting tags (libcrypto's fastest MAC
 * here: docs/BENCHMARKS.md, kvbench xfer).  One per direction of a
 * connection, used by one thread at a time: begin, update with every
 * byte the tag covers, then finish (sender: the tag to send) or check
 * (receiver: 0, or -EBADMSG for a tag that does not match).
 */
struct kv_tagger {
	void *ctx; /* EVP_CIPHER_CTX */
	uint64_t count;
};

int kv_tagger_init(struct kv_tagger *t, const uint8_t key[KV_AUTH_KEY_LEN]);
void kv_tagger_fini(struct kv_tagger *t);
int kv_tagger_begin(struct kv_tagger *t);
int kv_tagger_update(struct kv_tagger *t, const void *p, size_t len);
int kv_tagger_finish(struct kv_tagger *t, uint8_t tag[KV_WIRE_TAG_LEN]);
int kv_tagger_check(struct kv_tagger *t, const uint8_t tag[KV_WIRE_TAG_LEN]);

#endif /* KVFS_AUTH_H */

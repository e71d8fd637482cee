/*
 * wire.h - the transfer engine's frame codec (peer to peer, over TCP).
 *
 * Every message is one frame: a fixed 24-byte header, then payload_len
 * bytes of payload.  The payload is meta_len bytes of typed fields (the
 * "meta", at most KV_WIRE_META_MAX) followed, for GET_OK and PUT only, by
 * the block's bytes (payload_len - meta_len of them, which must equal the
 * meta's size field).  Integers are little-endian.
 *
 * Tags: every frame after the handshake has flag bit 0 set and carries
 * 16-byte tags that payload_len does not count: one right after the meta
 * (over header and meta), and for GET_OK and PUT one more right after the
 * data (over the data).  A tag is ChaCha20-Poly1305's over no plaintext
 * (the bytes are its associated data) under the sender's direction key
 * of the session, with a 12-byte nonce of four zero bytes and a 64-bit
 * little-endian count of the tags that direction has sent before
 * (auth.h).  So a receiver acts on no meta and
 * seals no data before its tag checks, and a frame replayed, reordered,
 * reflected or altered fails.
 *
 * Header:
 *
 *   offset  size  field
 *   0       4     magic "KVXF"
 *   4       1     version (KV_WIRE_VERSION, 2)
 *   5       1     type (enum kv_wire_type)
 *   6       2     flags: bit 0 tagged (above); others 0
 *   8       4     payload_len, <= KV_WIRE_MAX_PAYLOAD
 *   12      2     meta_len, <= payload_len and <= KV_WIRE_META_MAX
 *   14      2     reserved, 0
 *   16      8     request id: a reply carries its request's id
 *
 * Meta by type ("ns" is ns_len bytes of namespace name, 1..255, no NUL;
 * "blk" is the 56-byte block description below):
 *
 *   type            meta (offset size field)
 *   HELLO      1    0 32 client nonce; 32 4 transports (bit 0 tcp, 1 rdma);
 *                   36 64 client node id; 100 64 node id the client
 *                   dialled (ids NUL-padded, "" for none)
 *   CHALLENGE  2    0 32 server nonce; 32 32 server proof (HMAC)
 *   AUTH       3    0 32 client proof (HMAC)
 *   AUTH_OK    4    0 4 transports the server offers
 *   AUTH_FAIL  5    (empty)
 *   GET       16    0 32 hash; 32 2 ns_len; 34 2 reserved; 36 ns
 *   GET_OK    17    0 56 blk; then size bytes of block data
 *   PUT       18    0 32 hash; 32 56 blk; 88 2 ns_len; 90 2 reserved;
 *                   92 ns; then size bytes of block data
 *   PUT_OK    19    (empty)
 *   HAS       20    as GET
 *   HAS_OK    21    0 4 present (0 or 1)
 *   PING      22    (empty)
 *   PONG      23    (empty)
 *   ERR       24    0 4 errno (positive, 1..4095)
 *   RDMA_EP   32    0 2 lid; 2 1 port; 3 1 mtu; 4 4 qpn; 8 4 psn;
 *                   12 4 rkey; 16 8 pool base address; 24 8 pool length;
 *                   32 16 gid   (request and reply alike)
 *   LOCATE    33    as GET: find and pin a sealed block for RDMA READ
 *   LOCATE_OK 34    0 56 blk; 56 8 address; 64 4 rkey; 68 4 reserved;
 *                   72 8 token
 *   RELEASE   35    0 8 token (unpin)
 *   RELEASE_OK 36   (empty)
 *   ALLOC     37    as PUT without data: reserve a slot for RDMA WRITE
 *   ALLOC_OK  38    0 8 address; 8 4 rkey; 12 4 reserved; 16 8 token
 *   COMMIT    39    0 8 token: verify and seal; reply PUT_OK or ERR
 *
 * blk (56 bytes):
 *
 *   0 8 size; 8 4 crc32c of the data; 12 4 block_tokens;
 *   16 4 flags (bit 0: has parent; bit 1: open namespace); 20 4 reserved;
 *   24 32 parent hash
 *
 * Every reserved field and every unknown flag bit must be 0; a frame that
 * breaks any rule above is rejected whole (-EBADMSG), and the connection
 * that carried it is closed: a stream that once lost its framing cannot
 * be trusted to find it again.
 *
 * The codec is pure: no allocation, no I/O, no dependency beyond libc, so
 * the fuzzer (fuzz/fuzz_wire.c) links it alone.
 *
 * These tables are the protocol's one definition.  kvfs(7) carries a copy
 * for readers without the source; tests/wire_doc.sh compares the two, and
 * this comment with the enum below, so a change here is made in both.
 */
#ifndef KVFS_WIRE_H
#define KVFS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KV_WIRE_MAGIC "KVXF"
#define KV_WIRE_VERSION 2
#define KV_WIRE_HDR_LEN 24u
#define KV_WIRE_META_MAX 512u
#define KV_WIRE_MAX_DATA (1u << 30) /* largest block on the wire */
#define KV_WIRE_MAX_PAYLOAD (KV_WIRE_MAX_DATA + KV_WIRE_META_MAX)
#define KV_WIRE_HASH_LEN 32
#define KV_WIRE_NONCE_LEN 32
#define KV_WIRE_MAC_LEN 32
#define KV_WIRE_NS_MAX 255
#define KV_WIRE_BLK_LEN 56u
#define KV_WIRE_ID_LEN 64 /* a node id field: up to 63 bytes, NUL-padded */
#define KV_WIRE_TAG_LEN 16
#define KV_WIRE_F_TAGGED (1u << 0)

#define KV_WIRE_TP_TCP (1u << 0)
#define KV_WIRE_TP_RDMA (1u << 1)

enum kv_wire_type {
	KV_WIRE_HELLO = 1,
	KV_WIRE_CHALLENGE = 2,
	KV_WIRE_AUTH = 3,
	KV_WIRE_AUTH_OK = 4,
	KV_WIRE_AUTH_FAIL = 5,
	KV_WIRE_GET = 16,
	KV_WIRE_GET_OK = 17,
	KV_WIRE_PUT = 18,
	KV_WIRE_PUT_OK = 19,
	KV_WIRE_HAS = 20,
	KV_WIRE_HAS_OK = 21,
	KV_WIRE_PING = 22,
	KV_WIRE_PONG = 23,
	KV_WIRE_ERR = 24,
	KV_WIRE_RDMA_EP = 32,
	KV_WIRE_LOCATE = 33,
	KV_WIRE_LOCATE_OK = 34,
	KV_WIRE_RELEASE = 35,
	KV_WIRE_RELEASE_OK = 36,
	KV_WIRE_ALLOC = 37,
	KV_WIRE_ALLOC_OK = 38,
	KV_WIRE_COMMIT = 39,
};

struct kv_wire_hdr {
	uint8_t type;
	uint16_t flags;
	uint32_t payload_len;
	uint16_t meta_len;
	uint64_t id;
};

/* an RDMA endpoint: what a peer needs to reach our QP and pool */
struct kv_wire_ep {
	uint16_t lid;
	uint8_t port;
	uint8_t mtu;
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	uint64_t addr;
	uint64_t len;
	uint8_t gid[16];
};

/*
 * A decoded frame (header + meta).  Which fields mean something depends
 * on type; the rest are zero after kv_wire_decode.  ns is NUL-terminated.
 */
struct kv_wire_msg {
	uint8_t type;
	uint64_t id;
	uint8_t hash[KV_WIRE_HASH_LEN];
	char ns[KV_WIRE_NS_MAX + 1];
	/* blk */
	uint64_t size;
	uint32_t crc;
	uint32_t block_tokens;
	bool has_parent;
	bool ns_open; /* its namespace has the open layout (store.h) */
	uint8_t parent[KV_WIRE_HASH_LEN];
	/* handshake */
	uint8_t nonce[KV_WIRE_NONCE_LEN];
	uint8_t mac[KV_WIRE_MAC_LEN];
	uint32_t transports;
	char node[KV_WIRE_ID_LEN];   /* HELLO: the client's node id */
	char target[KV_WIRE_ID_LEN]; /* HELLO: the node it dialled */
	/* replies */
	uint32_t err;	  /* ERR: positive errno */
	uint32_t present; /* HAS_OK */
	/* rdma */
	uint64_t addr;
	uint32_t rkey;
	uint64_t token;
	struct kv_wire_ep ep;
};

/* "GET", "PUT_OK", ...; "?" for an unknown type */
const char *kv_wire_type_name(unsigned type);
/* true for a type defined above */
bool kv_wire_type_known(unsigned type);
/* true for the types whose payload carries block data (GET_OK, PUT) */
bool kv_wire_type_has_data(unsigned type);

/*
 * Decode and check a header: -EAGAIN when len < KV_WIRE_HDR_LEN (need
 * more), -EBADMSG for a bad magic, type, flags or length, -EPROTO for
 * another version.
 */
int kv_wire_hdr_decode(const void *buf, size_t len, struct kv_wire_hdr *h);

/*
 * Decode the meta of a frame whose header is h: exactly h->meta_len bytes
 * at meta (len must equal it).  Checks every field and that the data
 * length (payload_len - meta_len) is what the type allows.  0 or -EBADMSG.
 */
int kv_wire_decode(const struct kv_wire_hdr *h, const void *meta, size_t len,
		   struct kv_wire_msg *m);

/* bytes of tags a frame with header h carries besides its payload */
static inline size_t kv_wire_tags_len(const struct kv_wire_hdr *h)
{
	if (!(h->flags & KV_WIRE_F_TAGGED))
		return 0;
	return KV_WIRE_TAG_LEN * (kv_wire_type_has_data(h->type) ? 2u : 1u);
}

/* set the tagged flag in an encoded header */
void kv_wire_set_tagged(void *hdr);

/* bytes of block data that follow the meta of a frame with header h */
static inline uint64_t kv_wire_data_len(const struct kv_wire_hdr *h)
{
	return (uint64_t)h->payload_len - h->meta_len;
}

/*
 * Encode m as header + meta into buf (cap bytes); for GET_OK and PUT the
 * header announces m->size bytes of data, which the caller sends after.
 * Returns the bytes written (<= KV_WIRE_HDR_LEN + KV_WIRE_META_MAX), or
 * -EINVAL for a message that would not decode (bad ns, unknown type, size
 * too big), -ENOSPC when cap is too small.
 */
long kv_wire_encode(const struct kv_wire_msg *m, void *buf, size_t cap);

/*
 * A whole frame in memory (tests, the fuzzer): parses header and meta
 * and requires the data too, and the tags of a tagged frame (not
 * checked: that takes the session's keys).  On success *data points at
 * the block data (size m->size, may be 0) and *frame_len is the frame's
 * length, tags included.
 * -EAGAIN: a prefix of a frame, more bytes needed; -EBADMSG / -EPROTO as
 * above.
 */
int kv_wire_parse(const void *buf, size_t len, struct kv_wire_msg *m,
		  const void **data, size_t *frame_len);

#endif /* KVFS_WIRE_H */

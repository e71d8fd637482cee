/*
 * wire.c - frame codec: see wire.h for the layout.
 *
 * Decoding is table-driven: each type has a fixed meta length, and the
 * types that name a namespace say where its u16 length lives; the name
 * follows the fixed part.  Nothing is read before its offset is checked
 * against the bytes given.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "kvstore/wire.h"
#include "src/common/le.h"

struct wire_type {
	const char *name;
	uint16_t fixed; /* meta bytes before the ns, if any */
	int16_t ns_off; /* offset of the u16 ns_len, -1: no ns */
	bool data;	/* block data follows the meta */
};

static const struct wire_type types[] = {
	[KV_WIRE_HELLO] = { "HELLO", 36 + 2 * KV_WIRE_ID_LEN, -1, false },
	[KV_WIRE_CHALLENGE] = { "CHALLENGE", 64, -1, false },
	[KV_WIRE_AUTH] = { "AUTH", 32, -1, false },
	[KV_WIRE_AUTH_OK] = { "AUTH_OK", 4, -1, false },
	[KV_WIRE_AUTH_FAIL] = { "AUTH_FAIL", 0, -1, false },
	[KV_WIRE_GET] = { "GET", 36, 32, false },
	[KV_WIRE_GET_OK] = { "GET_OK", 56, -1, true },
	[KV_WIRE_PUT] = { "PUT", 92, 88, true },
	[KV_WIRE_PUT_OK] = { "PUT_OK", 0, -1, false },
	[KV_WIRE_HAS] = { "HAS", 36, 32, false },
	[KV_WIRE_HAS_OK] = { "HAS_OK", 4, -1, false },
	[KV_WIRE_PING] = { "PING", 0, -1, false },
	[KV_WIRE_PONG] = { "PONG", 0, -1, false },
	[KV_WIRE_ERR] = { "ERR", 4, -1, false },
	[KV_WIRE_RDMA_EP] = { "RDMA_EP", 48, -1, false },
	[KV_WIRE_LOCATE] = { "LOCATE", 36, 32, false },
	[KV_WIRE_LOCATE_OK] = { "LOCATE_OK", 80, -1, false },
	[KV_WIRE_RELEASE] = { "RELEASE", 8, -1, false },
	[KV_WIRE_RELEASE_OK] = { "RELEASE_OK", 0, -1, false },
	[KV_WIRE_ALLOC] = { "ALLOC", 92, 88, false },
	[KV_WIRE_ALLOC_OK] = { "ALLOC_OK", 24, -1, false },
	[KV_WIRE_COMMIT] = { "COMMIT", 8, -1, false },
};

#define NTYPES (sizeof(types) / sizeof(types[0]))

bool kv_wire_type_known(unsigned type)
{
	return type < NTYPES && types[type].name != NULL;
}

const char *kv_wire_type_name(unsigned type)
{
	return kv_wire_type_known(type) ? types[type].name : "?";
}

bool kv_wire_type_has_data(unsigned type)
{
	return kv_wire_type_known(type) && types[type].data;
}

/* little-endian fields: src/common/le.h */

/* ---- header -------------------------------------------------------- */

int kv_wire_hdr_decode(const void *buf, size_t len, struct kv_wire_hdr *h)
{
	const uint8_t *p = buf;

	if (len < KV_WIRE_HDR_LEN)
		return -EAGAIN;
	if (memcmp(p, KV_WIRE_MAGIC, 4) != 0)
		return -EBADMSG;
	if (p[4] != KV_WIRE_VERSION)
		return -EPROTO;
	memset(h, 0, sizeof(*h));
	h->type = p[5];
	h->flags = kv_get_le16(p + 6);
	h->payload_len = kv_get_le32(p + 8);
	h->meta_len = kv_get_le16(p + 12);
	h->id = kv_get_le64(p + 16);
	if (!kv_wire_type_known(h->type) || (h->flags & ~KV_WIRE_F_TAGGED) ||
	    kv_get_le16(p + 14) != 0)
		return -EBADMSG;
	if (h->payload_len > KV_WIRE_MAX_PAYLOAD ||
	    h->meta_len > KV_WIRE_META_MAX || h->meta_len > h->payload_len)
		return -EBADMSG;
	if (!types[h->type].data && h->payload_len != h->meta_len)
		return -EBADMSG;
	return 0;
}

void kv_wire_set_tagged(void *hdr)
{
	uint8_t *p = hdr;

	kv_put_le16(p + 6, kv_get_le16(p + 6) | KV_WIRE_F_TAGGED);
}

/* a node id field: printable id bytes, then NULs only */
static int id_decode(const uint8_t *p, char *out)
{
	size_t n = strnlen((const char *)p, KV_WIRE_ID_LEN);

	if (n == KV_WIRE_ID_LEN)
		return -EBADMSG;
	for (size_t i = 0; i < n; i++)
		if (p[i] <= ' ' || p[i] > '~' || p[i] == '@')
			return -EBADMSG;
	for (size_t i = n; i < KV_WIRE_ID_LEN; i++)
		if (p[i])
			return -EBADMSG;
	memcpy(out, p, n + 1);
	return 0;
}

static int id_encode(uint8_t *p, const char *id)
{
	size_t n = strnlen(id, KV_WIRE_ID_LEN);

	if (n == KV_WIRE_ID_LEN)
		return -EINVAL;
	memcpy(p, id, n); /* the rest is zero already */
	return 0;
}

static void hdr_encode(uint8_t *p, uint8_t type, uint32_t payload_len,
		       uint16_t meta_len, uint64_t id)
{
	memcpy(p, KV_WIRE_MAGIC, 4);
	p[4] = KV_WIRE_VERSION;
	p[5] = type;
	kv_put_le16(p + 6, 0);
	kv_put_le32(p + 8, payload_len);
	kv_put_le16(p + 12, meta_len);
	kv_put_le16(p + 14, 0);
	kv_put_le64(p + 16, id);
}

/* ---- meta ---------------------------------------------------------- */

static int blk_decode(const uint8_t *p, struct kv_wire_msg *m)
{
	uint32_t flags = kv_get_le32(p + 16);

	m->size = kv_get_le64(p);
	m->crc = kv_get_le32(p + 8);
	m->block_tokens = kv_get_le32(p + 12);
	if ((flags & ~3u) != 0 || kv_get_le32(p + 20) != 0)
		return -EBADMSG;
	if (m->size > KV_WIRE_MAX_DATA)
		return -EBADMSG;
	m->has_parent = flags & 1u;
	m->ns_open = (flags >> 1) & 1u;
	if (m->has_parent)
		memcpy(m->parent, p + 24, KV_WIRE_HASH_LEN);
	return 0;
}

static void blk_encode(uint8_t *p, const struct kv_wire_msg *m)
{
	kv_put_le64(p, m->size);
	kv_put_le32(p + 8, m->crc);
	kv_put_le32(p + 12, m->block_tokens);
	kv_put_le32(p + 16, (m->has_parent ? 1u : 0u) | (m->ns_open ? 2u : 0u));
	kv_put_le32(p + 20, 0);
	if (m->has_parent)
		memcpy(p + 24, m->parent, KV_WIRE_HASH_LEN);
	else
		memset(p + 24, 0, KV_WIRE_HASH_LEN);
}

static void ep_decode(const uint8_t *p, struct kv_wire_ep *ep)
{
	ep->lid = kv_get_le16(p);
	ep->port = p[2];
	ep->mtu = p[3];
	ep->qpn = kv_get_le32(p + 4);
	ep->psn = kv_get_le32(p + 8);
	ep->rkey = kv_get_le32(p + 12);
	ep->addr = kv_get_le64(p + 16);
	ep->len = kv_get_le64(p + 24);
	memcpy(ep->gid, p + 32, 16);
}

static void ep_encode(uint8_t *p, const struct kv_wire_ep *ep)
{
	kv_put_le16(p, ep->lid);
	p[2] = ep->port;
	p[3] = ep->mtu;
	kv_put_le32(p + 4, ep->qpn);
	kv_put_le32(p + 8, ep->psn);
	kv_put_le32(p + 12, ep->rkey);
	kv_put_le64(p + 16, ep->addr);
	kv_put_le64(p + 24, ep->len);
	memcpy(p + 32, ep->gid, 16);
}

int kv_wire_decode(const struct kv_wire_hdr *h, const void *meta, size_t len,
		   struct kv_wire_msg *m)
{
	const struct wire_type *t;
	const uint8_t *p = meta;
	size_t nslen = 0;
	int rc = 0;

	memset(m, 0, sizeof(*m));
	if (!kv_wire_type_known(h->type) || len != h->meta_len)
		return -EBADMSG;
	t = &types[h->type];
	m->type = h->type;
	m->id = h->id;
	if (len < t->fixed)
		return -EBADMSG;
	if (t->ns_off >= 0) {
		nslen = kv_get_le16(p + t->ns_off);
		if (kv_get_le16(p + t->ns_off + 2) != 0)
			return -EBADMSG;
		if (nslen < 1 || nslen > KV_WIRE_NS_MAX ||
		    len != t->fixed + nslen)
			return -EBADMSG;
		if (memchr(p + t->fixed, 0, nslen))
			return -EBADMSG;
		memcpy(m->ns, p + t->fixed, nslen);
		m->ns[nslen] = '\0';
	} else if (len != t->fixed) {
		return -EBADMSG;
	}

	switch (h->type) {
	case KV_WIRE_HELLO:
		memcpy(m->nonce, p, KV_WIRE_NONCE_LEN);
		m->transports = kv_get_le32(p + 32);
		rc = id_decode(p + 36, m->node);
		if (rc == 0)
			rc = id_decode(p + 36 + KV_WIRE_ID_LEN, m->target);
		break;
	case KV_WIRE_CHALLENGE:
		memcpy(m->nonce, p, KV_WIRE_NONCE_LEN);
		memcpy(m->mac, p + 32, KV_WIRE_MAC_LEN);
		break;
	case KV_WIRE_AUTH:
		memcpy(m->mac, p, KV_WIRE_MAC_LEN);
		break;
	case KV_WIRE_AUTH_OK:
		m->transports = kv_get_le32(p);
		break;
	case KV_WIRE_GET:
	case KV_WIRE_HAS:
	case KV_WIRE_LOCATE:
		memcpy(m->hash, p, KV_WIRE_HASH_LEN);
		break;
	case KV_WIRE_GET_OK:
		rc = blk_decode(p, m);
		break;
	case KV_WIRE_PUT:
	case KV_WIRE_ALLOC:
		memcpy(m->hash, p, KV_WIRE_HASH_LEN);
		rc = blk_decode(p + 32, m);
		break;
	case KV_WIRE_HAS_OK:
		m->present = kv_get_le32(p);
		if (m->present > 1)
			rc = -EBADMSG;
		break;
	case KV_WIRE_ERR:
		m->err = kv_get_le32(p);
		if (m->err < 1 || m->err > 4095)
			rc = -EBADMSG;
		break;
	case KV_WIRE_RDMA_EP:
		ep_decode(p, &m->ep);
		break;
	case KV_WIRE_LOCATE_OK:
		rc = blk_decode(p, m);
		m->addr = kv_get_le64(p + 56);
		m->rkey = kv_get_le32(p + 64);
		if (kv_get_le32(p + 68) != 0)
			rc = -EBADMSG;
		m->token = kv_get_le64(p + 72);
		break;
	case KV_WIRE_ALLOC_OK:
		m->addr = kv_get_le64(p);
		m->rkey = kv_get_le32(p + 8);
		if (kv_get_le32(p + 12) != 0)
			rc = -EBADMSG;
		m->token = kv_get_le64(p + 16);
		break;
	case KV_WIRE_RELEASE:
	case KV_WIRE_COMMIT:
		m->token = kv_get_le64(p);
		break;
	default: /* empty metas */
		break;
	}
	if (rc == 0 && t->data && kv_wire_data_len(h) != m->size)
		rc = -EBADMSG;
	if (rc < 0)
		memset(m, 0, sizeof(*m));
	return rc;
}

long kv_wire_encode(const struct kv_wire_msg *m, void *buf, size_t cap)
{
	const struct wire_type *t;
	uint8_t *p = (uint8_t *)buf + KV_WIRE_HDR_LEN;
	size_t nslen = 0, mlen;
	uint64_t plen;

	if (!kv_wire_type_known(m->type))
		return -EINVAL;
	t = &types[m->type];
	if (t->ns_off >= 0) {
		nslen = strnlen(m->ns, sizeof(m->ns));
		if (nslen < 1 || nslen > KV_WIRE_NS_MAX)
			return -EINVAL;
	}
	mlen = t->fixed + nslen;
	if (cap < KV_WIRE_HDR_LEN + mlen)
		return -ENOSPC;
	if (m->size > KV_WIRE_MAX_DATA)
		return -EINVAL;
	if (m->type == KV_WIRE_ERR && (m->err < 1 || m->err > 4095))
		return -EINVAL;
	memset(p, 0, mlen);

	switch (m->type) {
	case KV_WIRE_HELLO:
		memcpy(p, m->nonce, KV_WIRE_NONCE_LEN);
		kv_put_le32(p + 32, m->transports);
		if (id_encode(p + 36, m->node) < 0 ||
		    id_encode(p + 36 + KV_WIRE_ID_LEN, m->target) < 0)
			return -EINVAL;
		break;
	case KV_WIRE_CHALLENGE:
		memcpy(p, m->nonce, KV_WIRE_NONCE_LEN);
		memcpy(p + 32, m->mac, KV_WIRE_MAC_LEN);
		break;
	case KV_WIRE_AUTH:
		memcpy(p, m->mac, KV_WIRE_MAC_LEN);
		break;
	case KV_WIRE_AUTH_OK:
		kv_put_le32(p, m->transports);
		break;
	case KV_WIRE_GET:
	case KV_WIRE_HAS:
	case KV_WIRE_LOCATE:
		memcpy(p, m->hash, KV_WIRE_HASH_LEN);
		break;
	case KV_WIRE_GET_OK:
		blk_encode(p, m);
		break;
	case KV_WIRE_PUT:
	case KV_WIRE_ALLOC:
		memcpy(p, m->hash, KV_WIRE_HASH_LEN);
		blk_encode(p + 32, m);
		break;
	case KV_WIRE_HAS_OK:
		kv_put_le32(p, m->present ? 1u : 0u);
		break;
	case KV_WIRE_ERR:
		kv_put_le32(p, m->err);
		break;
	case KV_WIRE_RDMA_EP:
		ep_encode(p, &m->ep);
		break;
	case KV_WIRE_LOCATE_OK:
		blk_encode(p, m);
		kv_put_le64(p + 56, m->addr);
		kv_put_le32(p + 64, m->rkey);
		kv_put_le64(p + 72, m->token);
		break;
	case KV_WIRE_ALLOC_OK:
		kv_put_le64(p, m->addr);
		kv_put_le32(p + 8, m->rkey);
		kv_put_le64(p + 16, m->token);
		break;
	case KV_WIRE_RELEASE:
	case KV_WIRE_COMMIT:
		kv_put_le64(p, m->token);
		break;
	default:
		break;
	}
	if (t->ns_off >= 0) {
		kv_put_le16(p + t->ns_off, (uint16_t)nslen);
		memcpy(p + t->fixed, m->ns, nslen);
	}
	plen = mlen + (t->data ? m->size : 0);
	hdr_encode(buf, m->type, (uint32_t)plen, (uint16_t)mlen, m->id);
	return (long)(KV_WIRE_HDR_LEN + mlen);
}

int kv_wire_parse(const void *buf, size_t len, struct kv_wire_msg *m,
		  const void **data, size_t *frame_len)
{
	const uint8_t *p = buf;
	struct kv_wire_hdr h;
	int rc;

	rc = kv_wire_hdr_decode(buf, len, &h);
	if (rc < 0)
		return rc;
	if (len - KV_WIRE_HDR_LEN < h.payload_len + kv_wire_tags_len(&h))
		return -EAGAIN;
	rc = kv_wire_decode(&h, p + KV_WIRE_HDR_LEN, h.meta_len, m);
	if (rc < 0)
		return rc;
	/* the data follows the meta's tag, if any */
	if (data)
		*data = p + KV_WIRE_HDR_LEN + h.meta_len +
			(kv_wire_tags_len(&h) ? KV_WIRE_TAG_LEN : 0);
	if (frame_len)
		*frame_len = KV_WIRE_HDR_LEN + (size_t)h.payload_len +
			     kv_wire_tags_len(&h);
	return 0;
}

/*
 * event.c - block events, wire format v1 (event.h).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "src/common/crc32c.h"
#include "sched/event.h"
#include "sched/event_int.h"
#include "src/common/le.h"

/* ---- what both frames share (event_int.h) ------------------------------- */

void sched_ev_hdr_put(uint8_t *p, const char *magic, uint8_t version,
		      uint16_t node, uint64_t seq, const char *ns,
		      size_t ns_len)
{
	memcpy(p, magic, 4);
	p[4] = version;
	p[5] = 0;
	kv_put_le16(p + 6, node);
	kv_put_le64(p + 8, seq);
	p[20] = (uint8_t)ns_len;
	memset(p + 21, 0, 3);
	memcpy(p + SCHED_EV_HDR, ns, ns_len);
}

int sched_ev_hdr_check(const uint8_t *p, const char *magic, uint8_t version)
{
	if (memcmp(p, magic, 4))
		return -EBADMSG;
	if (p[4] != version)
		return -EPROTONOSUPPORT;
	if (p[5] || p[21] || p[22] || p[23] || p[20] == 0)
		return -EBADMSG;
	return 0;
}

void sched_ev_crc_put(uint8_t *p, size_t size)
{
	kv_put_le32(p + size - SCHED_EV_CRC,
		    kvfs_crc32c(0, p, size - SCHED_EV_CRC));
}

int sched_ev_body_check(const uint8_t *p, size_t size, char *ns)
{
	if (kvfs_crc32c(0, p, size - SCHED_EV_CRC) !=
	    kv_get_le32(p + size - SCHED_EV_CRC))
		return -EBADMSG;
	memcpy(ns, p + SCHED_EV_HDR, p[20]);
	ns[p[20]] = 0;
	if (strlen(ns) != p[20] || kvfs_ns_valid(ns) < 0)
		return -EBADMSG;
	return 0;
}

/* ---- block-event frames ------------------------------------------------- */

static bool zero_hash(const uint8_t *h)
{
	for (int i = 0; i < KVFS_HASH_LEN; i++)
		if (h[i])
			return false;
	return true;
}

static bool rec_ok(uint8_t op, const uint8_t *hash)
{
	if (op == SCHED_EV_INSERT || op == SCHED_EV_EVICT)
		return true;
	return op == SCHED_EV_RESET && zero_hash(hash);
}

long sched_ev_encode(void *buf, size_t cap, uint16_t node, uint64_t seq,
		     const char *ns, const struct sched_ev_rec *recs,
		     uint32_t count)
{
	size_t ns_len, size;
	uint8_t *p = buf;

	if (!ns || kvfs_ns_valid(ns) < 0 || count > SCHED_EV_MAX_RECORDS ||
	    (count && !recs))
		return -EINVAL;
	for (uint32_t i = 0; i < count; i++)
		if (!rec_ok(recs[i].op, recs[i].hash))
			return -EINVAL;
	ns_len = strlen(ns);
	size = sched_ev_frame_size(ns_len, count);
	if (cap < size)
		return -ENOSPC;
	sched_ev_hdr_put(p, SCHED_EV_MAGIC, SCHED_EV_VERSION, node, seq, ns,
			 ns_len);
	kv_put_le32(p + 16, count);
	p += SCHED_EV_HDR + ns_len;
	for (uint32_t i = 0; i < count; i++, p += SCHED_EV_REC) {
		p[0] = recs[i].op;
		memcpy(p + 1, recs[i].hash, KVFS_HASH_LEN);
	}
	sched_ev_crc_put(buf, size);
	return (long)size;
}

/* ---- decoding ----------------------------------------------------------- */

/* the conductor's rule for a stream's first frame (event.h) */
static bool opens_with_reset(const uint8_t *p)
{
	return kv_get_le32(p + 16) >= 1 &&
	       p[SCHED_EV_HDR + p[20]] == SCHED_EV_RESET;
}

void sched_ev_decoder_init(struct sched_ev_decoder *d)
{
	memset(d, 0, sizeof(*d));
}

void sched_ev_decoder_release(struct sched_ev_decoder *d)
{
	free(d->buf);
	d->buf = NULL;
	d->len = d->cap = 0;
}

/*
 * The header's own checks, as soon as its 24 bytes are in: a stream that
 * is not ours is refused before we buffer megabytes of it.  Sets *size to
 * the whole frame's.
 */
static int check_header(const struct sched_ev_decoder *d, const uint8_t *p,
			size_t *size)
{
	uint32_t count = (uint32_t)kv_get_le32(p + 16);
	int rc = sched_ev_hdr_check(p, SCHED_EV_MAGIC, SCHED_EV_VERSION);

	if (rc < 0)
		return rc;
	if (count > SCHED_EV_MAX_RECORDS)
		return -EBADMSG;
	if (d->started && (kv_get_le16(p + 6) != d->node ||
			   kv_get_le64(p + 8) != d->next_seq))
		return -EPROTO;
	if (!d->started && kv_get_le64(p + 8) != 0)
		return -EPROTO;
	*size = sched_ev_frame_size(p[20], count);
	return 0;
}

/* a whole frame: CRC, namespace, every record; nothing is applied yet */
static int check_frame(const uint8_t *p, size_t size, char *ns)
{
	uint32_t count = (uint32_t)kv_get_le32(p + 16);
	const uint8_t *r = p + SCHED_EV_HDR + p[20];

	if (sched_ev_body_check(p, size, ns) < 0)
		return -EBADMSG;
	for (uint32_t i = 0; i < count; i++, r += SCHED_EV_REC)
		if (!rec_ok(r[0], r + 1))
			return -EBADMSG;
	return 0;
}

static int deliver(struct sched_ev_decoder *d, const uint8_t *p, sched_ev_fn fn,
		   void *arg)
{
	uint32_t count = (uint32_t)kv_get_le32(p + 16);
	const uint8_t *r = p + SCHED_EV_HDR + p[20];
	struct sched_ev ev = {
		.node = (uint16_t)kv_get_le16(p + 6),
		.seq = kv_get_le64(p + 8),
		.ns = (const char *)p + SCHED_EV_HDR,
		.ns_len = p[20],
	};

	d->started = true;
	d->node = ev.node;
	d->next_seq = ev.seq + 1;
	d->frames++;
	for (uint32_t i = 0; i < count; i++, r += SCHED_EV_REC) {
		int rc;

		ev.op = (enum sched_ev_op)r[0];
		ev.hash = r + 1;
		rc = fn(arg, &ev);
		if (rc < 0)
			return rc;
		d->records++;
	}
	return 0;
}

static int buf_fit(struct sched_ev_decoder *d, size_t need)
{
	size_t cap = d->cap ? d->cap : 4096;
	uint8_t *b;

	if (need <= d->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	b = realloc(d->buf, cap);
	if (!b)
		return -ENOMEM;
	d->buf = b;
	d->cap = cap;
	return 0;
}

/* frames at the start of d->buf[0..len); keeps the incomplete tail */
static int drain(struct sched_ev_decoder *d, sched_ev_fn fn, void *arg)
{
	char ns[KVFS_NS_MAX + 1];
	size_t off = 0, size;
	int rc = 0;

	while (d->len - off >= SCHED_EV_HDR) {
		const uint8_t *p = d->buf + off;

		rc = check_header(d, p, &size);
		if (rc < 0 || d->len - off < size)
			break;
		rc = check_frame(p, size, ns);
		if (rc == 0 && !d->started && d->reset_first &&
		    !opens_with_reset(p))
			rc = -ENOMSG;
		if (rc == 0)
			rc = deliver(d, p, fn, arg);
		if (rc < 0)
			break;
		off += size;
	}
	memmove(d->buf, d->buf + off, d->len - off);
	d->len -= off;
	return rc;
}

int sched_ev_feed(struct sched_ev_decoder *d, const void *data, size_t len,
		  sched_ev_fn fn, void *arg)
{
	int rc;

	if (d->err)
		return d->err;
	rc = buf_fit(d, d->len + len);
	if (rc < 0)
		return d->err = rc;
	memcpy(d->buf + d->len, data, len);
	d->len += len;
	rc = drain(d, fn, arg);
	if (rc < 0)
		d->err = rc;
	return rc;
}

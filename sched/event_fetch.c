/*
 * event_fetch.c - FETCH frames, conductor -> kvfsd (event.h, "FETCH"):
 * the encoder the conductor runs and the checks kvfsd runs, without side
 * effects, so that both ends and the unit tests share them.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "sched/event.h"
#include "sched/event_int.h"
#include "src/common/le.h"

/* the name follows the shared header fields (event_int.h) */
_Static_assert(SCHED_FE_HDR == SCHED_EV_HDR, "FETCH header size");

long sched_fe_encode(void *buf, size_t cap, uint16_t node, uint64_t seq,
		     uint16_t src, const char *ns, const uint8_t *hashes,
		     uint32_t count)
{
	uint8_t *p = buf;
	size_t ns_len, size;

	if (!ns || kvfs_ns_valid(ns) < 0 || !hashes || count == 0 ||
	    count > SCHED_FE_MAX_RECORDS)
		return -EINVAL;
	ns_len = strlen(ns);
	size = sched_fe_frame_size(ns_len, count);
	if (cap < size)
		return -ENOSPC;
	sched_ev_hdr_put(p, SCHED_FE_MAGIC, SCHED_FE_VERSION, node, seq, ns,
			 ns_len);
	kv_put_le16(p + 16, src);
	kv_put_le16(p + 18, (uint16_t)count);
	memcpy(p + SCHED_FE_HDR + ns_len, hashes,
	       (size_t)count * KVFS_HASH_LEN);
	sched_ev_crc_put(p, size);
	return (long)size;
}

long sched_fe_frame_len(const void *hdr)
{
	const uint8_t *p = hdr;
	uint16_t count = kv_get_le16(p + 18);
	int rc = sched_ev_hdr_check(p, SCHED_FE_MAGIC, SCHED_FE_VERSION);

	if (rc < 0)
		return rc;
	if (count == 0 || count > SCHED_FE_MAX_RECORDS)
		return -EBADMSG;
	return (long)sched_fe_frame_size(p[20], count);
}

int sched_fe_decode(const void *buf, size_t len, struct sched_fe *out)
{
	const uint8_t *p = buf;
	char ns[KVFS_NS_MAX + 1];
	long size;

	if (len < SCHED_FE_HDR)
		return -EBADMSG;
	size = sched_fe_frame_len(p);
	if (size < 0)
		return (int)size;
	if ((size_t)size != len)
		return -EBADMSG;
	if (sched_ev_body_check(p, len, ns) < 0)
		return -EBADMSG;
	out->node = kv_get_le16(p + 6);
	out->seq = kv_get_le64(p + 8);
	out->src = kv_get_le16(p + 16);
	out->count = kv_get_le16(p + 18);
	out->ns = (const char *)p + SCHED_FE_HDR;
	out->ns_len = p[20];
	out->hashes = p + SCHED_FE_HDR + p[20];
	return 0;
}

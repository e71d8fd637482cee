/*
 * event_fetch.c - FETCH frames, conductor -> kvfsd (event.h, "FETCH"):
 * the encoder the conductor runs and the checks kvfsd runs, without side
 * effects, so that both ends and the unit tests share them.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "sched/event.h"
#include "src/common/crc32c.h"
#include "src/common/le.h"

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
	memcpy(p, SCHED_FE_MAGIC, 4);
	p[4] = SCHED_FE_VERSION;
	p[5] = 0;
	kv_put_le16(p + 6, node);
	kv_put_le64(p + 8, seq);
	kv_put_le16(p + 16, src);
	kv_put_le16(p + 18, (uint16_t)count);
	p[20] = (uint8_t)ns_len;
	memset(p + 21, 0, 3);
	memcpy(p + SCHED_FE_HDR, ns, ns_len);
	memcpy(p + SCHED_FE_HDR + ns_len, hashes,
	       (size_t)count * KVFS_HASH_LEN);
	kv_put_le32(p + size - SCHED_EV_CRC,
		    kvfs_crc32c(0, buf, size - SCHED_EV_CRC));
	return (long)size;
}

long sched_fe_frame_len(const void *hdr)
{
	const uint8_t *p = hdr;
	uint16_t count = kv_get_le16(p + 18);

	if (memcmp(p, SCHED_FE_MAGIC, 4))
		return -EBADMSG;
	if (p[4] != SCHED_FE_VERSION)
		return -EPROTONOSUPPORT;
	if (p[5] || p[21] || p[22] || p[23] || p[20] == 0 || count == 0 ||
	    count > SCHED_FE_MAX_RECORDS)
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
	if (kvfs_crc32c(0, p, len - SCHED_EV_CRC) !=
	    kv_get_le32(p + len - SCHED_EV_CRC))
		return -EBADMSG;
	memcpy(ns, p + SCHED_FE_HDR, p[20]);
	ns[p[20]] = 0;
	if (strlen(ns) != p[20] || kvfs_ns_valid(ns) < 0)
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

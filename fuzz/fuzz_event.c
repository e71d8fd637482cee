/*
 * fuzz_event.c - libFuzzer target: arbitrary bytes into the block-event
 * stream decoder (sched/event.h), fed in pieces as a socket would.
 *
 * The first byte chooses the piece size and whether the stream must open
 * with a RESET; with its bit 7 set, every frame-shaped run of the rest
 * gets its CRC-32C fixed first, so that the fuzzer reaches the checks
 * after the CRC.  Every record the decoder hands out must be one the
 * format allows, and a refused stream must stay refused.  The same bytes
 * then go, whole, to the FETCH frame's checks (event.h, "FETCH"), its
 * CRC fixed the same way: a frame they accept must be one the format
 * allows, of the length its header says.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sched/event.h"
#include "src/common/crc32c.h"
#include "src/common/le.h"

struct seen {
	uint16_t node;
	bool any;
};

static int check(void *arg, const struct sched_ev *ev)
{
	struct seen *s = arg;
	static const uint8_t zero[KVFS_HASH_LEN];

	if (ev->op != SCHED_EV_INSERT && ev->op != SCHED_EV_EVICT &&
	    ev->op != SCHED_EV_RESET)
		abort();
	if (ev->ns_len == 0 || memchr(ev->ns, '/', ev->ns_len))
		abort();
	if (ev->op == SCHED_EV_RESET && memcmp(ev->hash, zero, sizeof(zero)))
		abort();
	if (s->any && ev->node != s->node)
		abort(); /* the node never changes within a stream */
	s->node = ev->node;
	s->any = true;
	return 0;
}

/* the CRC of each frame-shaped run, put right */
static void fix_crcs(uint8_t *p, size_t len)
{
	size_t off = 0;

	while (len - off >= SCHED_EV_HDR) {
		uint32_t count = (uint32_t)kv_get_le32(p + off + 16);
		size_t size;

		if (count > SCHED_EV_MAX_RECORDS)
			return;
		size = sched_ev_frame_size(p[off + 20], count);
		if (size > len - off)
			return;
		kv_put_le32(p + off + size - SCHED_EV_CRC,
			    kvfs_crc32c(0, p + off, size - SCHED_EV_CRC));
		off += size;
	}
}

/* the FETCH frame's checks on p[0..len) */
static void fetch(uint8_t *p, size_t len, bool fix)
{
	struct sched_fe fe;
	long n;

	if (len < SCHED_FE_HDR)
		return;
	n = sched_fe_frame_len(p);
	if (n > 0 && fix && (size_t)n <= len)
		kv_put_le32(p + n - SCHED_EV_CRC,
			    kvfs_crc32c(0, p, (size_t)n - SCHED_EV_CRC));
	if (n > 0 && (size_t)n < len)
		len = (size_t)n;
	if (sched_fe_decode(p, len, &fe) < 0)
		return;
	if ((long)len != n || fe.count == 0 ||
	    fe.count > SCHED_FE_MAX_RECORDS || fe.ns_len == 0 ||
	    memchr(fe.ns, '/', fe.ns_len) || memchr(fe.ns, 0, fe.ns_len) ||
	    sched_fe_frame_size(fe.ns_len, fe.count) != len)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sched_ev_decoder d;
	struct seen s = { 0 };
	size_t piece;
	uint8_t *buf;
	int rc = 0;

	if (size < 1)
		return 0;
	piece = 1 + (data[0] & 0x3f) * 37;
	buf = malloc(size);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, size - 1);
	if (data[0] & 0x80)
		fix_crcs(buf, size - 1);
	sched_ev_decoder_init(&d);
	d.reset_first = data[0] & 0x40;
	for (size_t off = 0; off < size - 1; off += piece) {
		size_t n = size - 1 - off < piece ? size - 1 - off : piece;
		int r = sched_ev_feed(&d, buf + off, n, check, &s);

		if (rc < 0 && r != rc)
			abort(); /* sticky: a refused stream stays refused */
		rc = r;
	}
	sched_ev_decoder_release(&d);
	memcpy(buf, data + 1, size - 1);
	fetch(buf, size - 1, data[0] & 0x80);
	free(buf);
	return 0;
}

#include "config.h"

#include <pthread.h>
#include <string.h>

#include "crc32c.h"

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc_hw;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (POLY & (0u - (c & 1)));
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
					  crc_table[0][crc_table[t - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

/* slicing-by-8: the portable path */
static uint32_t crc_sw(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len && ((uintptr_t)p & 7)) {
		crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
		len--;
	}
	while (len >= 8) {
		uint64_t v;

		/* the table layout assumes a little-endian load */
		memcpy(&v, p, 8);
		if (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
			v = __builtin_bswap64(v);
		crc ^= (uint32_t)v;
		crc = crc_table[7][crc & 0xff] ^
		      crc_table[6][(crc >> 8) & 0xff] ^
		      crc_table[5][(crc >> 16) & 0xff] ^
		      crc_table[4][crc >> 24] ^
		      crc_table[3][(v >> 32) & 0xff] ^
		      crc_table[2][(v >> 40) & 0xff] ^
		      crc_table[1][(v >> 48) & 0xff] ^
		      crc_table[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
/*
 * One dependent stream of crc32q: 8 bytes per 3 cycles, several GB/s, which
 * is ample next to the cost of writing the block.  Interleaved streams
 * would be faster but need a combine step; not worth it yet.
 */
__attribute__((target("sse4.2")))
static uint32_t crc_hw_run(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = crc;

	while (len && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		len--;
	}
	while (len >= 32) {
		uint64_t a, b, d, e;

		memcpy(&a, p, 8);
		memcpy(&b, p + 8, 8);
		memcpy(&d, p + 16, 8);
		memcpy(&e, p + 24, 8);
		c = __builtin_ia32_crc32di(c, a);
		c = __builtin_ia32_crc32di(c, b);
		c = __builtin_ia32_crc32di(c, d);
		c = __builtin_ia32_crc32di(c, e);
		p += 32;
		len -= 32;
	}
	while (len >= 8) {
		uint64_t a;

		memcpy(&a, p, 8);
		c = __builtin_ia32_crc32di(c, a);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

uint32_t kvfs_crc32c(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	crc = ~crc;
#if defined(__x86_64__)
	if (crc_hw)
		return ~crc_hw_run(crc, buf, len);
#endif
	return ~crc_sw(crc, buf, len);
}

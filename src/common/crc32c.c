#include "config.h"

#include <pthread.h>
#include <string.h>

#include "src/common/crc32c.h"

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static int crc_hw;

#if defined(__x86_64__)
static void crc_zero_init(void);
#endif

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
			crc_table[t][i] =
				(crc_table[t - 1][i] >> 8) ^
				crc_table[0][crc_table[t - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc_hw = __builtin_cpu_supports("sse4.2");
	if (crc_hw)
		crc_zero_init();
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
		      crc_table[4][crc >> 24] ^ crc_table[3][(v >> 32) & 0xff] ^
		      crc_table[2][(v >> 40) & 0xff] ^
		      crc_table[1][(v >> 48) & 0xff] ^ crc_table[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
/*
 * crc32q has a latency of 3 cycles and a throughput of 1, so one dependent
 * stream runs at a third of what the unit can do.  Three streams over
 * three consecutive STRIDE-byte pieces run at once, and are joined after:
 * the CRC register is linear, so with R(c, X) the register after feeding
 * X from c,
 *
 *   R(c, A B C) = Z(Z(R(c, A)) ^ R(0, B)) ^ R(0, C)
 *
 * where Z(x) = R(x, STRIDE zero bytes), a linear map of 32 bits, applied
 * through four byte tables made once at init (crc_zero).
 */
#define STRIDE 4096u

static uint32_t crc_zero[4][256];

__attribute__((target("sse4.2"))) static uint32_t
crc_hw_1(uint32_t crc, const unsigned char *p, size_t len)
{
	uint64_t c = crc;

	while (len && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		len--;
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

/* Z(x): the register x after STRIDE zero bytes */
static uint32_t crc_shift(uint32_t x)
{
	return crc_zero[0][x & 0xff] ^ crc_zero[1][(x >> 8) & 0xff] ^
	       crc_zero[2][(x >> 16) & 0xff] ^ crc_zero[3][x >> 24];
}

__attribute__((target("sse4.2"))) static void crc_zero_init(void)
{
	static const unsigned char zeros[STRIDE];
	uint32_t col[32];

	for (int i = 0; i < 32; i++)
		col[i] = crc_hw_1(1u << i, zeros, STRIDE);
	for (int t = 0; t < 4; t++)
		for (uint32_t b = 0; b < 256; b++) {
			uint32_t v = 0;

			for (int i = 0; i < 8; i++)
				if (b & (1u << i))
					v ^= col[t * 8 + i];
			crc_zero[t][b] = v;
		}
}

__attribute__((target("sse4.2"))) static uint32_t
crc_hw_run(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len >= 3 * STRIDE) {
		uint64_t c0 = crc, c1 = 0, c2 = 0;
		const unsigned char *a = p, *b = p + STRIDE,
				    *d = p + 2 * STRIDE;

		for (size_t k = 0; k < STRIDE; k += 8) {
			uint64_t x, y, z;

			memcpy(&x, a + k, 8);
			memcpy(&y, b + k, 8);
			memcpy(&z, d + k, 8);
			c0 = __builtin_ia32_crc32di(c0, x);
			c1 = __builtin_ia32_crc32di(c1, y);
			c2 = __builtin_ia32_crc32di(c2, z);
		}
		crc = crc_shift(crc_shift((uint32_t)c0) ^ (uint32_t)c1) ^
		      (uint32_t)c2;
		p += 3 * STRIDE;
		len -= 3 * STRIDE;
	}
	return crc_hw_1(crc, p, len);
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

/* ---- combining (zlib's crc32_combine, for CRC-32C) ----------------- */

/* a * b mod P, both polynomials reflected (bit 31 the x^0 term) */
static uint32_t multmodp(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;

	while (a) {
		if (a & m) {
			p ^= b;
			a &= ~m;
		}
		m >>= 1;
		b = (b >> 1) ^ (POLY & (0u - (b & 1)));
	}
	return p;
}

/* x^(8n) mod P: the operator that moves a raw CRC past n zero bytes */
static uint32_t x8nmodp(uint64_t n)
{
	uint32_t sq = 1u << 30, p = 1u << 31; /* x^1, x^0 */

	/* sq runs through x^(2^k), from k = 0; the exponent is 8n */
	for (int k = 0; k < 3; k++)
		sq = multmodp(sq, sq);
	for (; n; n >>= 1) {
		if (n & 1)
			p = multmodp(sq, p);
		sq = multmodp(sq, sq);
	}
	return p;
}

uint32_t kvfs_crc32c_shift(uint32_t raw, uint64_t n)
{
	return multmodp(x8nmodp(n), raw);
}

void kvfs_crc32c_shift_table(uint32_t tab[4][256], uint64_t n)
{
	uint32_t op = x8nmodp(n);

	for (int j = 0; j < 4; j++)
		for (uint32_t b = 0; b < 256; b++)
			tab[j][b] = multmodp(op, b << (8 * j));
}

uint32_t kvfs_crc32c_chunks(const uint32_t tab[4][256], const uint32_t *raw,
			    uint64_t chunk, uint64_t len)
{
	uint64_t off = 0;
	uint32_t acc = 0;

	for (size_t i = 0; off < len; i++, off += chunk) {
		uint64_t n = len - off < chunk ? len - off : chunk;

		if (n == chunk)
			acc = tab[0][acc & 0xff] ^ tab[1][(acc >> 8) & 0xff] ^
			      tab[2][(acc >> 16) & 0xff] ^ tab[3][acc >> 24];
		else
			acc = kvfs_crc32c_shift(acc, n);
		acc ^= raw[i];
	}
	/* the standard CRC starts from ~0 and ends inverted */
	return ~(acc ^ kvfs_crc32c_shift(0xffffffffu, len));
}

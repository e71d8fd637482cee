/*
 * fuse_pattern.h - block bytes derived from the block's name, shared by
 * the FUSE test helpers: any process can check a block it did not write,
 * byte for byte, knowing only its name.
 */
#ifndef KVFS_TEST_FUSE_PATTERN_H
#define KVFS_TEST_FUSE_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static inline uint64_t pat_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* the seed of a path: FNV-1a of its last component */
static inline uint64_t pat_seed(const char *path)
{
	const char *base = strrchr(path, '/');
	uint64_t h = 0xcbf29ce484222325ull;

	for (base = base ? base + 1 : path; *base; base++) {
		h ^= (unsigned char)*base;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* byte i of the block with this seed */
static inline uint8_t pat_byte(uint64_t seed, uint64_t i)
{
	return (uint8_t)(pat_mix(seed ^ (i >> 3)) >> ((i & 7) * 8));
}

static inline void pat_fill(uint64_t seed, uint64_t off, uint8_t *buf,
			    size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pat_byte(seed, off + i);
}

/* the offset of the first wrong byte, or -1 */
static inline long long pat_check(uint64_t seed, uint64_t off,
				  const uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != pat_byte(seed, off + i))
			return (long long)(off + i);
	return -1;
}

/* name k of a test set: 64 lowercase hex chars */
static inline void pat_name(uint64_t set, uint64_t k, char out[65])
{
	for (int w = 0; w < 4; w++)
		snprintf(out + 16 * w, 17, "%016llx",
			 (unsigned long long)pat_mix(set ^ pat_mix(k * 4 + w)));
}

#endif /* KVFS_TEST_FUSE_PATTERN_H */

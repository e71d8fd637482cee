/*
 * le.h - little-endian integers in byte buffers, for every on-disk and
 * on-wire format of kvfs (pool header, index keys and values, peer
 * frames, block events, hash-chain tokens).  Byte by byte, so alignment
 * and the host's byte order never matter; compilers turn each into one
 * load or store on little-endian hosts.
 */
#ifndef KVFS_COMMON_LE_H
#define KVFS_COMMON_LE_H

#include <stdint.h>

static inline void kv_put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void kv_put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void kv_put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t kv_get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static inline uint32_t kv_get_le32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static inline uint64_t kv_get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

#endif /* KVFS_COMMON_LE_H */

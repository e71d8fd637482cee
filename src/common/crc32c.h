/*
 * crc32c.h - CRC-32C (Castagnoli), the block checksum.
 *
 * Why CRC-32C: it detects the damage a pool can suffer (a torn write from a
 * killed writer, a stray overwrite) and runs at memory speed with SSE4.2,
 * so sealing a block costs little next to writing it.  It is not a defence
 * against an attacker; the content address (SHA-256 of tokens) names the
 * block, the checksum only guards its bytes.
 */
#ifndef KVFS_CRC32C_H
#define KVFS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* crc of buf continuing from crc (start with 0) */
uint32_t kvfs_crc32c(uint32_t crc, const void *buf, size_t len);

/*
 * A CRC from the CRCs of its pieces, as a GPU computes them (libkvfs):
 * raw[i] is the raw CRC (no initial or final inversion, from 0) of bytes
 * i * chunk .. of a block of len bytes, i.e. ~kvfs_crc32c(~0u, piece).
 * kvfs_crc32c_chunks() returns kvfs_crc32c(0, block, len); tab, from
 * kvfs_crc32c_shift_table(tab, chunk), moves a raw CRC past chunk zero
 * bytes, as kvfs_crc32c_shift(raw, chunk) does, by four lookups.
 */
uint32_t kvfs_crc32c_shift(uint32_t raw, uint64_t n);
void kvfs_crc32c_shift_table(uint32_t tab[4][256], uint64_t n);
uint32_t kvfs_crc32c_chunks(const uint32_t tab[4][256], const uint32_t *raw,
			    uint64_t chunk, uint64_t len);

#endif /* KVFS_CRC32C_H */

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

#endif /* KVFS_CRC32C_H */

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) as Kafka uses it for
 * RecordBatch v2.  engine_crc32c_update() dispatches once, at first call, to an
 * SSE4.2 loop (8 bytes per crc32 instruction) or a slicing-by-8 table loop.
 * Callers pass and receive the finalised value: start with 0. */
#ifndef ENGINE_CRC32C_H
#define ENGINE_CRC32C_H
#include <stddef.h>
#include <stdint.h>

uint32_t engine_crc32c_update(uint32_t crc, const uint8_t *data, size_t len);
uint32_t engine_crc32c_sw(uint32_t crc, const uint8_t *data, size_t len);
int engine_crc32c_has_hw(void);

#endif

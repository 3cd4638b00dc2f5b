/* CRC-32C: SSE4.2 hardware path with a runtime CPU check, slicing-by-8
 * fallback.  Written for this project; see crc32c.h for the contract. */
#include "crc32c.h"
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static int table_ready = 0;

static void build_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = table[0][n];
        for (int t = 1; t < 8; t++) {
            c = table[0][c & 0xFF] ^ (c >> 8);
            table[t][n] = c;
        }
    }
    table_ready = 1;
}

uint32_t engine_crc32c_sw(uint32_t crc, const uint8_t *p, size_t len) {
    if (!table_ready)
        build_table();
    crc = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = table[7][w & 0xFF] ^ table[6][(w >> 8) & 0xFF] ^
              table[5][(w >> 16) & 0xFF] ^ table[4][(w >> 24) & 0xFF] ^
              table[3][(w >> 32) & 0xFF] ^ table[2][(w >> 40) & 0xFF] ^
              table[1][(w >> 48) & 0xFF] ^ table[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define HAVE_HW_PATH 1

__attribute__((target("sse4.2")))
static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p, size_t len) {
    uint64_t c = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        len--;
    }
    /* Four independent 8-byte steps per iteration keep the pipeline busy
     * even though each crc32 depends on the previous one. */
    while (len >= 32) {
        uint64_t a, b, d, e;
        memcpy(&a, p, 8); memcpy(&b, p + 8, 8);
        memcpy(&d, p + 16, 8); memcpy(&e, p + 24, 8);
        c = _mm_crc32_u64(c, a);
        c = _mm_crc32_u64(c, b);
        c = _mm_crc32_u64(c, d);
        c = _mm_crc32_u64(c, e);
        p += 32;
        len -= 32;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        len -= 8;
    }
    while (len--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#endif

static int hw_state = -1; /* -1 unknown, 0 no, 1 yes */

int engine_crc32c_has_hw(void) {
    if (hw_state < 0) {
#ifdef HAVE_HW_PATH
        __builtin_cpu_init();
        hw_state = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
        hw_state = 0;
#endif
    }
    return hw_state;
}

uint32_t engine_crc32c_update(uint32_t crc, const uint8_t *data, size_t len) {
#ifdef HAVE_HW_PATH
    if (engine_crc32c_has_hw())
        return crc32c_hw(crc, data, len);
#endif
    return engine_crc32c_sw(crc, data, len);
}

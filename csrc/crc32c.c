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

/* Three independent streams hide the 3-cycle latency of the crc32
 * instruction.  The buffer is cut into rounds of 3 x BLOCK bytes; stream A
 * continues the running register, B and C start from 0, and the register of
 * the concatenation is shift(A, 2*BLOCK) ^ shift(B, BLOCK) ^ C, where
 * shift(x, n) is the register after feeding n zero bytes from x -- a linear
 * map over GF(2), applied with four 256-entry tables per shift. */
#define BLOCK 4096

static uint32_t shift1[4][256], shift2[4][256];
static int shift_ready = 0;

__attribute__((target("sse4.2")))
static uint32_t zeros_hw(uint32_t reg, size_t n) {
    uint64_t c = reg;
    for (size_t i = 0; i < n / 8; i++)
        c = _mm_crc32_u64(c, 0);
    return (uint32_t)c;
}

__attribute__((target("sse4.2")))
static void build_shift_tables(void) {
    uint32_t basis1[32], basis2[32];
    for (int bit = 0; bit < 32; bit++) {
        basis1[bit] = zeros_hw(1u << bit, BLOCK);
        basis2[bit] = zeros_hw(1u << bit, 2 * BLOCK);
    }
    for (int k = 0; k < 4; k++) {
        for (int b = 0; b < 256; b++) {
            uint32_t v1 = 0, v2 = 0;
            for (int j = 0; j < 8; j++) {
                if (b & (1 << j)) {
                    v1 ^= basis1[8 * k + j];
                    v2 ^= basis2[8 * k + j];
                }
            }
            shift1[k][b] = v1;
            shift2[k][b] = v2;
        }
    }
    shift_ready = 1;
}

static inline uint32_t apply_shift(uint32_t t[4][256], uint32_t x) {
    return t[0][x & 0xFF] ^ t[1][(x >> 8) & 0xFF] ^ t[2][(x >> 16) & 0xFF] ^ t[3][x >> 24];
}

__attribute__((target("sse4.2")))
static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p, size_t len) {
    uint64_t c = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        len--;
    }
    if (len >= 3 * BLOCK) {
        if (!shift_ready)
            build_shift_tables();
        while (len >= 3 * BLOCK) {
            uint64_t a = c, b = 0, d = 0;
            const uint8_t *pb = p + BLOCK, *pd = p + 2 * BLOCK;
            for (size_t i = 0; i < BLOCK; i += 8) {
                uint64_t wa, wb, wd;
                memcpy(&wa, p + i, 8);
                memcpy(&wb, pb + i, 8);
                memcpy(&wd, pd + i, 8);
                a = _mm_crc32_u64(a, wa);
                b = _mm_crc32_u64(b, wb);
                d = _mm_crc32_u64(d, wd);
            }
            c = apply_shift(shift2, (uint32_t)a) ^ apply_shift(shift1, (uint32_t)b) ^ (uint32_t)d;
            p += 3 * BLOCK;
            len -= 3 * BLOCK;
        }
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

// AMX bf16 peak loop: tdpbf16ps on tile registers (compiled with -mamx-tile -mamx-bf16). Each instruction
// multiplies a 16 × 32 bf16 tile by a 32 × 16 one into a 16 × 16 fp32 tile: 16·16·32 products and sums,
// 16 384 floating-point operations. Linux gives a process the tile data registers only on request, which
// core/cpu_features.cpp makes when it detects the amx_bf16 level; a thread loads its own tile configuration.
#include <immintrin.h>

#include <cstdint>

#include "ceilings.h"

namespace sieve::bench {

namespace {

// Palette 1: tiles 0–7 of 16 rows × 64 bytes each.
struct alignas(64) TileConfig {
    uint8_t palette = 1, start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
    uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

}  // namespace

double dot_bf16_loop_amx(int64_t iterations) {
    const TileConfig config;
    _tile_loadconfig(&config);
    alignas(64) uint16_t a[16 * 32], b[16 * 32];
    for (uint16_t& v : a) v = 0x3f80;  // 1.0
    for (uint16_t& v : b) v = 0x3380;  // 2^-24: sums stay small
    alignas(64) float c[16 * 16] = {};
    _tile_loadd(0, c, 64);
    _tile_loadd(1, c, 64);
    _tile_loadd(2, c, 64);
    _tile_loadd(3, c, 64);
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a, 64);
    _tile_loadd(6, b, 64);
    _tile_loadd(7, b, 64);
    for (int64_t it = 0; it < iterations; ++it) {  // four independent accumulators
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c, 64);
    volatile float sink = c[0] + c[255];
    (void)sink;
    _tile_release();
    return static_cast<double>(iterations) * 4 * 16384;
}

}  // namespace sieve::bench

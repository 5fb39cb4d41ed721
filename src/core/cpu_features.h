// What the processor (and the OS, through XCR0) lets sieve use, and the ISA levels that the cpu
// backend compiles kernels for. SIEVE_ISA=scalar|avx2|avx512|avx512_bf16|amx_bf16 caps the level used, so
// a machine can run (and test) every lower path.
#pragma once

#include <string_view>
#include <optional>
#include <vector>

namespace sieve {

struct CpuFeatures {
    bool avx2 = false;
    bool fma = false;
    bool f16c = false;
    bool avx512f = false;
    bool avx512bw = false;
    bool avx512vl = false;
    bool avx512dq = false;
    bool avx512_bf16 = false;
    bool avx512_vbmi = false;  // vpermi2b (byte table lookups); SIEVE_NO_VBMI=1 hides it
    bool avx512_vnni = false;
    bool amx_tile = false;
    bool amx_bf16 = false;
    bool amx_granted = false;  // Linux gave the process the tile data registers (arch_prctl ARCH_REQ_XCOMP_PERM)
};

// Detected once (cpuid + xgetbv, and the AMX tile permission asked of Linux), independent of SIEVE_ISA.
const CpuFeatures& cpu_features();

// Kernel levels, ordered: a level implies every lower one.
enum class Isa { scalar = 0, avx2 = 1, avx512 = 2, avx512_bf16 = 3, amx_bf16 = 4 };

std::string_view isa_name(Isa isa);
std::optional<Isa> isa_from_name(std::string_view name);
// The highest level the hardware supports (avx2 = AVX2+FMA+F16C; avx512 = F+BW+VL+DQ;
// avx512_bf16 = avx512 + AVX512_BF16; amx_bf16 = avx512_bf16 + AMX-TILE + AMX-BF16, with the tile
// registers granted by the OS).
Isa hardware_isa();
// hardware_isa() capped by SIEVE_ISA when set; an unknown SIEVE_ISA value is ignored with a
// warning on stderr (printed once).
Isa active_isa();
// Every level from scalar up to active_isa(): what the conformance harness tests.
std::vector<Isa> supported_isas();

}  // namespace sieve

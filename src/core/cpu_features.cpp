#include "core/cpu_features.h"

#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace sieve {

namespace {

// Linux hands a process the AMX tile data registers (XTILEDATA, 8 KiB of state per thread) only when asked,
// once for the whole process, before any thread runs a tile instruction.
bool request_amx_tiles() {
#if defined(__linux__)
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
}

uint64_t read_xcr0() {
    uint32_t eax = 0, edx = 0;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures detect() {
    CpuFeatures f;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
    const bool osxsave = ecx & (1u << 27);
    const bool fma = ecx & (1u << 12);
    const bool f16c = ecx & (1u << 29);
    if (!osxsave) return f;
    const uint64_t xcr0 = read_xcr0();
    const bool os_avx = (xcr0 & 0x6) == 0x6;             // XMM + YMM state
    const bool os_avx512 = (xcr0 & 0xe6) == 0xe6;        // + opmask, ZMM_Hi256, Hi16_ZMM
    const bool os_amx = (xcr0 & 0x60000) == 0x60000;     // XTILECFG + XTILEDATA
    unsigned max_leaf = __get_cpuid_max(0, nullptr);
    if (max_leaf < 7) return f;
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    const unsigned ebx7 = ebx, ecx7 = ecx, edx7 = edx;
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    const unsigned eax7_1 = eax;
    if (os_avx) {
        f.avx2 = ebx7 & (1u << 5);
        f.fma = fma;
        f.f16c = f16c;
    }
    if (os_avx512) {
        f.avx512f = ebx7 & (1u << 16);
        f.avx512dq = ebx7 & (1u << 17);
        f.avx512bw = ebx7 & (1u << 30);
        f.avx512vl = ebx7 & (1u << 31);
        f.avx512_vnni = ecx7 & (1u << 11);
        f.avx512_bf16 = eax7_1 & (1u << 5);
        // SIEVE_NO_VBMI=1 hides VBMI, so that the paths for processors without it (AVX512_BF16 without
        // VBMI: Cooper Lake) run and are tested here too.
        const char* no_vbmi = std::getenv("SIEVE_NO_VBMI");
        f.avx512_vbmi = (ecx7 & (1u << 1)) && !(no_vbmi && *no_vbmi && *no_vbmi != '0');
    }
    if (os_amx) {
        f.amx_bf16 = edx7 & (1u << 22);
        f.amx_tile = edx7 & (1u << 24);
        f.amx_granted = f.amx_tile && f.amx_bf16 && request_amx_tiles();
    }
    return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
    static const CpuFeatures features = detect();
    return features;
}

std::string_view isa_name(Isa isa) {
    switch (isa) {
        case Isa::scalar: return "scalar";
        case Isa::avx2: return "avx2";
        case Isa::avx512: return "avx512";
        case Isa::avx512_bf16: return "avx512_bf16";
        case Isa::amx_bf16: return "amx_bf16";
    }
    return "?";
}

std::optional<Isa> isa_from_name(std::string_view name) {
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512_bf16, Isa::amx_bf16})
        if (isa_name(isa) == name) return isa;
    return std::nullopt;
}

Isa hardware_isa() {
    const CpuFeatures& f = cpu_features();
    const bool avx2 = f.avx2 && f.fma && f.f16c;
    const bool avx512 = avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
    if (avx512 && f.avx512_bf16 && f.amx_granted) return Isa::amx_bf16;
    if (avx512 && f.avx512_bf16) return Isa::avx512_bf16;
    if (avx512) return Isa::avx512;
    if (avx2) return Isa::avx2;
    return Isa::scalar;
}

Isa active_isa() {
    static const Isa active = [] {
        Isa hw = hardware_isa();
        const char* env = std::getenv("SIEVE_ISA");
        if (!env || !*env) return hw;
        auto cap = isa_from_name(env);
        if (!cap) {
            std::fprintf(stderr, "sieve: ignoring SIEVE_ISA=%s (expected scalar, avx2, avx512, avx512_bf16 or amx_bf16)\n", env);
            return hw;
        }
        return static_cast<int>(*cap) < static_cast<int>(hw) ? *cap : hw;
    }();
    return active;
}

std::vector<Isa> supported_isas() {
    std::vector<Isa> isas;
    for (int i = 0; i <= static_cast<int>(active_isa()); ++i) isas.push_back(static_cast<Isa>(i));
    return isas;
}

}  // namespace sieve

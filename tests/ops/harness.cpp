#include "harness.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <map>
#include <mutex>

#include "backends/cpu/cpu_backend.h"
#include "backends/forwarding_backend.h"
#include "backends/ref/ref_backend.h"
#include "core/assert.h"
#include "core/cpu_features.h"

namespace sieve::test {

namespace {

uint8_t canary(size_t i) { return static_cast<uint8_t>(0xa5u ^ (i * 29u)); }

// Every live GuardedBuffer's storage (canaries included): start → bytes.
struct GuardedRegistry {
    std::mutex mutex;
    std::map<uintptr_t, size_t> storages;
};
GuardedRegistry& guarded_registry() {
    static GuardedRegistry r;
    return r;
}

HeapBlockLookup g_heap_lookup = nullptr;

// The GuardedBuffer storage, else the heap block, holding `p`: {start, bytes}, or {nullptr, 0}.
std::pair<uint8_t*, size_t> host_block_of(const void* p) {
    {
        GuardedRegistry& r = guarded_registry();
        std::lock_guard lock(r.mutex);
        const auto a = reinterpret_cast<uintptr_t>(p);
        auto it = r.storages.upper_bound(a);
        if (it != r.storages.begin() && a <= std::prev(it)->first + std::prev(it)->second)
            return {reinterpret_cast<uint8_t*>(std::prev(it)->first), std::prev(it)->second};
    }
    const void* start = nullptr;
    size_t bytes = 0;
    if (g_heap_lookup != nullptr && g_heap_lookup(p, &start, &bytes))
        return {static_cast<uint8_t*>(const_cast<void*>(start)), bytes};
    return {nullptr, 0};
}

// Runs the ops of a device the host cannot touch on copies of the GuardedBuffers their params point
// into: each such storage is uploaded whole, the pointers are moved to the device copy, and after the
// op every copy is downloaded back over its storage (so the canary and poison checks of the tests see
// what the device wrote).
class DeviceMirror final : public ForwardingBackend {
public:
    explicit DeviceMirror(std::unique_ptr<Backend> device)
        : ForwardingBackend(std::move(device)), name_(inner().name()) {}
    const std::string& name() const override { return name_; }
    const Device& device() const override { return inner().device(); }
    Expected<std::unique_ptr<DeviceBuffer>> buffer_alloc(size_t bytes, BufferUsage usage,
                                                         std::string_view what) override {
        return inner().buffer_alloc(bytes, usage, what);
    }
    Status synchronize() override { return inner().synchronize(); }

protected:
    Status transfer_bytes(Transfer, void*, const void*, size_t) override {
        return unsupported_error("the harness's device mirror moves bytes only around ops");
    }
    Status fill_bytes(void*, uint8_t, size_t) override {
        return unsupported_error("the harness's device mirror moves bytes only around ops");
    }
    Status around_op(std::string_view op, std::span<PointerField> fields,
                     const std::function<Status()>& run) override {
        struct Copy {
            uint8_t* host;
            size_t bytes;
            std::unique_ptr<DeviceBuffer> device;
        };
        std::vector<Copy> copies;
        for (PointerField& f : fields) {
            if (f.value == nullptr) continue;
            const std::pair<uint8_t*, size_t> block = host_block_of(f.value);
            uint8_t* const host = block.first;
            const size_t bytes = block.second;
            if (host == nullptr)
                return internal_error("test harness: {}: {} = {} lies in no GuardedBuffer or heap block, so it "
                                      "cannot be uploaded to {}",
                                      op, f.name, f.value, name_);
            auto c = std::find_if(copies.begin(), copies.end(), [&](const Copy& x) { return x.host == host; });
            if (c == copies.end()) {
                SIEVE_ASSIGN_OR_RETURN(auto dev, inner().buffer_alloc(bytes, BufferUsage::workspace, "a copy"));
                SIEVE_RETURN_IF_ERROR(inner().buffer_upload(*dev, 0, host, bytes));
                copies.push_back({host, bytes, std::move(dev)});
                c = copies.end() - 1;
            }
            f.value = c->device->as<uint8_t>() + (static_cast<const uint8_t*>(f.value) - host);
        }
        const Status s = run();
        for (const Copy& c : copies) SIEVE_RETURN_IF_ERROR(inner().buffer_download(*c.device, 0, c.host, c.bytes));
        return s;
    }

private:
    std::string name_;
};

}  // namespace

ThreadPool& test_pool() {
    static ThreadPool pool(3);
    return pool;
}

std::vector<NamedBackend> backends_under_test() {
    std::vector<NamedBackend> out;
    for (const BackendKind& kind : backend_kinds()) {
        if (kind.name == "ref") continue;  // the oracle
        for (const std::string& spec : kind.variants()) {
            Expected<std::unique_ptr<Backend>> b = unsupported_error("");
            if (kind.name == "cpu") {
                auto o = cpu_backend_options_from_spec(spec);
                if (!o.has_value()) {
                    ADD_FAILURE() << "cannot read " << spec << ": " << o.status().to_string();
                    continue;
                }
                o->pool = &test_pool();
                b = make_cpu_backend(*o);
            } else {
                b = make_backend(spec);
            }
            if (!b.has_value()) {
                ADD_FAILURE() << "cannot create " << spec << ": " << b.status().to_string();
                continue;
            }
            std::unique_ptr<Backend> backend = std::move(b).value();
            if (!backend->host_accessible()) backend = std::make_unique<DeviceMirror>(std::move(backend));
            out.push_back({spec, std::move(backend)});
        }
    }
    static bool printed = false;  // once per process, for the CI log
    if (!printed) {
        printed = true;
        std::string names;
        for (const auto& nb : out) names += " " + nb.spec;
        std::printf("[ harness  ] ref vs%s\n", names.c_str());
    }
    return out;
}

std::unique_ptr<Backend> ref_backend() { return make_ref_backend(); }

std::vector<std::pair<std::string, Backend*>> ref_and(Backend& ref, std::vector<NamedBackend>& backends) {
    std::vector<std::pair<std::string, Backend*>> all = {{"ref", &ref}};
    for (auto& nb : backends) all.push_back({nb.spec, nb.backend.get()});
    return all;
}

std::vector<NamedBackend> host_backends_under_test() {
    std::vector<NamedBackend> out;
    for (NamedBackend& nb : backends_under_test())
        if (nb.backend->host_accessible()) out.push_back(std::move(nb));
    return out;
}

void set_heap_block_lookup(HeapBlockLookup lookup) { g_heap_lookup = lookup; }

bool linear_unsupported_is_expected(const std::string& spec, LinearMath math, const Status& st) {
    return st.code() == StatusCode::unsupported && spec.ends_with(":dnnl") && math == LinearMath::bf16 &&
           static_cast<int>(active_isa()) < static_cast<int>(Isa::avx512) &&
           st.message().find("oneDNN") != std::string::npos;
}

void GuardedBuffer::Free::operator()(uint8_t* p) const {
    {
        GuardedRegistry& r = guarded_registry();
        std::lock_guard lock(r.mutex);
        r.storages.erase(reinterpret_cast<uintptr_t>(p));
    }
    std::free(p);
}

GuardedBuffer::GuardedBuffer(size_t bytes, uint8_t fill) : bytes_(bytes) {
    const size_t total = (bytes + 2 * kGuardBytes + 63) / 64 * 64;
    storage_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, total)));
    SIEVE_ASSERT(storage_ != nullptr, "GuardedBuffer: out of memory");
    {
        GuardedRegistry& r = guarded_registry();
        std::lock_guard lock(r.mutex);
        r.storages[reinterpret_cast<uintptr_t>(storage_.get())] = total;
    }
    uint8_t* p = storage_.get();
    for (size_t i = 0; i < kGuardBytes; ++i) p[i] = canary(i);
    std::memset(p + kGuardBytes, fill, bytes);
    for (size_t i = 0; i < kGuardBytes; ++i) p[kGuardBytes + bytes + i] = canary(i + 1000);
}

testing::AssertionResult GuardedBuffer::guards_intact(const std::string& what) const {
    const uint8_t* p = storage_.get();
    for (size_t i = 0; i < kGuardBytes; ++i)
        if (p[i] != canary(i))
            return testing::AssertionFailure() << what << ": guard before the buffer overwritten at byte -"
                                               << (kGuardBytes - i);
    for (size_t i = 0; i < kGuardBytes; ++i)
        if (p[kGuardBytes + bytes_ + i] != canary(i + 1000))
            return testing::AssertionFailure() << what << ": guard after the buffer (" << bytes_
                                               << " bytes) overwritten at byte +" << i;
    return testing::AssertionSuccess();
}

int64_t rows_extent(int64_t n_tokens, int64_t n_heads, int64_t dim, int64_t token_stride, int64_t head_stride) {
    if (n_tokens == 0 || n_heads == 0 || dim == 0) return 0;
    return (n_tokens - 1) * token_stride + (n_heads - 1) * head_stride + dim;
}

testing::AssertionResult untouched_outside_rows(const GuardedBuffer& buf, int64_t n_tokens, int64_t n_heads,
                                                int64_t dim, int64_t token_stride, int64_t head_stride,
                                                size_t elem_size, const std::string& what) {
    std::vector<bool> in_view(buf.bytes(), false);
    for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t h = 0; h < n_heads; ++h)
            for (int64_t i = 0; i < dim; ++i) {
                const size_t e = static_cast<size_t>(t * token_stride + h * head_stride + i) * elem_size;
                for (size_t b = 0; b < elem_size; ++b) in_view[e + b] = true;
            }
    const auto* p = buf.as<uint8_t>();
    for (size_t b = 0; b < buf.bytes(); ++b)
        if (!in_view[b] && p[b] != kPoison)
            return testing::AssertionFailure() << what << ": byte " << b << " outside the view was written";
    return testing::AssertionSuccess();
}

double bf16_ulp(double v) {
    v = std::fabs(v);
    if (!(v > 0.0) || !std::isfinite(v)) return std::ldexp(1.0, -133);
    int e = 0;
    std::frexp(v, &e);  // v = m · 2^e, m ∈ [0.5, 1): floor(log2 v) = e − 1
    return std::ldexp(1.0, std::max(e - 1 - 7, -133));
}

testing::AssertionResult all_close(const std::vector<double>& want, const std::vector<double>& got,
                                   const std::vector<double>& tol, const std::string& what) {
    if (want.size() != got.size() || want.size() != tol.size())
        return testing::AssertionFailure() << what << ": size mismatch";
    int failures = 0;
    double worst_ratio = 0.0;
    std::string report;
    for (size_t i = 0; i < want.size(); ++i) {
        const bool want_nan = std::isnan(want[i]), got_nan = std::isnan(got[i]);
        bool bad = want_nan != got_nan;
        double ratio = 0.0;
        if (!want_nan && !got_nan) {
            const double err = std::fabs(got[i] - want[i]);
            bad = !(err <= tol[i]) && !(want[i] == got[i]);  // equal infinities are fine
            ratio = tol[i] > 0 ? err / tol[i] : 0.0;
            if (std::isfinite(ratio)) worst_ratio = std::max(worst_ratio, ratio);
        }
        if (bad && failures++ < 5)
            report += fmt::format("\n  [{}] want {:.9g}, got {:.9g}, |diff| {:.3g} > tol {:.3g}", i, want[i], got[i],
                                  std::fabs(got[i] - want[i]), tol[i]);
    }
    if (failures)
        return testing::AssertionFailure() << what << ": " << failures << " of " << want.size()
                                           << " values out of tolerance" << report;
    return testing::AssertionSuccess() << what << ": worst |diff|/tol " << worst_ratio;
}

testing::AssertionResult bytes_equal(const void* want, const void* got, size_t n, const std::string& what) {
    const auto* a = static_cast<const uint8_t*>(want);
    const auto* b = static_cast<const uint8_t*>(got);
    int failures = 0;
    std::string report;
    for (size_t i = 0; i < n; ++i)
        if (a[i] != b[i] && failures++ < 5) report += fmt::format("\n  byte {}: want 0x{:02x}, got 0x{:02x}", i, a[i], b[i]);
    if (failures)
        return testing::AssertionFailure() << what << ": " << failures << " of " << n << " bytes differ" << report;
    return testing::AssertionSuccess();
}

}  // namespace sieve::test

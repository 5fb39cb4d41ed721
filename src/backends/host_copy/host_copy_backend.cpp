#include "backends/host_copy/host_copy_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>

#include "core/assert.h"
#include "ops/op_pointers.h"

namespace sieve {

namespace {

const Device& host_copy_device() {
    static const Device device{"host-copy", /*host_accessible=*/false};
    return device;
}

size_t page_bytes() {
    static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return page;
}

// The live mappings of one backend: start → mapped length. Buffers may outlive a backend's last op,
// so they share it with the backend.
struct Mappings {
    std::mutex mutex;
    std::map<uintptr_t, size_t> live;  // mapped bytes (whole pages)
    std::map<uintptr_t, size_t> used;  // the bytes the buffer was asked for

    void protect_all(int prot) {
        for (const auto& [start, len] : live)
            SIEVE_ASSERT(mprotect(reinterpret_cast<void*>(start), len, prot) == 0, "host-copy: mprotect failed");
    }
    // The mapping whose asked-for bytes hold [p, p + n), or live.end().
    std::map<uintptr_t, size_t>::const_iterator find(const void* p, size_t n) const {
        const auto a = reinterpret_cast<uintptr_t>(p);
        auto it = used.upper_bound(a);
        if (it == used.begin()) return live.end();
        --it;
        if (a + n > it->first + it->second) return live.end();
        return live.find(it->first);
    }
};

class HostCopyBuffer final : public DeviceBuffer {
public:
    HostCopyBuffer(void* data, size_t bytes, size_t mapped, BufferUsage usage, std::shared_ptr<Mappings> maps)
        : DeviceBuffer(data, bytes, usage, host_copy_device()), mapped_(mapped), maps_(std::move(maps)) {}
    ~HostCopyBuffer() override {
        if (data() == nullptr) return;
        std::lock_guard lock(maps_->mutex);
        maps_->live.erase(reinterpret_cast<uintptr_t>(data()));
        maps_->used.erase(reinterpret_cast<uintptr_t>(data()));
        munmap(data(), mapped_);
    }

private:
    size_t mapped_;
    std::shared_ptr<Mappings> maps_;
};

class HostCopyBackend final : public Backend {
public:
    explicit HostCopyBackend(std::unique_ptr<Backend> inner)
        : inner_(std::move(inner)), name_("host-copy:" + inner_->name()), maps_(std::make_shared<Mappings>()) {}

    const std::string& name() const override { return name_; }
    size_t prepared_weight_bytes() const override { return inner_->prepared_weight_bytes(); }

    const Device& device() const override { return host_copy_device(); }
    Expected<std::unique_ptr<DeviceBuffer>> buffer_alloc(size_t bytes, BufferUsage usage,
                                                         std::string_view what) override {
        if (bytes == 0) return std::unique_ptr<DeviceBuffer>(new HostCopyBuffer(nullptr, 0, 0, usage, maps_));
        const size_t page = page_bytes();
        if (bytes > SIZE_MAX - page)
            return out_of_memory_error("{}: {} bytes of host-copy memory cannot be mapped", what, bytes);
        const size_t mapped = (bytes + page - 1) / page * page;
        void* p = mmap(nullptr, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);  // zeroed pages
        if (p == MAP_FAILED)
            return out_of_memory_error("{}: cannot map {} bytes of host-copy {} memory", what, bytes,
                                       buffer_usage_name(usage));
        std::lock_guard lock(maps_->mutex);
        maps_->live[reinterpret_cast<uintptr_t>(p)] = mapped;
        maps_->used[reinterpret_cast<uintptr_t>(p)] = bytes;
        return std::unique_ptr<DeviceBuffer>(new HostCopyBuffer(p, bytes, mapped, usage, maps_));
    }
    Status synchronize() override { return inner_->synchronize(); }

    // linear_prepare reads host weights by contract (backend.h); the prepared weights are the inner
    // backend's, which linear() hands back to it.
    Expected<std::unique_ptr<PreparedLinear>> linear_prepare(const LinearWeights& w) override {
        return inner_->linear_prepare(w);
    }
    Expected<LinearPlan> linear_plan(const PreparedLinear& w, const LinearParams& shape) override {
        return inner_->linear_plan(w, shape);
    }
    Status linear(const PreparedLinear& w, const LinearPlan& plan, const LinearParams& p, Workspace ws) override {
        return on_device("linear", p, &ws, [&] { return inner_->linear(w, plan, p, ws); });
    }

    Status rms_norm(const RmsNormParams& p) override {
        return on_device("rms_norm", p, nullptr, [&] { return inner_->rms_norm(p); });
    }
    Status layer_norm(const LayerNormParams& p) override {
        return on_device("layer_norm", p, nullptr, [&] { return inner_->layer_norm(p); });
    }
    Status rope(const RopeParams& p) override {
        return on_device("rope", p, nullptr, [&] { return inner_->rope(p); });
    }
    Status quant_fp8(const QuantFp8Params& p) override {
        return on_device("quant_fp8", p, nullptr, [&] { return inner_->quant_fp8(p); });
    }
    Status hadamard(const HadamardParams& p) override {
        return on_device("hadamard", p, nullptr, [&] { return inner_->hadamard(p); });
    }
    Status cache_store(const CacheStoreParams& p) override {
        return on_device("cache_store", p, nullptr, [&] { return inner_->cache_store(p); });
    }
    size_t topk_workspace_size(const TopkParams& p) const override { return inner_->topk_workspace_size(p); }
    Status topk(const TopkParams& p, Workspace ws) override {
        return on_device("topk", p, &ws, [&] { return inner_->topk(p, ws); });
    }
    size_t sparse_mla_attention_workspace_size(const SparseMlaAttentionParams& p) const override {
        return inner_->sparse_mla_attention_workspace_size(p);
    }
    Status sparse_mla_attention(const SparseMlaAttentionParams& p, Workspace ws) override {
        return on_device("sparse_mla_attention", p, &ws, [&] { return inner_->sparse_mla_attention(p, ws); });
    }
    size_t dsa_indexer_scores_workspace_size(const DsaIndexerScoresParams& p) const override {
        return inner_->dsa_indexer_scores_workspace_size(p);
    }
    Status dsa_indexer_scores(const DsaIndexerScoresParams& p, Workspace ws) override {
        return on_device("dsa_indexer_scores", p, &ws, [&] { return inner_->dsa_indexer_scores(p, ws); });
    }
    Status dsa_output_gate(const DsaOutputGateParams& p) override {
        return on_device("dsa_output_gate", p, nullptr, [&] { return inner_->dsa_output_gate(p); });
    }
    size_t mla_head_proj_workspace_size(const MlaHeadProjParams& p) const override {
        return inner_->mla_head_proj_workspace_size(p);
    }
    Status mla_head_proj(const MlaHeadProjParams& p, Workspace ws) override {
        return on_device("mla_head_proj", p, &ws, [&] { return inner_->mla_head_proj(p, ws); });
    }
    Status kv_load(const KvLoadParams& p) override {
        return on_device("kv_load", p, nullptr, [&] { return inner_->kv_load(p); });
    }
    Status compressor_state_store(const CompressorStateStoreParams& p) override {
        return on_device("compressor_state_store", p, nullptr, [&] { return inner_->compressor_state_store(p); });
    }
    Status compressor_pool(const CompressorPoolParams& p) override {
        return on_device("compressor_pool", p, nullptr, [&] { return inner_->compressor_pool(p); });
    }
    size_t indexer_scores_workspace_size(const IndexerScoresParams& p) const override {
        return inner_->indexer_scores_workspace_size(p);
    }
    Status indexer_scores(const IndexerScoresParams& p, Workspace ws) override {
        return on_device("indexer_scores", p, &ws, [&] { return inner_->indexer_scores(p, ws); });
    }
    size_t sparse_mqa_workspace_size(const SparseMqaParams& p) const override {
        return inner_->sparse_mqa_workspace_size(p);
    }
    Status sparse_mqa(const SparseMqaParams& p, Workspace ws) override {
        return on_device("sparse_mqa", p, &ws, [&] { return inner_->sparse_mqa(p, ws); });
    }
    Status qsa_pool(const QsaPoolParams& p) override {
        return on_device("qsa_pool", p, nullptr, [&] { return inner_->qsa_pool(p); });
    }
    size_t qsa_score_workspace_size(const QsaScoreParams& p) const override {
        return inner_->qsa_score_workspace_size(p);
    }
    Status qsa_score(const QsaScoreParams& p, Workspace ws) override {
        return on_device("qsa_score", p, &ws, [&] { return inner_->qsa_score(p, ws); });
    }
    Status qsa_expand(const QsaExpandParams& p) override {
        return on_device("qsa_expand", p, nullptr, [&] { return inner_->qsa_expand(p); });
    }
    size_t qsa_sparse_gqa_workspace_size(const QsaSparseGqaParams& p) const override {
        return inner_->qsa_sparse_gqa_workspace_size(p);
    }
    Status qsa_sparse_gqa(const QsaSparseGqaParams& p, Workspace ws) override {
        return on_device("qsa_sparse_gqa", p, &ws, [&] { return inner_->qsa_sparse_gqa(p, ws); });
    }

protected:
    Status transfer_bytes(Transfer, void* dst, const void* src, size_t n) override {
        std::lock_guard lock(maps_->mutex);
        Unprotected open(*maps_);
        std::memcpy(dst, src, n);
        return Status::ok();
    }
    Status fill_bytes(void* dst, uint8_t value, size_t n) override {
        std::lock_guard lock(maps_->mutex);
        Unprotected open(*maps_);
        std::memset(dst, value, n);
        return Status::ok();
    }

private:
    // Every buffer readable and writable for the lifetime of the object (one op or transfer).
    struct Unprotected {
        explicit Unprotected(Mappings& m) : maps(m) { maps.protect_all(PROT_READ | PROT_WRITE); }
        ~Unprotected() { maps.protect_all(PROT_NONE); }
        Mappings& maps;
    };

    // Runs `op` on the inner backend after checking that every pointer of `p` (and the workspace) is
    // null or inside a live buffer of this device.
    template <typename Params, typename Op>
    Status on_device(std::string_view op_name, const Params& p, const Workspace* ws, Op&& op) {
        std::lock_guard lock(maps_->mutex);
        Status bad;
        auto check = [&](std::string_view field, const void* ptr) {
            if (ptr == nullptr || !bad.is_ok() || maps_->find(ptr, 0) != maps_->live.end()) return;
            bad = invalid_argument_error("{}: {}: {} = {} is not memory of device '{}' (a host address given to a "
                                         "device op)",
                                         name_, op_name, field, ptr, host_copy_device().name);
        };
        for_each_pointer(p, [&](std::string_view field, const auto& ptr) { check(field, ptr); });
        if (ws != nullptr) check("workspace", ws->data);
        if (!bad.is_ok()) return bad;
        Unprotected open(*maps_);
        return op();
    }

    std::unique_ptr<Backend> inner_;
    std::string name_;
    std::shared_ptr<Mappings> maps_;
};

}  // namespace

Expected<std::unique_ptr<Backend>> make_host_copy_backend(std::unique_ptr<Backend> inner) {
    if (inner == nullptr) return invalid_argument_error("host-copy: no inner backend");
    if (!inner->host_accessible())
        return invalid_argument_error("host-copy: the inner backend {} does not run on host memory", inner->name());
    return std::unique_ptr<Backend>(new HostCopyBackend(std::move(inner)));
}

Expected<std::unique_ptr<Backend>> make_host_copy_backend_from_spec(std::string_view spec) {
    constexpr std::string_view prefix = "host-copy";
    if (!spec.starts_with(prefix) || (spec.size() > prefix.size() && spec[prefix.size()] != ':'))
        return invalid_argument_error("unknown backend '{}' (expected {})", spec, kHostCopyBackendSpecs);
    const std::string_view inner_spec = spec.size() > prefix.size() ? spec.substr(prefix.size() + 1) : "ref";
    if (inner_spec.starts_with(prefix))
        return invalid_argument_error("backend '{}': host-copy cannot run over itself", spec);
    SIEVE_ASSIGN_OR_RETURN(auto inner, make_backend(inner_spec));
    return make_host_copy_backend(std::move(inner));
}

std::vector<std::string> host_copy_backend_variants() { return {"host-copy:ref"}; }

}  // namespace sieve

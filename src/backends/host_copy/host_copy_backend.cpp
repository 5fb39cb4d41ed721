#include "backends/host_copy/host_copy_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>

#include "core/assert.h"
#include "backends/forwarding_backend.h"

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

class HostCopyBackend final : public ForwardingBackend {
public:
    explicit HostCopyBackend(std::unique_ptr<Backend> inner)
        : ForwardingBackend(std::move(inner)), name_("host-copy:" + this->inner().name()),
          maps_(std::make_shared<Mappings>()) {}

    const std::string& name() const override { return name_; }

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
    Status synchronize() override { return inner().synchronize(); }
    Expected<std::unique_ptr<StreamTimer>> stream_timer() override { return inner().stream_timer(); }

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

    // Every pointer of the op (and its workspace) null or inside a live buffer of this device; then the
    // inner op runs with every buffer open.
    Status around_op(std::string_view op, std::span<PointerField> fields,
                     const std::function<Status()>& run) override {
        std::lock_guard lock(maps_->mutex);
        for (const PointerField& f : fields)
            if (f.value != nullptr && maps_->find(f.value, 0) == maps_->live.end())
                return invalid_argument_error("{}: {}: {} = {} is not memory of device '{}' (a host address given "
                                              "to a device op)",
                                              name_, op, f.name, f.value, host_copy_device().name);
        Unprotected open(*maps_);
        return run();
    }

private:
    // Every buffer readable and writable for the lifetime of the object (one op or transfer).
    struct Unprotected {
        explicit Unprotected(Mappings& m) : maps(m) { maps.protect_all(PROT_READ | PROT_WRITE); }
        ~Unprotected() { maps.protect_all(PROT_NONE); }
        Mappings& maps;
    };

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

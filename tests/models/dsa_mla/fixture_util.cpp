#include "fixture_util.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "io/safetensors.h"

namespace sieve::dsa_test {

std::vector<float> HostTensor::f32() const {
    EXPECT_EQ(dtype, DType::f32) << name;
    std::vector<float> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
}

HostTensor HostTensor::from_f32(std::string name, Shape shape, const std::vector<float>& v) {
    HostTensor t{std::move(name), DType::f32, std::move(shape), std::vector<uint8_t>(v.size() * 4)};
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    return t;
}

std::vector<HostTensor> read_all(const Checkpoint& ckpt) {
    std::vector<HostTensor> out;
    for (std::string_view name : ckpt.tensor_names()) {
        const auto v = ckpt.find(name);
        HostTensor t;
        t.name = std::string(name);
        t.dtype = *v->dtype;
        t.shape.assign(v->shape.begin(), v->shape.end());
        t.bytes.assign(v->bytes.begin(), v->bytes.end());
        out.push_back(std::move(t));
    }
    return out;
}

Expected<std::unique_ptr<Checkpoint>> make_checkpoint(const std::vector<HostTensor>& tensors, const std::string& label) {
    std::vector<SafetensorsWriteEntry> entries;
    for (const HostTensor& t : tensors) entries.push_back({t.name, t.dtype, t.shape, t.bytes});
    SIEVE_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, serialize_safetensors(entries));
    SIEVE_ASSIGN_OR_RETURN(auto file, SafetensorsFile::from_bytes(std::move(bytes), label));
    std::vector<std::unique_ptr<SafetensorsFile>> files;
    files.push_back(std::move(file));
    return Checkpoint::from_files(label, std::move(files));
}

Status write_checkpoint_dir(const std::vector<HostTensor>& tensors, const std::string& config_json,
                            const std::filesystem::path& dir) {
    std::vector<SafetensorsWriteEntry> entries;
    for (const HostTensor& t : tensors) entries.push_back({t.name, t.dtype, t.shape, t.bytes});
    SIEVE_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, serialize_safetensors(entries));
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return io_error("{}: cannot create: {}", dir.string(), ec.message());
    std::ofstream config(dir / "config.json", std::ios::binary);
    config << config_json;
    std::ofstream model(dir / "model.safetensors", std::ios::binary);
    model.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!config || !model) return io_error("{}: cannot write the checkpoint", dir.string());
    return Status::ok();
}

namespace {

template <typename T>
std::vector<T> tensor_values(const SafetensorsFile& f, const std::string& name) {
    const auto v = f.find(name);
    if (!v) return {};
    std::vector<T> out(v->bytes.size() / sizeof(T));
    std::memcpy(out.data(), v->bytes.data(), v->bytes.size());
    return out;
}

}  // namespace

Fixture load_fixture(const std::string& name) {
    Fixture f;
    f.model_type = name;
    const auto dir = kDataDir / name;
    std::ifstream in(dir / "ckpt" / "config.json");
    std::stringstream ss;
    ss << in.rdbuf();
    f.config_json = ss.str();
    auto config = parse_model_config(f.config_json, "config.json");
    EXPECT_TRUE(config.has_value()) << config.status().to_string();
    f.config = std::move(*config);
    auto ckpt = Checkpoint::open(dir / "ckpt");
    EXPECT_TRUE(ckpt.has_value()) << ckpt.status().to_string();
    f.checkpoint = std::move(*ckpt);
    auto golden = SafetensorsFile::open(dir / "golden.safetensors");
    EXPECT_TRUE(golden.has_value()) << golden.status().to_string();
    f.n_requests = std::stoll((*golden)->metadata().at("requests"));
    const int64_t layers = f.config.dsa_mla()->num_hidden_layers;
    f.inputs.resize(static_cast<size_t>(f.n_requests));
    f.outputs.resize(static_cast<size_t>(f.n_requests));
    f.topk.resize(static_cast<size_t>(f.n_requests));
    for (int64_t r = 0; r < f.n_requests; ++r) {
        f.request_tokens.push_back(static_cast<int64_t>(tensor_values<int64_t>(**golden, fmt::format("req{}.positions", r)).size()));
        int64_t width = 0;
        for (int64_t l = 0; l < layers; ++l) {
            const std::string base = fmt::format("req{}.layer{}", r, l);
            f.inputs[static_cast<size_t>(r)][l] = tensor_values<float>(**golden, base + ".input");
            f.outputs[static_cast<size_t>(r)][l] = tensor_values<float>(**golden, base + ".output");
            if (auto t = (*golden)->find(base + ".topk")) {
                f.topk[static_cast<size_t>(r)][l] = tensor_values<int32_t>(**golden, base + ".topk");
                width = t->shape[1];
            }
        }
        f.topk_width.push_back(width);
    }
    return f;
}

namespace {

class CaptureIo final : public RequestIo {
public:
    CaptureIo(const std::map<int64_t, std::vector<float>>& inputs, const std::vector<int64_t>& layers, int64_t hidden,
              std::vector<std::vector<float>>& outputs)
        : inputs_(inputs), layers_(layers), hidden_(hidden), outputs_(outputs) {}
    void input(int64_t layer_pos, int64_t position, float* row) override {
        const std::vector<float>& src = inputs_.at(layers_[static_cast<size_t>(layer_pos)]);
        std::memcpy(row, src.data() + position * hidden_, static_cast<size_t>(hidden_) * 4);
    }
    void output(int64_t layer_pos, int64_t position, const float* row) override {
        std::memcpy(outputs_[static_cast<size_t>(layer_pos)].data() + position * hidden_, row,
                    static_cast<size_t>(hidden_) * 4);
    }

private:
    const std::map<int64_t, std::vector<float>>& inputs_;
    const std::vector<int64_t>& layers_;
    int64_t hidden_;
    std::vector<std::vector<float>>& outputs_;
};

class Recorder final : public SelectionObserver {
public:
    Recorder(RunResult& r, const RunOptions& o) : r_(r), o_(o) {}
    void on_selection(int64_t layer, RequestId request, int64_t position, std::span<int32_t> selected,
                      std::span<const float> scores, int64_t) override {
        if (o_.override_selection) o_.override_selection(layer, request, position, selected);
        r_.selections[{request, layer}][position].assign(selected.begin(), selected.end());
        r_.scores[{request, layer}][position].assign(scores.begin(), scores.end());
    }

private:
    RunResult& r_;
    const RunOptions& o_;
};

}  // namespace

Expected<RunResult> run_model(AttentionModel& model, const Fixture& f, const RunOptions& options) {
    const auto& inputs = options.inputs ? *options.inputs : f.inputs;
    std::vector<int64_t> requests = options.requests;
    if (requests.empty())
        for (int64_t r = 0; r < f.n_requests; ++r) requests.push_back(r);
    const std::vector<int64_t> layers = model.layers();
    const int64_t hidden = model.hidden_size();
    RunResult result;
    result.outputs.resize(static_cast<size_t>(f.n_requests));
    int64_t longest = 1;
    for (int64_t r : requests) {
        const int64_t T = f.request_tokens[static_cast<size_t>(r)];
        longest = std::max(longest, T);
        result.outputs[static_cast<size_t>(r)].assign(layers.size(), std::vector<float>(static_cast<size_t>(T * hidden), NAN));
    }
    EngineOptions eo;
    eo.cache_budget_tokens = 4 * longest + 64;
    bool decode = false;
    if (options.schedule == "one-shot") {
        eo.scheduler.max_tokens_per_step = longest;
        eo.scheduler.max_requests_per_step = 1;
    } else if (options.schedule == "decode") {
        decode = true;
        eo.scheduler.max_tokens_per_step = static_cast<int64_t>(requests.size());
    } else if (options.schedule.rfind("chunk:", 0) == 0) {
        eo.scheduler.max_tokens_per_step = std::stoll(options.schedule.substr(6));
        eo.scheduler.max_requests_per_step = 1;
    } else {
        return invalid_argument_error("run_model: unknown schedule {}", options.schedule);
    }
    Recorder recorder(result, options);
    model.set_selection_observer(options.observe ? &recorder : nullptr);
    SIEVE_ASSIGN_OR_RETURN(auto engine, Engine::create(model, eo));
    std::vector<std::unique_ptr<CaptureIo>> ios;
    for (int64_t r : requests) {
        const int64_t T = f.request_tokens[static_cast<size_t>(r)];
        ios.push_back(std::make_unique<CaptureIo>(inputs[static_cast<size_t>(r)], layers, hidden,
                                                  result.outputs[static_cast<size_t>(r)]));
        SIEVE_RETURN_IF_ERROR(engine->add_request(r, T, decode ? 1 : T, ios.back().get()));
    }
    const Status st = engine->run();
    model.set_selection_observer(nullptr);
    SIEVE_RETURN_IF_ERROR(st);
    for (int64_t r : requests)
        if (engine->status(r) != RequestStatus::finished) return engine->error(r);
    return result;
}

Diff diff(const std::vector<float>& a, const std::vector<float>& b) {
    Diff d;
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        const double x = static_cast<double>(a[i]) - b[i];
        num += x * x;
        den += static_cast<double>(b[i]) * b[i];
        d.max_abs = std::max(d.max_abs, std::fabs(x));
        if (!std::isfinite(a[i])) d.max_abs = INFINITY;
    }
    d.rel = std::sqrt(num / std::max(den, 1e-300));
    if (!std::isfinite(d.max_abs)) d.rel = INFINITY;
    return d;
}

}  // namespace sieve::dsa_test

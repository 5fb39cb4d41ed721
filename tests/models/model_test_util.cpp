#include "model_test_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <variant>

#include "sieve/io/safetensors.h"
#include "sieve/models/attention_layout.h"

namespace sieve::model_test {

std::filesystem::path data_dir() { return SIEVE_TEST_DATA_DIR; }

std::unique_ptr<Backend> test_backend(const std::string& spec) {
    auto b = make_backend(spec);
    if (!b) {
        ADD_FAILURE() << spec << ": " << b.status().to_string();
        return nullptr;
    }
    return std::move(*b);
}

namespace {

// The layers sieve runs of a model of `config` and their hidden size: what read_golden_fixture
// validates a fixture against (the model's layers() with every layer loaded).
Expected<GoldenFixture> read_fixture(const std::filesystem::path& golden_path, const ModelConfig& config) {
    SIEVE_ASSIGN_OR_RETURN(const AttentionLayout layout, attention_layout(config, NumericsProfile::exact));
    const int64_t hidden = std::visit([](const auto& c) { return c.hidden_size; }, config.family);
    return read_golden_fixture(golden_path, config, layers_sieve_runs(layout), hidden);
}

std::vector<SafetensorsWriteEntry> write_entries(const std::vector<HostTensor>& tensors) {
    std::vector<SafetensorsWriteEntry> entries;
    for (const HostTensor& t : tensors) entries.push_back({t.name, t.dtype, t.shape, t.bytes});
    return entries;
}

}  // namespace

std::vector<int64_t> Golden::n_tokens() const {
    std::vector<int64_t> n;
    for (const GoldenRequest& r : fixture.requests) n.push_back(r.n_tokens);
    return n;
}

std::span<const float> Golden::input(int64_t request, int64_t layer_pos) const {
    return f32_values(fixture.requests.at(static_cast<size_t>(request)).layers.at(static_cast<size_t>(layer_pos)).input);
}

std::span<const float> Golden::output(int64_t request, int64_t layer_pos) const {
    return f32_values(fixture.requests.at(static_cast<size_t>(request)).layers.at(static_cast<size_t>(layer_pos)).output);
}

Golden load_golden(const std::string& name) {
    Golden g;
    const std::filesystem::path dir = data_dir() / name;
    std::ifstream in(dir / "ckpt" / "config.json");
    std::stringstream text;
    text << in.rdbuf();
    g.config_json = text.str();
    auto config = parse_model_config(g.config_json, "config.json");
    if (!config) {
        ADD_FAILURE() << name << ": " << config.status().to_string();
        return g;
    }
    g.config = std::move(*config);
    auto checkpoint = Checkpoint::open(dir / "ckpt");
    if (!checkpoint) {
        ADD_FAILURE() << name << ": " << checkpoint.status().to_string();
        return g;
    }
    g.checkpoint = std::move(*checkpoint);
    auto fixture = read_fixture(dir / "golden.safetensors", g.config);
    if (!fixture) {
        ADD_FAILURE() << name << ": " << fixture.status().to_string();
        return g;
    }
    g.fixture = std::move(*fixture);
    return g;
}

GoldenSchedule schedule(const std::string& name, const Golden& golden, uint64_t seed) {
    auto s = golden_schedule(name, golden.n_tokens(), seed);
    if (!s) {
        ADD_FAILURE() << s.status().to_string();
        return {};
    }
    return std::move(*s);
}

Expected<GoldenRun> run_fixture(AttentionModel& model, const Golden& golden, const GoldenSchedule& schedule,
                                const GoldenRunOptions& options) {
    SIEVE_ASSIGN_OR_RETURN(const std::vector<GoldenRunRequest> requests,
                           golden_fixture_requests(golden.fixture, model.layers()));
    return run_golden_requests(model, requests, schedule, options);
}

std::vector<std::map<int64_t, std::vector<int32_t>>> selected_rows(const GoldenRequestRun& run) {
    std::vector<std::map<int64_t, std::vector<int32_t>>> rows(run.selections.size());
    for (size_t lp = 0; lp < run.selections.size(); ++lp)
        for (const auto& [position, record] : run.selections[lp]) rows[lp][position] = record.selected;
    return rows;
}

void expect_every_selection_once(const GoldenRun& run) {
    for (size_t r = 0; r < run.requests.size(); ++r)
        for (size_t lp = 0; lp < run.layers.size(); ++lp) {
            const auto& selections = run.requests[r].selections[lp];
            EXPECT_EQ(static_cast<int64_t>(selections.size()), run.requests[r].n_tokens)
                << "request " << r << " layer " << run.layers[lp] << ": tokens whose selection was reported";
            for (const auto& [position, record] : selections)
                EXPECT_EQ(record.reports, 1) << "request " << r << " layer " << run.layers[lp] << " position " << position;
        }
}

std::span<const float> f32_values(const Tensor& t) {
    EXPECT_EQ(t.dtype(), DType::f32);
    return {t.as<float>(), static_cast<size_t>(t.numel())};
}

std::vector<float> HostTensor::f32() const {
    EXPECT_EQ(dtype, DType::f32) << name;
    std::vector<float> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
}

HostTensor HostTensor::from_f32(std::string name, Shape shape, std::span<const float> values) {
    HostTensor t{std::move(name), DType::f32, std::move(shape), std::vector<uint8_t>(values.size() * 4)};
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    return t;
}

std::vector<HostTensor> checkpoint_tensors(const Checkpoint& checkpoint) {
    std::vector<HostTensor> out;
    for (std::string_view name : checkpoint.tensor_names()) {
        const auto v = checkpoint.find(name);
        HostTensor t;
        t.name = std::string(name);
        t.dtype = *v->dtype;
        t.shape.assign(v->shape.begin(), v->shape.end());
        t.bytes.assign(v->bytes.begin(), v->bytes.end());
        out.push_back(std::move(t));
    }
    return out;
}

HostTensor* find_tensor(std::vector<HostTensor>& tensors, const std::string& name) {
    auto it = std::find_if(tensors.begin(), tensors.end(), [&](const HostTensor& t) { return t.name == name; });
    if (it == tensors.end()) {
        ADD_FAILURE() << "no tensor " << name;
        return nullptr;
    }
    return &*it;
}

std::vector<HostTensor> without_tensor(const std::vector<HostTensor>& tensors, const std::string& name) {
    std::vector<HostTensor> v;
    for (const HostTensor& t : tensors)
        if (t.name != name) v.push_back(t);
    EXPECT_EQ(v.size() + 1, tensors.size()) << "no tensor " << name;
    return v;
}

Expected<std::unique_ptr<Checkpoint>> memory_checkpoint(const std::vector<HostTensor>& tensors, const std::string& label) {
    SIEVE_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, serialize_safetensors(write_entries(tensors)));
    SIEVE_ASSIGN_OR_RETURN(auto file, SafetensorsFile::from_bytes(std::move(bytes), label));
    std::vector<std::unique_ptr<SafetensorsFile>> files;
    files.push_back(std::move(file));
    return Checkpoint::from_files(label, std::move(files));
}

Status write_checkpoint_dir(const std::vector<HostTensor>& tensors, const std::string& config_json,
                            const std::filesystem::path& dir) {
    SIEVE_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, serialize_safetensors(write_entries(tensors)));
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

Fp8Blocks fp8_blocks(std::span<const float> w, int64_t rows, int64_t cols, Fp8Scale scale) {
    const int64_t br = (rows + 127) / 128, bc = (cols + 127) / 128;
    Fp8Blocks q;
    q.values.assign(static_cast<size_t>(rows * cols), 0);
    q.dequantized.assign(static_cast<size_t>(rows * cols), 0.0f);
    q.scale_shape = {br, bc};
    q.scales.assign(static_cast<size_t>(br * bc), 1.0f);
    for (int64_t bi = 0; bi < br; ++bi)
        for (int64_t bj = 0; bj < bc; ++bj) {
            const int64_t row_end = std::min(rows, bi * 128 + 128), col_end = std::min(cols, bj * 128 + 128);
            float amax = 0;
            for (int64_t i = bi * 128; i < row_end; ++i)
                for (int64_t j = bj * 128; j < col_end; ++j) amax = std::max(amax, std::fabs(w[static_cast<size_t>(i * cols + j)]));
            const float s = scale == Fp8Scale::ue8m0 ? ue8m0_scale_for_amax(amax) : amax > 0 ? amax / 448.0f : 1.0f;
            q.scales[static_cast<size_t>(bi * bc + bj)] = s;
            for (int64_t i = bi * 128; i < row_end; ++i)
                for (int64_t j = bj * 128; j < col_end; ++j) {
                    const size_t k = static_cast<size_t>(i * cols + j);
                    q.values[k] = f32_to_fp8_e4m3(w[k] / s);
                    q.dequantized[k] = fp8_e4m3_to_f32(q.values[k]) * s;
                }
        }
    return q;
}

}  // namespace sieve::model_test

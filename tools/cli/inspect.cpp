#include "inspect.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <string>

#include "sieve/io/checkpoint.h"
#include "sieve/io/config.h"
#include "io/weights.h"
#include "sieve/models/attention_layout.h"

namespace sieve::cli {

namespace {

// What the checkpoint holds for one expected tensor.
struct TensorFinding {
    std::string name;         // canonical
    std::string stored_name;  // the spelling found in the checkpoint ("" if missing)
    std::string file;
    Shape expected_shape;
    Shape shape;
    std::string dtype;
    std::string quantization;  // "" or "fp8 e4m3, 128x128 blocks, scale <name> (<dtype>)"
    std::string problem;       // "" when it matches
};

TensorFinding examine(WeightStore& store, const AttentionTensor& t) {
    TensorFinding f{t.name, "", "", t.shape, {}, "", "", ""};
    auto resolved = store.resolve(t.name);
    if (!resolved) {
        f.problem = resolved.status().code() == StatusCode::not_found ? "missing" : resolved.status().message();
        return f;
    }
    // raw() marks it requested, so it does not show up as unexpected.
    auto raw = store.root().raw(t.name);
    if (!raw) {
        f.problem = raw.status().message();
        return f;
    }
    const SafetensorsTensorView& v = *raw;
    f.stored_name = std::string(v.name);
    f.file = std::string(v.file);
    f.shape.assign(v.shape.begin(), v.shape.end());
    f.dtype = v.dtype ? std::string(dtype_name(*v.dtype)) : std::string(v.dtype_string);
    if (f.shape != t.shape) {
        f.problem = fmt::format("shape {}, expected {}", shape_to_string(f.shape), shape_to_string(t.shape));
        return f;
    }
    if (v.dtype == DType::f8_e4m3) {
        if (!t.fp8_block) {
            f.problem = "stored as fp8 e4m3, which this tensor cannot be";
            return f;
        }
        auto packed = store.root().get_fp8_block(t.name, t.shape[0], t.shape[1]);
        if (!packed) {
            f.problem = packed.status().message();
            return f;
        }
        auto scale = store.resolve(packed->scale_name);
        const std::string scale_dtype = scale && scale->dtype ? std::string(dtype_name(*scale->dtype)) : "?";
        f.quantization = fmt::format("fp8 e4m3, {}x{} blocks, scale {} ({})", packed->block_rows, packed->block_cols,
                                     packed->scale_name, scale_dtype);
        return f;
    }
    if (!v.dtype || !kWeightFloatDTypes.contains(*v.dtype))
        f.problem = fmt::format("dtype {}, expected one of {}", f.dtype, kWeightFloatDTypes.to_string());
    return f;
}

// Layer index of an attention tensor name, or -1: "…layers.<N>.attn." or "…layers.<N>.self_attn." is main
// layer N; a name with "mtp" before the marker ("mtp.<J>.attn.", "model.mtp_layers.<J>.self_attn.",
// "mtp.layers.<J>.self_attn.") is MTP layer J, whose id is n_main + J.
int64_t attention_layer_of(std::string_view name, int64_t n_main) {
    for (std::string_view marker : {".attn.", ".self_attn."}) {
        const size_t at = name.find(marker);
        if (at == std::string_view::npos) continue;
        const std::string_view head = name.substr(0, at);
        const size_t dot = head.rfind('.');
        const std::string_view digits = dot == std::string_view::npos ? head : head.substr(dot + 1);
        if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string_view::npos)
            return -1;
        const int64_t number = std::stoll(std::string(digits));
        if (head.find("mtp") != std::string_view::npos) return n_main + number;
        const size_t layers = head.rfind("layers.");
        if (layers == std::string_view::npos || layers + 7 != dot + 1 || (layers != 0 && head[layers - 1] != '.'))
            return -1;
        return number;
    }
    return -1;
}

std::string format_bytes_per_token(double b) {
    return b == 0.0 ? "bounded" : fmt::format("{:.1f} B/token", b);
}

}  // namespace

Status run_inspect(const InspectOptions& options, std::ostream& out) {
    SIEVE_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(options.checkpoint));
    SIEVE_ASSIGN_OR_RETURN(auto checkpoint, Checkpoint::open(options.checkpoint));
    const auto family = weight_family_for_model_type(config.model_type);
    if (!family) return unsupported_error("model_type {} has no weight naming rules", config.model_type);
    WeightStore store(*checkpoint, *family);
    SIEVE_ASSIGN_OR_RETURN(AttentionLayout deployed, attention_layout(config, NumericsProfile::deployed));
    SIEVE_ASSIGN_OR_RETURN(AttentionLayout exact, attention_layout(config, NumericsProfile::exact));

    std::vector<std::vector<TensorFinding>> findings(deployed.layers.size());
    int problems = 0;
    std::set<int64_t> examined_layers;
    for (size_t i = 0; i < deployed.layers.size(); ++i) {
        const AttentionLayerLayout& layer = deployed.layers[i];
        if (!layer.tensors.empty()) examined_layers.insert(layer.layer);
        for (const AttentionTensor& t : layer.tensors) {
            findings[i].push_back(examine(store, t));
            if (!findings[i].back().problem.empty()) ++problems;
        }
    }
    // Attention tensors of the examined layers that no expected tensor claimed.
    std::map<int64_t, std::vector<std::string>> unexpected;
    int64_t n_main = 0;
    for (const AttentionLayerLayout& l : deployed.layers) n_main += !l.mtp;
    for (const std::string& name : store.unrequested_tensors()) {
        const int64_t layer = attention_layer_of(name, n_main);
        if (layer >= 0 && examined_layers.count(layer)) unexpected[layer].push_back(name);
    }

    uint64_t total_bytes = 0;
    for (const auto& file : checkpoint->files())
        for (const auto& t : file->tensors()) total_bytes += t.nbytes();
    // The main layers' caches (the MTP layers' come with speculative decoding only).
    double sparse_deployed = 0, sparse_exact = 0;
    for (const auto& l : deployed.layers)
        for (const auto& c : l.caches) sparse_deployed += l.mtp ? 0.0 : cache_bytes_per_token(c);
    for (const auto& l : exact.layers)
        for (const auto& c : l.caches) sparse_exact += l.mtp ? 0.0 : cache_bytes_per_token(c);

    if (options.json) {
        nlohmann::json j;
        j["checkpoint"] = options.checkpoint.string();
        j["model_type"] = config.model_type;
        j["files"] = checkpoint->files().size();
        j["tensors"] = checkpoint->size();
        j["bytes"] = total_bytes;
        j["layers"] = nlohmann::json::array();
        for (size_t i = 0; i < deployed.layers.size(); ++i) {
            const AttentionLayerLayout& l = deployed.layers[i];
            nlohmann::json jl{{"layer", l.layer},   {"kind", l.kind}, {"detail", l.detail},
                              {"sieve_runs", l.sieve_runs}, {"mtp", l.mtp}};
            jl["tensors"] = nlohmann::json::array();
            for (const TensorFinding& f : findings[i]) {
                nlohmann::json jt{{"name", f.name}, {"expected_shape", f.expected_shape}};
                if (!f.stored_name.empty()) {
                    jt["stored_name"] = f.stored_name;
                    jt["file"] = f.file;
                    jt["shape"] = f.shape;
                    jt["dtype"] = f.dtype;
                }
                if (!f.quantization.empty()) jt["quantization"] = f.quantization;
                if (!f.problem.empty()) jt["problem"] = f.problem;
                jl["tensors"].push_back(jt);
            }
            jl["unexpected"] = unexpected.count(l.layer) ? unexpected[l.layer] : std::vector<std::string>{};
            for (auto [profile, layout] : {std::pair{"deployed", &deployed}, std::pair{"exact", &exact}}) {
                for (const CacheSpec& c : layout->layers[i].caches)
                    jl["caches"][profile].push_back({{"name", c.name}, {"format", c.format},
                                                     {"entry_bytes", c.entry_bytes},
                                                     {"tokens_per_entry", c.tokens_per_entry},
                                                     {"window_tokens", c.window_tokens},
                                                     {"bytes_per_token", cache_bytes_per_token(c)}});
            }
            j["layers"].push_back(jl);
        }
        j["cache_bytes_per_token"] = {{"deployed", sparse_deployed}, {"exact", sparse_exact},
                                      {"dense_deployed", deployed.dense_cache_bytes_per_token},
                                      {"dense_exact", exact.dense_cache_bytes_per_token}};
        j["problems"] = problems;
        out << j.dump(2) << "\n";
    } else {
        fmt::print(out, "checkpoint  {} ({} file(s), {} tensors, {:.2f} MB)\n", options.checkpoint.string(),
                   checkpoint->files().size(), checkpoint->size(), static_cast<double>(total_bytes) / 1e6);
        std::map<std::string, int> kinds;
        for (const auto& l : deployed.layers) kinds[l.mtp ? "MTP " + l.kind : l.kind]++;
        std::string kind_list;
        for (const auto& [k, n] : kinds) kind_list += fmt::format("{}{} {}", kind_list.empty() ? "" : ", ", n, k);
        fmt::print(out, "model_type  {}\nlayers      {} ({})\n", config.model_type, deployed.layers.size(), kind_list);
        for (size_t i = 0; i < deployed.layers.size(); ++i) {
            const AttentionLayerLayout& l = deployed.layers[i];
            fmt::print(out, "\nlayer {:<3} {:<16} {}\n", l.layer, l.kind, l.detail);
            // The name as stored in the checkpoint; an alias of the canonical leaf is noted.
            auto shown_name = [](const TensorFinding& f) {
                if (f.stored_name.empty()) return f.name;
                const auto leaf = [](const std::string& n) {
                    for (std::string_view marker : {".self_attn.", ".attn."}) {
                        const size_t at = n.find(marker);
                        if (at != std::string::npos) return n.substr(at + marker.size());
                    }
                    return n;
                };
                return leaf(f.stored_name) == leaf(f.name) ? f.stored_name
                                                            : fmt::format("{} (= {})", f.stored_name, leaf(f.name));
            };
            size_t width = 0;
            for (const TensorFinding& f : findings[i]) width = std::max(width, shown_name(f).size());
            for (const TensorFinding& f : findings[i]) {
                if (!f.problem.empty())
                    fmt::print(out, "  ! {:<{}}  {}\n", shown_name(f), width, f.problem);
                else
                    fmt::print(out, "    {:<{}}  {:<14} {:<8} {}\n", shown_name(f), width, shape_to_string(f.shape),
                               f.dtype, f.quantization);
            }
            if (unexpected.count(l.layer))
                for (const std::string& name : unexpected[l.layer]) fmt::print(out, "  ? {}  unexpected\n", name);
            for (size_t c = 0; c < l.caches.size(); ++c) {
                const CacheSpec& d = l.caches[c];
                const CacheSpec& e = exact.layers[i].caches[c];
                const std::string span = d.window_tokens > 0 ? fmt::format("last {} tokens", d.window_tokens)
                                                             : fmt::format("1 per {} token(s)", d.tokens_per_entry);
                fmt::print(out, "    cache {:<26} {:<18} deployed {:>5} B ({}), exact {:>5} B ({})\n", d.name, span,
                           d.entry_bytes, d.format, e.entry_bytes, e.format);
            }
        }
        fmt::print(out, "\ncache bytes per token (all main layers; windows and compressor state are bounded)\n");
        fmt::print(out, "  deployed  sparse {:>12}   dense attention {:>12}\n", format_bytes_per_token(sparse_deployed),
                   format_bytes_per_token(deployed.dense_cache_bytes_per_token));
        fmt::print(out, "  exact     sparse {:>12}   dense attention {:>12}\n", format_bytes_per_token(sparse_exact),
                   format_bytes_per_token(exact.dense_cache_bytes_per_token));
        if (problems) fmt::print(out, "\n{} problem(s) found (marked !)\n", problems);
    }
    if (problems)
        return invalid_argument_error("checkpoint {} does not match its config: {} problem(s)",
                                      options.checkpoint.string(), problems);
    return Status::ok();
}

}  // namespace sieve::cli

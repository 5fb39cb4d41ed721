// sieve_consumer <checkpoint-dir>: loads a checkpoint's attention layers through the installed
// public headers and libsieve, runs one request (a prefill, then decode steps) through the engine
// and prints what it ran. Exit 0 only when every token of every layer produced a finite, non-zero
// output row.
#include <cmath>
#include <cstdio>
#include <vector>

#include "sieve/backends/backend.h"
#include "sieve/io/checkpoint.h"
#include "sieve/io/config.h"
#include "sieve/models/model_factory.h"
#include "sieve/runtime/engine.h"
#include "sieve/version.h"

namespace {

// Deterministic inputs; counts the output rows that are finite and not all zero.
class Io : public sieve::RequestIo {
public:
    explicit Io(int64_t hidden) : hidden_(hidden) {}
    void input(int64_t layer_pos, int64_t position, float* row) override {
        for (int64_t i = 0; i < hidden_; ++i) row[i] = std::sin(0.1f * float(i + 7 * position + 31 * layer_pos));
    }
    void output(int64_t, int64_t, const float* row) override {
        bool finite = true, nonzero = false;
        for (int64_t i = 0; i < hidden_; ++i) {
            finite = finite && std::isfinite(row[i]);
            nonzero = nonzero || row[i] != 0.0f;
        }
        ++rows;
        good += finite && nonzero;
    }
    int64_t rows = 0, good = 0;

private:
    int64_t hidden_;
};

sieve::Status run(const char* dir) {
    SIEVE_ASSIGN_OR_RETURN(auto config, sieve::load_model_config(dir));
    SIEVE_ASSIGN_OR_RETURN(auto checkpoint, sieve::Checkpoint::open(dir));
    SIEVE_ASSIGN_OR_RETURN(auto backend, sieve::make_backend("cpu"));
    sieve::ModelOptions model_options;
    model_options.backend = backend.get();
    SIEVE_ASSIGN_OR_RETURN(auto model, sieve::load_attention_model(config, *checkpoint, model_options));
    SIEVE_ASSIGN_OR_RETURN(auto engine, sieve::Engine::create(*model, sieve::EngineOptions{}));
    const int64_t prompt = 12, total = 16;
    Io io(model->hidden_size());
    SIEVE_RETURN_IF_ERROR(engine->add_request(1, total, prompt, &io));
    SIEVE_RETURN_IF_ERROR(engine->run());
    if (engine->status(1) != sieve::RequestStatus::finished) return engine->error(1);
    const int64_t expected = total * int64_t(model->layers().size());
    std::printf("sieve %.*s, %s: %zu layers, %lld of %lld output rows finite and non-zero\n", int(sieve::library_version().size()), sieve::library_version().data(),
                model->model_type().c_str(),
                model->layers().size(), (long long)io.good, (long long)expected);
    if (io.rows != expected || io.good != expected)
        return sieve::Status(sieve::StatusCode::internal, "outputs missing, non-finite or zero");
    return sieve::Status::ok();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: sieve_consumer <checkpoint-dir>\n");
        return 2;
    }
    sieve::Status status = run(argv[1]);
    if (!status.is_ok()) {
        std::fprintf(stderr, "sieve_consumer: %s\n", status.to_string().c_str());
        return 1;
    }
    return 0;
}

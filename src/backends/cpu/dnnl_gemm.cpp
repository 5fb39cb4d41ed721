#include "backends/cpu/dnnl_gemm.h"

#include <omp.h>

#include <dnnl.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"

namespace sieve::cpu {

void dnnl_set_threads(int n) { omp_set_num_threads(n); }

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

dnnl::engine& dnnl_engine() {
    static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    return engine;
}

// A representative batch for choosing the packed weight layout; oneDNN 2.x's brgemm matmul picks the
// same blocked layout for every m (checked at plan time: a shape that disagrees is "unsupported").
constexpr int64_t kLayoutProbeRows = 64;

}  // namespace

struct DnnlPackedWeights {
    int64_t n = 0, k = 0;
    dt type = dt::f32;
    dnnl::memory::desc packed_md;
    dnnl::memory weights;
    dnnl::memory bias;  // empty when there is none
};

struct DnnlGemmPlan {
    struct Shape {
        int64_t rows = 0;
        dnnl::matmul primitive;
        dnnl::memory src, dst, scratchpad;
        std::vector<dnnl_exec_arg_t> args;  // the C API's argument array: built once, no map per call
    };
    Shape full, tail;
    dnnl::stream stream;
    size_t scratchpad_bytes = 0;
};

const char* dnnl_isa_name() {
    static const char* name = [] {
        dnnl::cpu_isa cap = dnnl::cpu_isa::all;
        switch (active_isa()) {
            case Isa::scalar: cap = dnnl::cpu_isa::sse41; break;  // oneDNN's lowest level
            case Isa::avx2: cap = dnnl::cpu_isa::avx2; break;
            case Isa::avx512: cap = dnnl::cpu_isa::avx512_core; break;
            case Isa::avx512_bf16: cap = dnnl::cpu_isa::avx512_core_bf16; break;
            case Isa::amx_bf16: cap = dnnl::cpu_isa::avx512_core_amx; break;
        }
        try {
            dnnl::set_max_cpu_isa(cap);
        } catch (const dnnl::error&) {
            // Already fixed by an earlier primitive of this process: keep oneDNN's choice.
        }
        switch (dnnl::get_effective_cpu_isa()) {
            case dnnl::cpu_isa::sse41: return "sse41";
            case dnnl::cpu_isa::avx: return "avx";
            case dnnl::cpu_isa::avx2: return "avx2";
            case dnnl::cpu_isa::avx512_core: return "avx512_core";
            case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
            case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
            case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
            default: return "other";
        }
    }();
    return name;
}

Expected<std::shared_ptr<const DnnlPackedWeights>> dnnl_pack_weights(const void* w, bool bf16, int64_t n, int64_t k,
                                                                     const float* bias) {
    dnnl_isa_name();
    try {
        auto packed = std::make_shared<DnnlPackedWeights>();
        packed->n = n;
        packed->k = k;
        packed->type = bf16 ? dt::bf16 : dt::f32;
        // matmul computes src [m, k] × weights [k, n]; our W [n, k] row-major is weights in layout "ba".
        const dnnl::memory::desc src_md({kLayoutProbeRows, k}, packed->type, tag::ab);
        const dnnl::memory::desc any_md({k, n}, packed->type, tag::any);
        const dnnl::memory::desc bias_md({1, n}, dt::f32, tag::ab);
        const dnnl::memory::desc dst_md({kLayoutProbeRows, n}, dt::f32, tag::ab);
        const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, any_md, bias_md, dst_md), dnnl_engine());
        packed->packed_md = pd.weights_desc();
        packed->weights = dnnl::memory(packed->packed_md, dnnl_engine());
        dnnl::memory user({{k, n}, packed->type, tag::ba}, dnnl_engine(), const_cast<void*>(w));
        dnnl::stream stream(dnnl_engine());
        dnnl::reorder(user, packed->weights).execute(stream, user, packed->weights);
        stream.wait();
        if (bias != nullptr) {
            packed->bias = dnnl::memory(bias_md, dnnl_engine());
            std::memcpy(packed->bias.get_data_handle(), bias, static_cast<size_t>(n) * sizeof(float));
        }
        return std::shared_ptr<const DnnlPackedWeights>(std::move(packed));
    } catch (const dnnl::error& e) {
        return unsupported_error("oneDNN: cannot pack a {} weight [{}, {}]: {}", bf16 ? "bf16" : "f32", n, k, e.what());
    }
}

size_t dnnl_packed_bytes(const DnnlPackedWeights& w) {
    return w.packed_md.get_size() + (w.bias ? static_cast<size_t>(w.n) * sizeof(float) : 0);
}

Expected<std::shared_ptr<DnnlGemmPlan>> dnnl_plan(const DnnlPackedWeights& w, int64_t m, int64_t chunk_rows,
                                                  int64_t src_stride, int64_t dst_stride) {
    try {
        auto plan = std::make_shared<DnnlGemmPlan>();
        plan->stream = dnnl::stream(dnnl_engine());
        auto make = [&](int64_t rows, DnnlGemmPlan::Shape& s) {
            s.rows = rows;
            if (rows == 0) return;
            const dnnl::memory::desc src_md({rows, w.k}, w.type, {src_stride, 1});
            const dnnl::memory::desc dst_md({rows, w.n}, dt::f32, {dst_stride, 1});
            dnnl::primitive_attr attr;
            attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // scratch comes from the caller's workspace
            const dnnl::memory::desc bias_md = w.bias ? w.bias.get_desc() : dnnl::memory::desc();
            const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, w.packed_md, bias_md, dst_md), attr,
                                                  dnnl_engine());
            s.primitive = dnnl::matmul(pd);
            s.src = dnnl::memory(src_md, dnnl_engine(), DNNL_MEMORY_NONE);
            s.dst = dnnl::memory(dst_md, dnnl_engine(), DNNL_MEMORY_NONE);
            s.scratchpad = dnnl::memory(pd.scratchpad_desc(), dnnl_engine(), DNNL_MEMORY_NONE);
            plan->scratchpad_bytes = std::max(plan->scratchpad_bytes, pd.scratchpad_desc().get_size());
            s.args = {{DNNL_ARG_SRC, s.src.get()},
                      {DNNL_ARG_WEIGHTS, w.weights.get()},
                      {DNNL_ARG_DST, s.dst.get()},
                      {DNNL_ARG_SCRATCHPAD, s.scratchpad.get()}};
            if (w.bias) s.args.push_back({DNNL_ARG_BIAS, w.bias.get()});
        };
        make(std::min(m, chunk_rows), plan->full);
        make(m > chunk_rows ? m % chunk_rows : 0, plan->tail);
        return plan;
    } catch (const dnnl::error& e) {
        return unsupported_error("oneDNN: no matmul for {} rows of a packed {} weight [{}, {}]: {}", m,
                                 w.type == dt::bf16 ? "bf16" : "f32", w.n, w.k, e.what());
    }
}

size_t dnnl_scratchpad_bytes(const DnnlGemmPlan& plan) { return plan.scratchpad_bytes; }

Status dnnl_run(const DnnlPackedWeights&, DnnlGemmPlan& plan, const void* src, float* dst, int64_t rows,
                void* scratchpad) {
    DnnlGemmPlan::Shape* s = rows == plan.full.rows ? &plan.full : rows == plan.tail.rows ? &plan.tail : nullptr;
    if (s == nullptr || rows == 0)
        return internal_error("oneDNN run: {} rows, planned {} and {}", rows, plan.full.rows, plan.tail.rows);
    try {
        s->src.set_data_handle(const_cast<void*>(src));
        s->dst.set_data_handle(dst);
        s->scratchpad.set_data_handle(scratchpad);
    } catch (const dnnl::error& e) {
        return internal_error("oneDNN matmul: set_data_handle failed: {}", e.what());
    }
    const dnnl_status_t st = dnnl_primitive_execute(s->primitive.get(), plan.stream.get(),
                                                    static_cast<int>(s->args.size()), s->args.data());
    if (st != dnnl_success || dnnl_stream_wait(plan.stream.get()) != dnnl_success)
        return internal_error("oneDNN matmul failed: status {}", static_cast<int>(st));
    return Status::ok();
}

}  // namespace sieve::cpu

// Programmatic dependent launch (sm_90): a kernel launched with launch_after_previous is set up while the
// kernel before it on the stream still runs, so that its launch overlaps that kernel's tail instead of
// following it. Every kernel of the backend is launched so and calls wait_for_previous_kernel() as its first
// statement, before it reads or writes anything (the wait returns once the previous grid has completed and
// its writes are visible): the stream's order stays what it was, and a kernel after it waits for it in
// turn. A stream capture records the dependencies into the graph. Launch errors are the runtime's last
// error, as for <<<…>>>.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace sieve::cuda {

__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

template <typename... Params, typename... Args>
cudaError_t launch_after_previous(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes,
                                  cudaStream_t stream, Args&&... args) {
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem_bytes;
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace sieve::cuda

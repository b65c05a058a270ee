//===- cuda_kernels_bench.cpp - GEMM utilization of the CUDA matmul -------===//
//
// How much of the GPU's GEMM throughput nn.matmul gets on the shapes a
// transformer runs: each shape goes through the real entry point
// (cuda::runMatmul, with a DeviceContext set up here as CudaBackend sets
// one up: a stream, a cuBLAS handle bound to it and to a 64 MiB workspace,
// an error word), timed with CUDA events, and is printed as TFLOP/s and as
// a ratio against the baseline: cuBLAS SGEMM (FP32 compute, as the kernel
// asks for) on a large square GEMM, the "cuBLAS peak" of this GPU.
//
// Before timing, one small matmul with a broadcast bias and a batched
// rhs is compared with the CPU reference kernel, so a wrong answer cannot
// hide behind a good number.
//
// For scale, the flash-style attention kernels (FP32 CUDA cores, so they
// are compared with the same SGEMM peak) and the fused decode kernel
// (memory-bound: GB/s of cache read) are timed too.
//
// Exits 0 with "no CUDA device: ..." where there is none. About 10 s on an
// H200.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/ops/Checks.h"
#include "runtime/ops/KernelCall.h"
#include "runtime/plan/Opcodes.h"
#include "runtime/support/ShapeText.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace zplan;

namespace {

constexpr size_t kWorkspaceBytes = 64u << 20;

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "cuda_kernels_bench: %s\n", message.c_str());
  std::exit(1);
}

void check(cudaError_t status, const char *what) {
  if (status != cudaSuccess)
    fail(std::string(what) + ": " + cudaGetErrorString(status));
}

void check(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    fail(std::string(what) + ": " + cublasGetStatusString(status));
}

void check(const Status &status) {
  if (!status.ok())
    fail(status.message());
}

/// The DeviceContext CudaBackend would give the kernels.
struct Device {
  cuda::DeviceContext context;

  Device() {
    check(cudaGetDeviceProperties(&context.properties, 0),
          "cudaGetDeviceProperties");
    check(cudaStreamCreate(&context.stream), "cudaStreamCreate");
    check(cublasCreate(&context.cublas), "cublasCreate");
    check(cublasSetStream(context.cublas, context.stream), "cublasSetStream");
    check(cudaMalloc(&context.workspace, kWorkspaceBytes), "cudaMalloc");
    context.workspaceBytes = kWorkspaceBytes;
    check(
        cublasSetWorkspace(context.cublas, context.workspace, kWorkspaceBytes),
        "cublasSetWorkspace");
    check(cudaMalloc(&context.errorWord, sizeof(uint32_t)), "cudaMalloc");
    check(cudaMemset(context.errorWord, 0, sizeof(uint32_t)), "cudaMemset");
  }
  ~Device() {
    cudaFree(context.errorWord);
    cudaFree(context.workspace);
    cublasDestroy(context.cublas);
    cudaStreamDestroy(context.stream);
  }
};

/// A device f32 tensor filled with small pseudo-random values.
struct DeviceTensor {
  TensorRef ref;
  std::vector<float> host;

  explicit DeviceTensor(std::vector<int64_t> shape, bool keepHost = false) {
    ref.shape = std::move(shape);
    ref.dtype = ElementType::F32;
    int64_t count = ref.numElements();
    check(cudaMalloc(&ref.data, std::max<int64_t>(count, 1) * sizeof(float)),
          "cudaMalloc");
    // A repeating block of random values: big tensors fill fast.
    std::mt19937 random(static_cast<unsigned>(count));
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> block(std::min<int64_t>(count, 1 << 20));
    for (float &value : block)
      value = uniform(random);
    for (int64_t first = 0; first < count; first += block.size()) {
      int64_t n = std::min<int64_t>(block.size(), count - first);
      check(cudaMemcpy(ref.as<float>() + first, block.data(), n * sizeof(float),
                       cudaMemcpyHostToDevice),
            "cudaMemcpy");
      if (keepHost)
        host.insert(host.end(), block.begin(), block.begin() + n);
    }
  }
  ~DeviceTensor() { cudaFree(ref.data); }
  DeviceTensor(const DeviceTensor &) = delete;
  DeviceTensor &operator=(const DeviceTensor &) = delete;
};

plan::Instruction matmulInstruction(bool transposeRhs) {
  plan::Instruction instruction;
  instruction.set_opcode(plan::OPCODE_MATMUL);
  instruction.set_queue(plan::COMPUTE);
  plan::Attribute *attribute = instruction.add_attributes();
  attribute->set_name("transpose_rhs");
  attribute->add_ints(transposeRhs ? 1 : 0);
  return instruction;
}

/// One instruction, issued through its CUDA entry point.
struct Call {
  plan::Instruction instruction;
  std::vector<TensorRef> operands, results;

  Status issue(Device &device) const {
    ops::KernelCall host{instruction, operands, results};
    return cuda::findKernel(instruction.opcode())(
        cuda::KernelCall{host, device.context});
  }
};

plan::Instruction scaledInstruction(plan::Opcode opcode, double scale) {
  plan::Instruction instruction;
  instruction.set_opcode(opcode);
  instruction.set_queue(plan::COMPUTE);
  plan::Attribute *attribute = instruction.add_attributes();
  attribute->set_name("scale");
  attribute->add_floats(scale);
  return instruction;
}

/// Median milliseconds of `run` over `repeats` timed runs after warm-up.
template <typename Run>
double timeMilliseconds(Device &device, int repeats, Run &&run) {
  for (int i = 0; i < 3; ++i)
    run();
  check(cudaStreamSynchronize(device.context.stream), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    check(cudaEventRecord(start, device.context.stream), "cudaEventRecord");
    run();
    check(cudaEventRecord(stop, device.context.stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// Compares a small batched, biased, transposed matmul with the CPU kernel.
void checkAgainstCpu(Device &device) {
  DeviceTensor lhs({3, 37, 53}, true), rhs({3, 29, 53}, true),
      bias({37, 1}, true), result({3, 37, 29});
  Call matmul{
      matmulInstruction(true), {lhs.ref, rhs.ref, bias.ref}, {result.ref}};
  check(matmul.issue(device));
  std::vector<float> gpu(result.ref.numElements());
  check(cudaMemcpy(gpu.data(), result.ref.data, gpu.size() * sizeof(float),
                   cudaMemcpyDeviceToHost),
        "cudaMemcpy");
  std::vector<float> cpu(gpu.size());
  auto hostRef = [](std::vector<float> &values, const TensorRef &like) {
    return TensorRef{values.data(), like.shape, like.dtype};
  };
  std::vector<TensorRef> operands = {hostRef(lhs.host, lhs.ref),
                                     hostRef(rhs.host, rhs.ref),
                                     hostRef(bias.host, bias.ref)};
  std::vector<TensorRef> results = {hostRef(cpu, result.ref)};
  check(cpu::runKernel(matmul.instruction, operands, results));
  // |gpu - cpu| <= 1e-5 + 1e-4 |cpu|: fp32 sums of 53 products in another
  // order; an absolute floor for results that cancel to near 0.
  double worst = 0;
  for (size_t i = 0; i < cpu.size(); ++i)
    worst = std::max(worst, std::abs(double(gpu[i]) - cpu[i]) /
                                (1e-5 + 1e-4 * std::abs(double(cpu[i]))));
  std::printf("check: [3,37,53] x [3,29,53]^T + bias[37,1] vs the CPU "
              "kernel: worst difference %.3f of the tolerance\n",
              worst);
  if (worst > 1)
    fail("the CUDA matmul disagrees with the CPU kernel");
}

struct Shape {
  const char *name;
  std::vector<int64_t> lhs, rhs;
  bool transposeRhs, bias;
};

} // namespace

int main() {
  int devices = 0;
  if (cudaError_t status = cudaGetDeviceCount(&devices);
      status != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: %s\n", status != cudaSuccess
                                            ? cudaGetErrorString(status)
                                            : "no device found");
    return 0;
  }
  Device device;
  std::printf("device: %s (%d SMs)\n", device.context.properties.name,
              device.context.properties.multiProcessorCount);
  checkAgainstCpu(device);

  // The baseline: cuBLAS SGEMM, FP32 compute, 8192^3.
  constexpr int kSquare = 8192;
  double peak;
  {
    DeviceTensor a({kSquare, kSquare}), b({kSquare, kSquare}),
        c({kSquare, kSquare});
    float alpha = 1, beta = 0;
    double ms = timeMilliseconds(device, 10, [&] {
      check(cublasGemmEx(device.context.cublas, CUBLAS_OP_N, CUBLAS_OP_N,
                         kSquare, kSquare, kSquare, &alpha, b.ref.data,
                         CUDA_R_32F, kSquare, a.ref.data, CUDA_R_32F, kSquare,
                         &beta, c.ref.data, CUDA_R_32F, kSquare,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
    });
    peak = 2.0 * kSquare * kSquare * double(kSquare) / (ms * 1e9);
    std::printf("cuBLAS peak: SGEMM %d^3 (FP32 compute) %.3f ms, %.1f "
                "TFLOP/s\n",
                kSquare, ms, peak);
  }

  // A 7B-class layer, 2 x 2048 tokens, hidden 4096, 32 heads of 128.
  const Shape shapes[] = {
      {"qkv projection + bias", {2, 2048, 4096}, {12288, 4096}, true, true},
      {"attention output", {2, 2048, 4096}, {4096, 4096}, true, false},
      {"mlp up", {2, 2048, 4096}, {16384, 4096}, true, false},
      {"mlp down", {2, 2048, 16384}, {4096, 16384}, true, false},
      {"scores q k^T (batched)",
       {2, 32, 2048, 128},
       {2, 32, 2048, 128},
       true,
       false},
      {"probs v (batched)",
       {2, 32, 2048, 2048},
       {2, 32, 2048, 128},
       false,
       false},
      {"decode qkv (M = 1)", {1, 4096}, {12288, 4096}, true, true},
  };
  std::printf("%-26s %-34s %10s %10s %8s\n", "matmul", "lhs x rhs", "ms",
              "TFLOP/s", "of peak");
  for (const Shape &shape : shapes) {
    DeviceTensor lhs(shape.lhs), rhs(shape.rhs);
    int64_t k = shape.lhs.back();
    int64_t n =
        shape.transposeRhs ? shape.rhs[shape.rhs.size() - 2] : shape.rhs.back();
    std::vector<int64_t> resultShape(shape.lhs.begin(), shape.lhs.end() - 1);
    resultShape.push_back(n);
    DeviceTensor result(resultShape);
    std::unique_ptr<DeviceTensor> bias;
    Call matmul{matmulInstruction(shape.transposeRhs),
                {lhs.ref, rhs.ref},
                {result.ref}};
    if (shape.bias) {
      bias = std::make_unique<DeviceTensor>(std::vector<int64_t>{n});
      matmul.operands.push_back(bias->ref);
    }
    double ms =
        timeMilliseconds(device, 10, [&] { check(matmul.issue(device)); });
    double flops = 2.0 * (lhs.ref.numElements() / k) * n * k;
    double tflops = flops / (ms * 1e9);
    std::string dims = shapeText(shape.lhs) + " x " + shapeText(shape.rhs) +
                       (shape.transposeRhs ? "^T" : "");
    std::printf("%-26s %-34s %10.3f %10.1f %7.0f%%\n", shape.name, dims.c_str(),
                ms, tflops, 100 * tflops / peak);
  }

  // Attention of 2 x 32 heads, S = T = 2048, D = 128, no mask.
  {
    std::vector<int64_t> shape = {2, 32, 2048, 128};
    DeviceTensor q(shape), k(shape), v(shape), out(shape), dout(shape),
        dq(shape), dk(shape), dv(shape);
    double scale = 1 / std::sqrt(128.0);
    Call forward{scaledInstruction(plan::OPCODE_ATTENTION, scale),
                 {q.ref, k.ref, v.ref},
                 {out.ref}};
    Call backward{scaledInstruction(plan::OPCODE_ATTENTION_GRAD, scale),
                  {dout.ref, q.ref, k.ref, v.ref},
                  {dq.ref, dk.ref, dv.ref}};
    // Two S x T x D products forward; five backward (the usual counts,
    // not counting recomputation).
    double forwardFlops = 2.0 * 2 * 64 * 2048 * 2048 * 128;
    double ms =
        timeMilliseconds(device, 5, [&] { check(forward.issue(device)); });
    double tflops = forwardFlops / (ms * 1e9);
    std::printf("%-26s %-34s %10.3f %10.1f %7.0f%%\n", "attention",
                "[2,32,2048,128] x3", ms, tflops, 100 * tflops / peak);
    ms = timeMilliseconds(device, 5, [&] { check(backward.issue(device)); });
    tflops = 2.5 * forwardFlops / (ms * 1e9);
    std::printf("%-26s %-34s %10.3f %10.1f %7.0f%%\n", "attention_grad",
                "[2,32,2048,128] x4", ms, tflops, 100 * tflops / peak);
  }

  // Decode: 8 sequences x 32 heads, one token each at position 4095 of a
  // 4096-slot cache, D = 128: every K and V row is read once.
  {
    DeviceTensor q({8, 32, 1, 128}), k({8, 32, 4096, 128}),
        v({8, 32, 4096, 128}), out({8, 32, 1, 128});
    std::vector<int64_t> last(8, 4095);
    TensorRef positions{nullptr, {8, 1}, ElementType::I64};
    check(cudaMalloc(&positions.data, last.size() * sizeof(int64_t)),
          "cudaMalloc");
    check(cudaMemcpy(positions.data, last.data(), last.size() * sizeof(int64_t),
                     cudaMemcpyHostToDevice),
          "cudaMemcpy");
    Call decode{scaledInstruction(plan::OPCODE_CACHED_ATTENTION, 0.088),
                {q.ref, k.ref, v.ref, positions},
                {out.ref}};
    double ms =
        timeMilliseconds(device, 10, [&] { check(decode.issue(device)); });
    double bytes = 2.0 * k.ref.numElements() * sizeof(float);
    std::printf("%-26s %-34s %10.3f %8.0f GB/s of K and V\n",
                "cached_attention (decode)", "[8,32,1,128], cache 4096", ms,
                bytes / (ms * 1e6));
    cudaFree(positions.data);
  }

  uint32_t error = 0;
  check(cudaMemcpy(&error, device.context.errorWord, sizeof(error),
                   cudaMemcpyDeviceToHost),
        "cudaMemcpy");
  if (error != 0)
    fail("a kernel reported error word " + std::to_string(error));
  return 0;
}

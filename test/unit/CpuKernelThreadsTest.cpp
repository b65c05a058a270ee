//===- CpuKernelThreadsTest.cpp - the CPU kernels at several threads ------===//
//
// `zrun --threads T` splits the CPU kernels' loops across T threads
// (runtime/cpu/Parallel.h) and promises the same bits at any T: a loss log
// must not change with the thread count. Here the pool itself is checked
// (every item once, the chunks on distinct threads, a nested call inline),
// then every kernel that splits its work is run on the same operands at 1
// thread and at 3 (an uneven split) and its results, and the operands it
// updates in place, are compared byte for byte. The values themselves are
// checked against references in CpuKernelsTest and TrainKernelsTest.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Parallel.h"

#include "test/unit/KernelTestSupport.h"
#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <mutex>
#include <set>
#include <thread>

using namespace zplan;
using namespace zplan::testing;

namespace {

std::mt19937 &rng() {
  static std::mt19937 generator(4321);
  return generator;
}

/// Restores one thread when a test ends, whatever it set.
struct OneThreadAfter {
  ~OneThreadAfter() { cpu::setKernelThreads(1); }
};

//===----------------------------------------------------------------------===//
// The pool
//===----------------------------------------------------------------------===//

TEST(CpuKernelThreads, EveryItemOnceOnDistinctThreads) {
  OneThreadAfter restore;
  cpu::setKernelThreads(3);
  ASSERT_EQ(cpu::detail::kernelThreads(), 3);
  for (int64_t count : {3, 7, 300, 1001}) {
    std::vector<std::atomic<int>> seen(count);
    std::mutex mutex;
    std::set<std::thread::id> threads;
    int chunks = 0;
    cpu::detail::parallelFor(count, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        ++seen[i];
      std::lock_guard<std::mutex> lock(mutex);
      threads.insert(std::this_thread::get_id());
      ++chunks;
    });
    for (int64_t i = 0; i < count; ++i)
      ASSERT_EQ(seen[i], 1) << "item " << i << " of " << count;
    EXPECT_EQ(chunks, 3) << count;
    EXPECT_EQ(threads.size(), 3u) << count;
    EXPECT_TRUE(threads.count(std::this_thread::get_id())) << count;
  }
}

TEST(CpuKernelThreads, SmallWorkAndNestedCallsRunInline) {
  OneThreadAfter restore;
  cpu::setKernelThreads(2);
  std::thread::id caller = std::this_thread::get_id();
  // Fewer than two grains: one chunk, on the caller's thread.
  int chunks = 0;
  cpu::detail::parallelFor(10, 8, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 10);
    ++chunks;
  });
  EXPECT_EQ(chunks, 1);
  // A call from inside a chunk runs inline on that chunk's thread.
  std::atomic<int> inner{0};
  cpu::detail::parallelFor(2, 1, [&](int64_t begin, int64_t end) {
    std::thread::id outer = std::this_thread::get_id();
    cpu::detail::parallelFor(100, 1, [&](int64_t b, int64_t e) {
      EXPECT_EQ(std::this_thread::get_id(), outer);
      inner += static_cast<int>(e - b);
    });
    (void)begin;
    (void)end;
  });
  EXPECT_EQ(inner, 200);
  cpu::setKernelThreads(1);
  EXPECT_EQ(cpu::detail::kernelThreads(), 1);
}

//===----------------------------------------------------------------------===//
// The kernels: the same bits at 1 and 3 threads
//===----------------------------------------------------------------------===//

/// Runs `op` on copies of `operands` into zeroed copies of `results` at 1
/// thread and at 3, and expects every result and every operand (the
/// optimizers update theirs in place) to hold the same bytes after both.
void expectSameBitsAtThreads(const Op &op, const std::vector<Tensor> &operands,
                             const std::vector<Tensor> &results) {
  OneThreadAfter restore;
  std::vector<std::vector<Tensor>> outcomes;
  for (int threads : {1, 3}) {
    cpu::setKernelThreads(threads);
    std::vector<Tensor> in = operands, out = results;
    std::vector<Tensor *> inPointers, outPointers;
    for (Tensor &tensor : in)
      inPointers.push_back(&tensor);
    for (Tensor &tensor : out)
      outPointers.push_back(&tensor);
    runOk(op, inPointers, outPointers);
    in.insert(in.end(), out.begin(), out.end());
    outcomes.push_back(std::move(in));
  }
  for (size_t i = 0; i < outcomes[0].size(); ++i) {
    const std::vector<uint64_t> &one = outcomes[0][i].storage,
                                &three = outcomes[1][i].storage;
    size_t first = 0;
    while (first < one.size() && one[first] == three[first])
      ++first;
    EXPECT_EQ(first, one.size())
        << plan::opcodeName(op.instruction.opcode()) << ": "
        << (i < operands.size() ? "operand " : "result ")
        << (i < operands.size() ? i : i - operands.size())
        << " differs from 8-byte word " << first;
  }
}

Tensor ids(std::vector<int64_t> shape, int64_t classes) {
  std::vector<int64_t> values(count(shape));
  std::uniform_int_distribution<int64_t> pick(0, classes - 1);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = i % 5 == 3 ? -100 : pick(rng()); // some ignored rows
  return make<int64_t>(std::move(shape), values);
}

TEST(CpuKernelThreads, LossesAreTheSameBits) {
  Tensor logits = randomFloats(rng(), {3, 13, 1000}, -8, 8);
  Tensor targets = ids({3, 13}, 1000);
  Tensor dloss = make<float>({}, {0.75f});
  Tensor dlogp = randomFloats(rng(), {3, 13});
  Tensor scalar({}), perRow({3, 13}), full({3, 13, 1000});
  expectSameBitsAtThreads(Op("cross_entropy"), {logits, targets}, {scalar});
  expectSameBitsAtThreads(Op("cross_entropy_grad"), {logits, targets, dloss},
                          {full});
  expectSameBitsAtThreads(Op("token_logprobs"), {logits, targets}, {perRow});
  expectSameBitsAtThreads(Op("token_logprobs_grad"), {logits, targets, dlogp},
                          {full});
  expectSameBitsAtThreads(Op("token_entropy"), {logits}, {perRow});
}

TEST(CpuKernelThreads, NormsAndSoftmaxAreTheSameBits) {
  Tensor x = randomFloats(rng(), {5, 11, 300}, -3, 5);
  Tensor dy = randomFloats(rng(), {5, 11, 300});
  Tensor weight = randomFloats(rng(), {300}, 0.5, 1.5);
  Tensor bias = randomFloats(rng(), {300});
  Tensor y({5, 11, 300}), dweight({300}), dbias({300});
  Op layerNorm = Op("layer_norm").ints("axis", {-1}).real("epsilon", 1e-5);
  expectSameBitsAtThreads(layerNorm, {x, weight, bias}, {y});
  expectSameBitsAtThreads(Op("rms_norm").real("epsilon", 1e-6), {x, weight},
                          {y});
  expectSameBitsAtThreads(
      Op("layer_norm_grad").ints("axis", {-1}).real("epsilon", 1e-5),
      {dy, x, weight}, {y, dweight, dbias});
  expectSameBitsAtThreads(Op("rms_norm_grad").real("epsilon", 1e-6),
                          {dy, x, weight}, {y, dweight});
  // Softmax along the middle axis (strided lines) and the last.
  for (int64_t axis : {1, 2}) {
    SCOPED_TRACE("softmax axis " + std::to_string(axis));
    expectSameBitsAtThreads(Op("softmax").ints("axis", {axis}), {x}, {y});
    expectSameBitsAtThreads(Op("softmax_grad").ints("axis", {axis}), {dy, x},
                            {y});
  }
}

TEST(CpuKernelThreads, MatmulIsTheSameBits) {
  // Split by rows (M >= N) and by columns (M < N) at boundaries that cut
  // the GEMM's tiles (zplan's AVX-512 kernel here, Gemm.h; OpenBLAS's on
  // other CPUs), with and without a bias and transpose_rhs; and one
  // row against a weight (decode's GEMV, VectorMath's dotRows and
  // axpyRows, split by output element).
  Tensor tall = randomFloats(rng(), {900, 96}),
         weight = randomFloats(rng(), {96, 40});
  Tensor wide = randomFloats(rng(), {37, 200}),
         linear = randomFloats(rng(), {700, 200});
  Tensor bias = randomFloats(rng(), {700});
  Tensor token = randomFloats(rng(), {1, 200});
  Tensor rows({900, 40}), columns({37, 700}), decoded({1, 700});
  expectSameBitsAtThreads(Op("matmul"), {tall, weight}, {rows});
  expectSameBitsAtThreads(Op("matmul").ints("transpose_rhs", {1}),
                          {wide, linear, bias}, {columns});
  expectSameBitsAtThreads(Op("matmul").ints("transpose_rhs", {1}),
                          {token, linear}, {decoded});
  Tensor transposed = randomFloats(rng(), {200, 700});
  expectSameBitsAtThreads(Op("matmul"), {token, transposed}, {decoded});
}

TEST(CpuKernelThreads, AttentionIsTheSameBits) {
  // Causal, as exporters write it: the lowest float above the diagonal.
  Tensor q = randomFloats(rng(), {2, 3, 64, 16}, -2, 2);
  Tensor k = randomFloats(rng(), {2, 3, 64, 16}, -2, 2);
  Tensor v = randomFloats(rng(), {2, 3, 64, 16});
  Tensor dout = randomFloats(rng(), {2, 3, 64, 16});
  Tensor mask({64, 64});
  for (int64_t i = 0; i < 64; ++i)
    for (int64_t j = 0; j < 64; ++j)
      mask.floats()[i * 64 + j] =
          j > i ? -std::numeric_limits<float>::max() : 0.0f;
  Tensor out(q.shape), dq(q.shape), dk(k.shape), dv(v.shape);
  Op forward =
      Op("attention").real("scale", 0.25).text("mask_kind", "additive");
  Op backward =
      Op("attention_grad").real("scale", 0.25).text("mask_kind", "additive");
  expectSameBitsAtThreads(forward, {q, k, v, mask}, {out});
  expectSameBitsAtThreads(backward, {dout, q, k, v, mask}, {dq, dk, dv});
}

TEST(CpuKernelThreads, ElementwiseAndCopiesAreTheSameBits) {
  Tensor a = randomFloats(rng(), {6, 50, 200}, -4, 4);
  Tensor b = randomFloats(rng(), {6, 50, 200});
  Tensor row = randomFloats(rng(), {200});
  Tensor column = randomFloats(rng(), {6, 1, 200});
  Tensor y({6, 50, 200});
  expectSameBitsAtThreads(Op("add"), {a, row}, {y});
  expectSameBitsAtThreads(Op("mul"), {a, column}, {y});
  expectSameBitsAtThreads(Op("sub"), {a, b}, {y});
  expectSameBitsAtThreads(Op("silu"), {a}, {y});
  expectSameBitsAtThreads(Op("sigmoid"), {a}, {y});
  expectSameBitsAtThreads(Op("gelu_grad").text("approximate", "tanh"), {b, a},
                          {y});
  Tensor mask({6, 1, 200}, ElementType::Bool);
  for (int64_t i = 0; i < mask.size(); ++i)
    mask.data<uint8_t>()[i] = i % 3 == 0;
  expectSameBitsAtThreads(Op("where"), {mask, a, b}, {y});
  Tensor half({6, 50, 200}, ElementType::BF16);
  expectSameBitsAtThreads(Op("cast"), {a}, {half});
  // A tiled transpose of the last two dimensions, and a general one.
  Tensor swapped({6, 200, 50}), rotated({200, 6, 50});
  expectSameBitsAtThreads(Op("transpose").ints("perm", {0, 2, 1}), {a},
                          {swapped});
  expectSameBitsAtThreads(Op("transpose").ints("perm", {2, 0, 1}), {a},
                          {rotated});
}

TEST(CpuKernelThreads, OptimizersAreTheSameBits) {
  std::vector<int64_t> shape = {100003};
  Tensor param = randomFloats(rng(), shape), grad = randomFloats(rng(), shape);
  Tensor m = randomFloats(rng(), shape, -0.1, 0.1);
  Tensor v = randomFloats(rng(), shape, 0, 0.01);
  Tensor hyper = make<float>(
      {8}, {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1.0f, 0.271f, 0.00399f});
  expectSameBitsAtThreads(Op("adamw"), {param, grad, m, v, hyper}, {});
  expectSameBitsAtThreads(Op("sgd"), {param, grad, m, hyper}, {});
}

} // namespace

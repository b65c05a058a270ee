//===- KernelTestSupport.h - tensors and instructions for kernel tests ----===//
//
// CpuKernelsTest.cpp (forward kernels against naive loops) and
// TrainKernelsTest.cpp (gradient kernels against finite differences) both
// run kernels through runKernel, the way the executor calls them: an
// Instruction with the emitter's attributes and tensors in caller memory.
// These are the tensors, instruction builder and run helpers they share.
// Each test file keeps its own random generator and seed, so its data does
// not depend on what the other file draws.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_TEST_UNIT_KERNELTESTSUPPORT_H
#define ZPLAN_TEST_UNIT_KERNELTESTSUPPORT_H

#include "runtime/cpu/Kernels.h"
#include "runtime/plan/Opcodes.h"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace zplan::testing {

template <typename T> constexpr ElementType dtypeOf();
template <> constexpr ElementType dtypeOf<float>() { return ElementType::F32; }
template <> constexpr ElementType dtypeOf<double>() { return ElementType::F64; }
template <> constexpr ElementType dtypeOf<int64_t>() {
  return ElementType::I64;
}
template <> constexpr ElementType dtypeOf<int32_t>() {
  return ElementType::I32;
}
template <> constexpr ElementType dtypeOf<int8_t>() { return ElementType::I8; }
template <> constexpr ElementType dtypeOf<uint8_t>() { return ElementType::U8; }

/// The number of elements of `shape`.
inline int64_t count(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t extent : shape)
    n *= extent;
  return n;
}

/// A tensor that owns its (8-byte aligned) memory, zero-filled.
struct Tensor {
  std::vector<int64_t> shape;
  ElementType dtype = ElementType::F32;
  std::vector<uint64_t> storage;

  explicit Tensor(std::vector<int64_t> shape,
                  ElementType dtype = ElementType::F32)
      : shape(std::move(shape)), dtype(dtype),
        storage((count(this->shape) * elementTypeInfo(dtype).bytes + 7) / 8 + 1,
                0) {}

  int64_t size() const { return count(shape); }
  template <typename T> T *data() {
    return reinterpret_cast<T *>(storage.data());
  }
  float *floats() { return data<float>(); }
  template <typename T = float> std::vector<T> values() {
    return std::vector<T>(data<T>(), data<T>() + size());
  }
  TensorRef ref() { return TensorRef{storage.data(), shape, dtype}; }
};

/// A tensor of `shape` holding `values` (as many as the shape has).
template <typename T>
Tensor make(std::vector<int64_t> shape, const std::vector<T> &values,
            ElementType dtype = dtypeOf<T>()) {
  Tensor tensor(std::move(shape), dtype);
  EXPECT_EQ(static_cast<int64_t>(values.size()), tensor.size());
  std::memcpy(tensor.storage.data(), values.data(), values.size() * sizeof(T));
  return tensor;
}

/// An f32 tensor of `shape`, uniform in [low, high) from `generator`.
inline Tensor randomFloats(std::mt19937 &generator, std::vector<int64_t> shape,
                           double low = -1, double high = 1) {
  Tensor tensor(std::move(shape));
  std::uniform_real_distribution<float> dist(low, high);
  for (int64_t i = 0; i < tensor.size(); ++i)
    tensor.floats()[i] = dist(generator);
  return tensor;
}

/// An instruction with attributes written as the plan emitter writes them.
struct Op {
  plan::Instruction instruction;

  /// The opcode called `name`; OPCODE_UNSPECIFIED when none is.
  explicit Op(const std::string &name) {
    std::optional<plan::Opcode> opcode = plan::opcodeFromName(name);
    if (!opcode)
      ADD_FAILURE() << "no opcode is called '" << name << "'";
    instruction.set_opcode(opcode.value_or(plan::OPCODE_UNSPECIFIED));
  }
  explicit Op(plan::Opcode opcode) { instruction.set_opcode(opcode); }
  Op &ints(const std::string &name, std::vector<int64_t> values) {
    plan::Attribute *attribute = instruction.add_attributes();
    attribute->set_name(name);
    for (int64_t value : values)
      attribute->add_ints(value);
    return *this;
  }
  Op &real(const std::string &name, double value) {
    plan::Attribute *attribute = instruction.add_attributes();
    attribute->set_name(name);
    attribute->add_floats(value);
    return *this;
  }
  Op &text(const std::string &name, const std::string &value) {
    plan::Attribute *attribute = instruction.add_attributes();
    attribute->set_name(name);
    attribute->set_text(value);
    return *this;
  }
};

/// Runs `op` on the tensors, as the executor would.
inline Status run(const Op &op, std::vector<Tensor *> operands,
                  std::vector<Tensor *> results) {
  std::vector<TensorRef> in, out;
  for (Tensor *operand : operands)
    in.push_back(operand->ref());
  for (Tensor *result : results)
    out.push_back(result->ref());
  return cpu::runKernel(op.instruction, in, out);
}
inline Status run(const Op &op, std::vector<Tensor *> operands,
                  Tensor &result) {
  return run(op, std::move(operands), std::vector<Tensor *>{&result});
}

/// Runs `op`, expecting success (a failure is reported, not fatal, so that
/// it can be called inside a loss function).
inline void runOk(const Op &op, std::vector<Tensor *> operands,
                  std::vector<Tensor *> results) {
  Status status = run(op, std::move(operands), std::move(results));
  EXPECT_TRUE(status.ok()) << status.message();
}
inline void runOk(const Op &op, std::vector<Tensor *> operands,
                  Tensor &result) {
  runOk(op, std::move(operands), std::vector<Tensor *>{&result});
}

/// The error message of running `op` ("" if it succeeded).
inline std::string runError(const Op &op, std::vector<Tensor *> operands,
                            std::vector<Tensor *> results) {
  Status status = run(op, std::move(operands), std::move(results));
  return status.ok() ? "" : status.message();
}
inline std::string runError(const Op &op, std::vector<Tensor *> operands,
                            Tensor &result) {
  return runError(op, std::move(operands), std::vector<Tensor *>{&result});
}

} // namespace zplan::testing

#endif // ZPLAN_TEST_UNIT_KERNELTESTSUPPORT_H

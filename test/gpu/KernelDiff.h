//===- KernelDiff.h - one instruction on two backends, compared -----------===//
//
// The harness of KernelDiffTest.cpp: a case is one compute instruction (its
// opcode and attributes as the plan emitter writes them) with host operand
// tensors and the results' shapes and types. runCase() runs it on one
// backend through the Backend interface only -- allocate, copyFromHost,
// prepareKernel, createQueues, run, synchronize, copyToHost -- exactly as the
// executor drives a backend, so the same case runs on the CPU reference and
// on any other backend. compareRuns() then holds the second run against the
// first: every result, and every operand (optimizers and cache_append
// update operands in place; every other operand must come back unchanged),
// element by element, floats within the case's rtol/atol (NaN equals NaN,
// infinities equal only themselves), integers and bools exactly.
//
// Results start out filled with a poison pattern (quiet NaN for floats,
// 0xA5 bytes otherwise) on both backends, so an element the tested kernel
// never writes shows up as a mismatch instead of matching a zeroed
// allocation by luck.
//
// CaseBuilder makes cases: operands drawn from a generator seeded by the
// case's name (adding a case changes no other case's data).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_TEST_GPU_KERNELDIFF_H
#define ZPLAN_TEST_GPU_KERNELDIFF_H

#include "runtime/Backend.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/support/ElementType.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace zplan::testing {

/// A tensor in host memory: what a case hands to a backend and what comes
/// back from it.
struct HostTensor {
  std::vector<int64_t> shape;
  ElementType dtype = ElementType::F32;
  std::vector<uint8_t> bytes;

  HostTensor() = default;
  /// Zero-filled.
  HostTensor(std::vector<int64_t> shape, ElementType dtype);

  int64_t numElements() const;
  /// Element `i` as a double (bool and integers converted).
  double get(int64_t i) const;
  /// Element `i` as an integer (floats truncated).
  int64_t getInt(int64_t i) const;
  /// Stores `value` converted to the element type.
  void set(int64_t i, double value);
  /// Stores `value` exactly (integer types), converted (floats).
  void setInt(int64_t i, int64_t value);
};

/// The result a case expects the op to write.
struct ResultSpec {
  std::vector<int64_t> shape;
  ElementType dtype = ElementType::F32;
  /// >= 0: the result is that operand's storage (cache_append writes its
  /// cache in place), so it is not allocated or poisoned.
  int aliasOf = -1;
};

/// |tested - reference| <= atol + rtol * |reference| for floats.
struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

struct DiffCase {
  /// "<op>/<variant>", unique among the cases.
  std::string name;
  plan::Instruction instruction;
  std::vector<HostTensor> operands;
  std::vector<ResultSpec> results;
  Tolerance tolerance;
  /// Every tensor is placed one element past an aligned address (a view
  /// into a buffer), so a kernel that assumes aligned vector loads fails.
  bool misaligned = false;
  /// The data is invalid (an index out of range): both backends must fail,
  /// each with a message that names the op. Their texts may differ: a
  /// device kernel reports a reason code, not the CPU's sentence.
  bool expectError = false;
};

/// What one backend made of a case.
struct DiffRun {
  Status status = Status::success();
  /// Every operand and result as read back after the run (empty when the
  /// run failed).
  std::vector<HostTensor> operands, results;
};

/// Runs `diffCase` on `backend` through the Backend interface.
DiffRun runCase(Backend &backend, const DiffCase &diffCase);

/// Compares `tested` with `reference` (`what` names the tensor in the
/// message): "" when they agree, else a message with the shapes, the first
/// mismatching element's index and both values, and how many differ.
std::string compareTensors(const std::string &what, const HostTensor &reference,
                           const HostTensor &tested, Tolerance tolerance);

/// Compares the two runs of `diffCase` (statuses, every result, every
/// operand): "" when they agree, else one line per disagreement, each
/// naming the case's op.
std::string compareRuns(const DiffCase &diffCase, const DiffRun &reference,
                        const DiffRun &tested);

/// Builds a DiffCase. Random operands come from a generator seeded by the
/// case name.
class CaseBuilder {
public:
  /// The case "<op>/<variant>" of the op called `op` (as Opcodes.h names
  /// it).
  CaseBuilder(std::string_view op, std::string_view variant);

  // Attributes, written as the plan emitter writes them.
  CaseBuilder &ints(const std::string &name, std::vector<int64_t> values);
  CaseBuilder &real(const std::string &name, double value);
  CaseBuilder &text(const std::string &name, const std::string &value);

  /// An operand uniform in [low, high): real numbers for float types,
  /// integers in [low, high] for integer types, 0 or 1 for bool.
  CaseBuilder &uniform(std::vector<int64_t> shape,
                       ElementType dtype = ElementType::F32, double low = -1,
                       double high = 1);
  /// An operand holding `values`, repeated to fill `shape`.
  CaseBuilder &values(std::vector<int64_t> shape, ElementType dtype,
                      const std::vector<double> &values);
  CaseBuilder &operand(HostTensor tensor);
  /// The last operand added, to adjust some of its elements.
  HostTensor &lastOperand();
  /// Operand `index`, to adjust some of its elements.
  HostTensor &operandAt(size_t index);

  CaseBuilder &result(std::vector<int64_t> shape,
                      ElementType dtype = ElementType::F32);
  /// A result that is operand `operand`'s storage, of its shape and type.
  CaseBuilder &resultAliasing(int operand);
  /// A result that is operand `operand`'s storage seen with `shape` (a
  /// reshape in place).
  CaseBuilder &resultAliasing(int operand, std::vector<int64_t> shape);

  CaseBuilder &tolerance(double rtol, double atol);
  CaseBuilder &misaligned();
  CaseBuilder &expectError();

  std::mt19937 &random() { return generator; }
  DiffCase build() const { return diffCase; }

private:
  DiffCase diffCase;
  std::mt19937 generator;
};

} // namespace zplan::testing

#endif // ZPLAN_TEST_GPU_KERNELDIFF_H

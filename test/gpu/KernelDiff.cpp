//===- KernelDiff.cpp - one instruction on two backends, compared ---------===//
//
// See KernelDiff.h. The backends are reached through runtime/Backend.h
// alone, so nothing here knows which two it compares.
//
//===----------------------------------------------------------------------===//

#include "test/gpu/KernelDiff.h"

#include "runtime/plan/Opcodes.h"
#include "runtime/support/Bfloat16.h"
#include "runtime/support/ShapeText.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>

namespace zplan::testing {

namespace {

/// A case built wrong (a type the harness cannot hold) is a bug in the
/// test, not a finding about a backend: stop loudly.
[[noreturn]] void harnessBug(const char *what, ElementType type) {
  std::fprintf(stderr, "KernelDiff: %s: element type %s is not supported\n",
               what, elementTypeInfo(type).name.data());
  std::abort();
}

bool isFloat(ElementType type) {
  return type == ElementType::F32 || type == ElementType::F64;
}

/// The multi-index of flat element `flat` of a row-major tensor of `shape`.
std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t> &shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  return index;
}

/// Element `i` as the message prints it: every digit of a float, an
/// integer as an integer.
std::string formatElement(const HostTensor &tensor, int64_t i) {
  if (!isFloat(tensor.dtype))
    return std::to_string(tensor.getInt(i));
  char text[40];
  std::snprintf(text, sizeof(text),
                tensor.dtype == ElementType::F32 ? "%.9g" : "%.17g",
                tensor.get(i));
  return text;
}

/// Whether `tested` matches `reference` within `tolerance`: NaN matches
/// NaN, an infinity only itself.
bool floatsAgree(double reference, double tested, Tolerance tolerance) {
  if (std::isnan(reference) || std::isnan(tested))
    return std::isnan(reference) && std::isnan(tested);
  if (std::isinf(reference) || std::isinf(tested))
    return reference == tested;
  return std::abs(tested - reference) <=
         tolerance.atol + tolerance.rtol * std::abs(reference);
}

/// The poison a result starts as: quiet NaNs of its float type, 0xA5 bytes
/// for the types without NaN.
std::vector<uint8_t> poisonBytes(ElementType type, int64_t count) {
  const ElementTypeInfo &info = elementTypeInfo(type);
  std::vector<uint8_t> bytes(static_cast<size_t>(count) * info.bytes, 0xA5);
  if (info.quietNaN != 0)
    for (int64_t i = 0; i < count; ++i)
      std::memcpy(bytes.data() + i * info.bytes, &info.quietNaN, info.bytes);
  return bytes;
}

uint32_t nameSeed(std::string_view name) {
  uint32_t hash = 2166136261u; // FNV-1a: the same seed on every platform
  for (char c : name)
    hash = (hash ^ static_cast<uint8_t>(c)) * 16777619u;
  return hash;
}

} // namespace

//===----------------------------------------------------------------------===//
// HostTensor
//===----------------------------------------------------------------------===//

HostTensor::HostTensor(std::vector<int64_t> shape, ElementType dtype)
    : shape(std::move(shape)), dtype(dtype) {
  bytes.assign(
      static_cast<size_t>(numElements()) * elementTypeInfo(dtype).bytes, 0);
}

int64_t HostTensor::numElements() const {
  int64_t count = 1;
  for (int64_t extent : shape)
    count *= extent;
  return count;
}

namespace {

template <typename T> T load(const std::vector<uint8_t> &bytes, int64_t i) {
  T value;
  std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
void store(std::vector<uint8_t> &bytes, int64_t i, T value) {
  std::memcpy(bytes.data() + i * sizeof(T), &value, sizeof(T));
}

/// An element index outside the tensor is a bug in a case, not a finding.
void checkIndex(const HostTensor &tensor, int64_t i) {
  if (i < 0 || i >= tensor.numElements()) {
    std::fprintf(stderr,
                 "KernelDiff: element %lld of a tensor of %lld elements\n",
                 static_cast<long long>(i),
                 static_cast<long long>(tensor.numElements()));
    std::abort();
  }
}

} // namespace

double HostTensor::get(int64_t i) const {
  checkIndex(*this, i);
  switch (dtype) {
  case ElementType::F32:
    return load<float>(bytes, i);
  case ElementType::F64:
    return load<double>(bytes, i);
  case ElementType::BF16:
    return bf16ToFloat(load<uint16_t>(bytes, i));
  default:
    return static_cast<double>(getInt(i));
  }
}

int64_t HostTensor::getInt(int64_t i) const {
  checkIndex(*this, i);
  switch (dtype) {
  case ElementType::F32:
    return static_cast<int64_t>(load<float>(bytes, i));
  case ElementType::F64:
    return static_cast<int64_t>(load<double>(bytes, i));
  case ElementType::BF16:
    return static_cast<int64_t>(bf16ToFloat(load<uint16_t>(bytes, i)));
  case ElementType::I64:
    return load<int64_t>(bytes, i);
  case ElementType::I32:
    return load<int32_t>(bytes, i);
  case ElementType::I8:
    return load<int8_t>(bytes, i);
  case ElementType::U8:
  case ElementType::Bool:
    return load<uint8_t>(bytes, i);
  default:
    harnessBug("reading an element", dtype);
  }
}

void HostTensor::set(int64_t i, double value) {
  checkIndex(*this, i);
  switch (dtype) {
  case ElementType::F32:
    return store(bytes, i, static_cast<float>(value));
  case ElementType::F64:
    return store(bytes, i, value);
  case ElementType::BF16:
    return store(bytes, i, floatToBf16(static_cast<float>(value)));
  case ElementType::Bool:
    return store<uint8_t>(bytes, i, value != 0 ? 1 : 0);
  default:
    return setInt(i, static_cast<int64_t>(value));
  }
}

void HostTensor::setInt(int64_t i, int64_t value) {
  checkIndex(*this, i);
  switch (dtype) {
  case ElementType::F32:
    return store(bytes, i, static_cast<float>(value));
  case ElementType::F64:
    return store(bytes, i, static_cast<double>(value));
  case ElementType::BF16:
    return store(bytes, i, floatToBf16(static_cast<float>(value)));
  case ElementType::I64:
    return store(bytes, i, value);
  case ElementType::I32:
    return store(bytes, i, static_cast<int32_t>(value));
  case ElementType::I8:
    return store(bytes, i, static_cast<int8_t>(value));
  case ElementType::U8:
    return store(bytes, i, static_cast<uint8_t>(value));
  case ElementType::Bool:
    return store<uint8_t>(bytes, i, value != 0 ? 1 : 0);
  default:
    harnessBug("writing an element", dtype);
  }
}

//===----------------------------------------------------------------------===//
// Running and comparing
//===----------------------------------------------------------------------===//

namespace {

/// The backend memory of one run, and where each tensor was placed in it.
class RunMemory {
public:
  RunMemory(Backend &backend, bool misaligned)
      : backend(backend), misaligned(misaligned) {}

  /// Memory for `bytes` of `type`, one element past an aligned address
  /// when the case asks for misaligned tensors.
  Status place(ElementType type, uint64_t bytes, void *&address) {
    uint64_t offset = misaligned ? elementTypeInfo(type).bytes : 0;
    std::unique_ptr<BackendMemory> memory;
    ZR_RETURN_IF_ERROR(
        backend.allocate(bytes + offset, "a kernel-diff tensor", memory));
    address = memory->data() + offset;
    buffers.push_back(std::move(memory));
    return Status::success();
  }

private:
  Backend &backend;
  bool misaligned;
  std::vector<std::unique_ptr<BackendMemory>> buffers;
};

/// Issues the prepared kernel and waits for it; the first error wins (a
/// device kernel's data error surfaces only at synchronize).
Status runAndSynchronize(Backend &backend, PreparedKernel &kernel) {
  std::unique_ptr<Queues> queues;
  ZR_RETURN_IF_ERROR(backend.createQueues(1, /*timing=*/false, queues));
  Status issued = kernel.run();
  if (issued.ok())
    issued = queues->recordCompletion(plan::COMPUTE, 0);
  // Drain the queues even after a failed issue: the next case starts clean.
  Status drained = queues->synchronize();
  return issued.ok() ? drained : issued;
}

Status readBack(Backend &backend, const TensorRef &ref, HostTensor &out) {
  out = HostTensor(ref.shape, ref.dtype);
  return backend.copyToHost(out.bytes.data(), ref.data, out.bytes.size());
}

Status runInto(Backend &backend, const DiffCase &diffCase, DiffRun &run) {
  RunMemory memory(backend, diffCase.misaligned);
  std::vector<TensorRef> operands, results;
  for (const HostTensor &operand : diffCase.operands) {
    TensorRef ref{nullptr, operand.shape, operand.dtype};
    ZR_RETURN_IF_ERROR(
        memory.place(operand.dtype, operand.bytes.size(), ref.data));
    ZR_RETURN_IF_ERROR(backend.copyFromHost(ref.data, operand.bytes.data(),
                                            operand.bytes.size()));
    operands.push_back(std::move(ref));
  }
  for (const ResultSpec &spec : diffCase.results) {
    if (spec.aliasOf >= 0) {
      results.push_back(
          TensorRef{operands.at(spec.aliasOf).data, spec.shape, spec.dtype});
      continue;
    }
    TensorRef ref{nullptr, spec.shape, spec.dtype};
    std::vector<uint8_t> poison = poisonBytes(spec.dtype, ref.numElements());
    ZR_RETURN_IF_ERROR(memory.place(spec.dtype, poison.size(), ref.data));
    ZR_RETURN_IF_ERROR(
        backend.copyFromHost(ref.data, poison.data(), poison.size()));
    results.push_back(std::move(ref));
  }

  std::unique_ptr<PreparedKernel> kernel;
  ZR_RETURN_IF_ERROR(
      backend.prepareKernel(diffCase.instruction, operands, results, kernel));
  ZR_RETURN_IF_ERROR(runAndSynchronize(backend, *kernel));

  run.operands.resize(operands.size());
  for (size_t i = 0; i < operands.size(); ++i)
    ZR_RETURN_IF_ERROR(readBack(backend, operands[i], run.operands[i]));
  run.results.resize(results.size());
  for (size_t i = 0; i < results.size(); ++i)
    ZR_RETURN_IF_ERROR(readBack(backend, results[i], run.results[i]));
  return Status::success();
}

} // namespace

DiffRun runCase(Backend &backend, const DiffCase &diffCase) {
  DiffRun run;
  run.status = runInto(backend, diffCase, run);
  if (!run.status.ok()) {
    run.operands.clear();
    run.results.clear();
  }
  return run;
}

std::string compareTensors(const std::string &what, const HostTensor &reference,
                           const HostTensor &tested, Tolerance tolerance) {
  std::ostringstream message;
  const char *typeName = elementTypeInfo(reference.dtype).name.data();
  if (reference.shape != tested.shape || reference.dtype != tested.dtype) {
    message << what << ": reference is " << typeName << " "
            << shapeText(reference.shape) << ", tested is "
            << elementTypeInfo(tested.dtype).name.data() << " "
            << shapeText(tested.shape);
    return message.str();
  }
  bool floats = isFloat(reference.dtype);
  int64_t count = reference.numElements(), mismatches = 0, first = -1;
  for (int64_t i = 0; i < count; ++i) {
    bool agree = floats
                     ? floatsAgree(reference.get(i), tested.get(i), tolerance)
                     : reference.getInt(i) == tested.getInt(i);
    if (agree)
      continue;
    if (mismatches++ == 0)
      first = i;
  }
  if (mismatches == 0)
    return "";
  message << what << " (" << typeName << " " << shapeText(reference.shape)
          << "): element " << first << " "
          << shapeText(unravel(first, reference.shape)) << ": reference "
          << formatElement(reference, first) << ", tested "
          << formatElement(tested, first);
  if (floats)
    message << " (rtol " << tolerance.rtol << ", atol " << tolerance.atol
            << ")";
  else
    message << " (exact)";
  message << "; " << mismatches << " of " << count << " elements differ";
  return message.str();
}

std::string compareRuns(const DiffCase &diffCase, const DiffRun &reference,
                        const DiffRun &tested) {
  std::string op = plan::opcodeName(diffCase.instruction.opcode());
  std::string prefix = op + ": ";
  std::ostringstream message;
  auto report = [&](const std::string &line) {
    message << "op " << op << " (case " << diffCase.name << "): " << line
            << "\n";
  };
  if (diffCase.expectError) {
    for (const auto &[who, run] :
         {std::pair{"reference", &reference}, std::pair{"tested", &tested}}) {
      if (run->status.ok())
        report(std::string(who) + " backend succeeded; the data is invalid, "
                                  "so it should fail");
      else if (run->status.message().rfind(prefix, 0) != 0)
        report(std::string(who) + " backend's error does not name the op: " +
               run->status.message());
    }
    return message.str();
  }
  if (!reference.status.ok())
    report("reference backend failed: " + reference.status.message());
  if (!tested.status.ok())
    report("tested backend failed: " + tested.status.message());
  if (!reference.status.ok() || !tested.status.ok())
    return message.str();

  for (size_t i = 0; i < diffCase.results.size(); ++i)
    if (std::string line =
            compareTensors("result " + std::to_string(i), reference.results[i],
                           tested.results[i], diffCase.tolerance);
        !line.empty())
      report(line);
  // In-place updates, and a kernel that scribbles on its inputs.
  for (size_t i = 0; i < diffCase.operands.size(); ++i)
    if (std::string line = compareTensors(
            "operand " + std::to_string(i) + " after the run",
            reference.operands[i], tested.operands[i], diffCase.tolerance);
        !line.empty())
      report(line);
  return message.str();
}

//===----------------------------------------------------------------------===//
// CaseBuilder
//===----------------------------------------------------------------------===//

CaseBuilder::CaseBuilder(std::string_view op, std::string_view variant) {
  diffCase.name = std::string(op) + "/" + std::string(variant);
  generator.seed(nameSeed(diffCase.name));
  std::optional<plan::Opcode> opcode = plan::opcodeFromName(op);
  if (!opcode) {
    std::fprintf(stderr, "KernelDiff: no opcode is called '%s'\n",
                 std::string(op).c_str());
    std::abort();
  }
  diffCase.instruction.set_opcode(*opcode);
}

CaseBuilder &CaseBuilder::ints(const std::string &name,
                               std::vector<int64_t> values) {
  plan::Attribute *attribute = diffCase.instruction.add_attributes();
  attribute->set_name(name);
  for (int64_t value : values)
    attribute->add_ints(value);
  return *this;
}

CaseBuilder &CaseBuilder::real(const std::string &name, double value) {
  plan::Attribute *attribute = diffCase.instruction.add_attributes();
  attribute->set_name(name);
  attribute->add_floats(value);
  return *this;
}

CaseBuilder &CaseBuilder::text(const std::string &name,
                               const std::string &value) {
  plan::Attribute *attribute = diffCase.instruction.add_attributes();
  attribute->set_name(name);
  attribute->set_text(value);
  return *this;
}

CaseBuilder &CaseBuilder::uniform(std::vector<int64_t> shape, ElementType dtype,
                                  double low, double high) {
  HostTensor tensor(std::move(shape), dtype);
  int64_t count = tensor.numElements();
  if (isFloat(dtype)) {
    std::uniform_real_distribution<double> dist(low, high);
    for (int64_t i = 0; i < count; ++i)
      tensor.set(i, dist(generator));
  } else if (dtype == ElementType::Bool) {
    std::bernoulli_distribution dist(0.5);
    for (int64_t i = 0; i < count; ++i)
      tensor.setInt(i, dist(generator) ? 1 : 0);
  } else {
    std::uniform_int_distribution<int64_t> dist(std::llround(low),
                                                std::llround(high));
    for (int64_t i = 0; i < count; ++i)
      tensor.setInt(i, dist(generator));
  }
  return operand(std::move(tensor));
}

CaseBuilder &CaseBuilder::values(std::vector<int64_t> shape, ElementType dtype,
                                 const std::vector<double> &values) {
  HostTensor tensor(std::move(shape), dtype);
  for (int64_t i = 0, n = tensor.numElements(); i < n && !values.empty(); ++i)
    tensor.set(i, values[i % values.size()]);
  return operand(std::move(tensor));
}

CaseBuilder &CaseBuilder::operand(HostTensor tensor) {
  diffCase.operands.push_back(std::move(tensor));
  return *this;
}

HostTensor &CaseBuilder::lastOperand() { return diffCase.operands.back(); }

HostTensor &CaseBuilder::operandAt(size_t index) {
  return diffCase.operands.at(index);
}

CaseBuilder &CaseBuilder::result(std::vector<int64_t> shape,
                                 ElementType dtype) {
  diffCase.results.push_back(ResultSpec{std::move(shape), dtype, -1});
  return *this;
}

CaseBuilder &CaseBuilder::resultAliasing(int operand) {
  return resultAliasing(operand, diffCase.operands.at(operand).shape);
}

CaseBuilder &CaseBuilder::resultAliasing(int operand,
                                         std::vector<int64_t> shape) {
  ElementType dtype = diffCase.operands.at(operand).dtype;
  diffCase.results.push_back(ResultSpec{std::move(shape), dtype, operand});
  return *this;
}

CaseBuilder &CaseBuilder::tolerance(double rtol, double atol) {
  diffCase.tolerance = Tolerance{rtol, atol};
  return *this;
}

CaseBuilder &CaseBuilder::misaligned() {
  diffCase.misaligned = true;
  return *this;
}

CaseBuilder &CaseBuilder::expectError() {
  diffCase.expectError = true;
  return *this;
}

} // namespace zplan::testing

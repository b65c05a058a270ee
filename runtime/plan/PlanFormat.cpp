//===- PlanFormat.cpp - the bytes of a plan file
//---------------------------===//
//
// The trailer is appended by hand, not left to the serializer's field
// order: protobuf does not promise one, and the reader needs the checksum
// at a known place to check the bytes before it parses them.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/PlanFormat.h"

#include "runtime/support/Checksum.h"
#include "runtime/support/ElementType.h"

#include <climits>
#include <google/protobuf/stubs/logging.h>

using namespace zplan;
using namespace zplan::plan;

// ElementType.h numbers plan types without seeing plan.proto: check here.
static_assert(elementTypeInfo(ElementType::F32).plan == F32 &&
                  elementTypeInfo(ElementType::F16).plan == F16 &&
                  elementTypeInfo(ElementType::BF16).plan == BF16 &&
                  elementTypeInfo(ElementType::F64).plan == F64 &&
                  elementTypeInfo(ElementType::I64).plan == I64 &&
                  elementTypeInfo(ElementType::I32).plan == I32 &&
                  elementTypeInfo(ElementType::I8).plan == I8 &&
                  elementTypeInfo(ElementType::U8).plan == U8 &&
                  elementTypeInfo(ElementType::Bool).plan == BOOL,
              "ElementType.h's plan numbers must match plan.proto");
static_assert(sizeof(kElementTypes) / sizeof(kElementTypes[0]) == DataType_MAX,
              "one element-type row per DataType value but UNSPECIFIED");

namespace {

/// body_checksum's tag: field 2047, wire type 1 (fixed64), as a varint.
constexpr uint8_t kTrailerTag[2] = {((2047 << 3 | 1) & 0x7F) | 0x80,
                                    (2047 << 3 | 1) >> 7};
static_assert(Plan::kBodyChecksumFieldNumber == 2047,
              "kTrailerTag encodes body_checksum's field number");

bool hasTrailer(std::string_view bytes) {
  return bytes.size() >= kPlanTrailerBytes &&
         static_cast<uint8_t>(bytes[bytes.size() - 10]) == kTrailerTag[0] &&
         static_cast<uint8_t>(bytes[bytes.size() - 9]) == kTrailerTag[1];
}

uint64_t storedChecksum(std::string_view bytes) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i)
    value |=
        static_cast<uint64_t>(static_cast<uint8_t>(bytes[bytes.size() - 8 + i]))
        << (8 * i);
  return value;
}

/// The first constant whose data does not match its checksum, or -1.
int firstCorruptConstant(const Plan &plan) {
  for (int index = 0; index < plan.constants_size(); ++index) {
    const std::string &data = plan.constants(index).data();
    if (checksum(data.data(), data.size()) != plan.constants(index).checksum())
      return index;
  }
  return -1;
}

Status corruptConstant(const std::string &subject, const Plan &plan,
                       int index) {
  const std::string &data = plan.constants(index).data();
  return failure(subject, ": constant ", index, " fails its checksum (stored ",
                 checksumText(plan.constants(index).checksum()), ", computed ",
                 checksumText(checksum(data.data(), data.size())),
                 "): the file is corrupt");
}

} // namespace

Status zplan::plan::versionMismatch(std::string_view prefix, uint32_t version) {
  return failure(prefix, "plan version ", version, ", this zrun reads version ",
                 kPlanVersion, "; recompile the model with the matching zcc");
}

uint64_t zplan::plan::dataTypeSize(DataType type) {
  if (std::optional<ElementType> element = elementTypeFromPlan(type))
    return elementTypeInfo(*element).bytes;
  return 0;
}

std::string zplan::plan::planTypeName(DataType type) {
  const std::string &name = DataType_Name(type);
  return name.empty() ? "dtype " + std::to_string(static_cast<int>(type))
                      : name;
}

void zplan::plan::stampConstantChecksums(Plan &plan) {
  for (Constant &constant : *plan.mutable_constants())
    constant.set_checksum(
        checksum(constant.data().data(), constant.data().size()));
}

std::string zplan::plan::serializePlan(const Plan &plan, uint64_t *identity) {
  std::string bytes = plan.SerializeAsString();
  // A plan read from a file carries its old body_checksum; the serializer
  // writes it (at some place): write the body without it.
  if (plan.body_checksum() != 0) {
    Plan body = plan;
    body.clear_body_checksum();
    bytes = body.SerializeAsString();
  }
  uint64_t sum = checksum(bytes.data(), bytes.size());
  bytes.push_back(static_cast<char>(kTrailerTag[0]));
  bytes.push_back(static_cast<char>(kTrailerTag[1]));
  for (int i = 0; i < 8; ++i)
    bytes.push_back(static_cast<char>((sum >> (8 * i)) & 0xFF));
  if (identity)
    *identity = sum;
  return bytes;
}

Status zplan::plan::parsePlan(std::string_view bytes,
                              std::string_view sourceName, Plan &plan) {
  std::string subject = "plan file " + inQuotes(sourceName);
  // An empty message parses successfully into an empty plan.
  if (bytes.empty())
    return failure(subject, " is empty");
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return failure(subject, " is ", bytes.size(),
                   " bytes, more than a protobuf message can hold (2 GiB)");
  auto parse = [&](Plan &parsed) {
    // protobuf logs what it dislikes (invalid UTF-8 in a name) to stderr;
    // zrun's message is the one line the user reads.
    google::protobuf::LogSilencer quiet;
    return parsed.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  };
  // Parse into a fresh message so that a failure leaves `plan` as it was.
  Plan parsed;
  if (!hasTrailer(bytes)) {
    // Another version's plan may end otherwise: say which version it is.
    if (!parse(parsed))
      return failure(subject,
                     " is truncated or corrupt: it does not parse as a plan");
    if (parsed.version() != 0 && parsed.version() != kPlanVersion)
      return versionMismatch(subject + ": ", parsed.version());
    return failure(subject, " is truncated or corrupt: it does not end in ",
                   "its checksum");
  }
  std::string_view body = bytes.substr(0, bytes.size() - kPlanTrailerBytes);
  uint64_t stored = storedChecksum(bytes);
  uint64_t computed = checksum(body.data(), body.size());
  if (stored != computed) {
    // Name the constant when the damage is inside one.
    if (parse(parsed) && parsed.version() == kPlanVersion)
      if (int index = firstCorruptConstant(parsed); index >= 0)
        return corruptConstant(subject, parsed, index);
    return failure(subject, " fails its checksum (stored ",
                   checksumText(stored), ", computed ", checksumText(computed),
                   "): the file is corrupt or was changed after zcc wrote it");
  }
  if (!parse(parsed))
    return failure(subject,
                   " is truncated or corrupt: it does not parse as a plan");
  // What zcc always writes (a version first, at least one program) tells
  // apart a message that merely parses.
  if (parsed.version() == 0)
    return failure(subject, " is truncated or corrupt: it has no version");
  if (parsed.version() != kPlanVersion)
    return versionMismatch(subject + ": ", parsed.version());
  if (parsed.programs_size() == 0)
    return failure(subject, " is truncated or corrupt: it has no programs");
  if (int index = firstCorruptConstant(parsed); index >= 0)
    return corruptConstant(subject, parsed, index);
  plan.Swap(&parsed);
  return Status::success();
}

//===- CheckedSizes.h - arithmetic on a plan's untrusted sizes
//-------------===//
//
// Every number in a plan comes from a file. A corrupt plan must fail a check,
// not wrap around and pass it: the validator and the weights reader compute
// sizes and ends only through these helpers, each of which reports overflow
// (and a negative dimension) by returning false. Private to runtime/plan.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_PLAN_CHECKEDSIZES_H
#define ZPLAN_RUNTIME_PLAN_CHECKEDSIZES_H

#include "runtime/plan/PlanFormat.h"

#include <cstdint>

namespace zplan::plan {

inline bool checkedAdd(uint64_t a, uint64_t b, uint64_t &sum) {
  return !__builtin_add_overflow(a, b, &sum);
}

inline bool checkedMultiply(uint64_t a, uint64_t b, uint64_t &product) {
  return !__builtin_mul_overflow(a, b, &product);
}

/// Elements of `shape`; false for a negative dimension or overflow.
inline bool
checkedElementCount(const google::protobuf::RepeatedField<int64_t> &shape,
                    uint64_t &count) {
  count = 1;
  for (int64_t dimension : shape)
    if (dimension < 0 ||
        !checkedMultiply(count, static_cast<uint64_t>(dimension), count))
      return false;
  return true;
}

/// Bytes of a whole group (all shards); false on overflow.
inline bool checkedGroupBytes(const Group &group, uint64_t &bytes) {
  return checkedMultiply(group.padded_elements(), dataTypeSize(group.dtype()),
                         bytes);
}

/// Bytes of a whole group (its gathered copy), for a plan that
/// validatePlan() accepted (checkedGroupBytes did not overflow).
inline uint64_t groupBytes(const Group &group) {
  return group.padded_elements() * dataTypeSize(group.dtype());
}

/// The element type of `group`'s gathered copies (Group.gather_dtype:
/// bf16 under mixed precision), and of its gradients in a reduction
/// (Group.reduce_dtype); its dtype where unspecified.
inline DataType gatherType(const Group &group) {
  return group.gather_dtype() == DATA_TYPE_UNSPECIFIED ? group.dtype()
                                                       : group.gather_dtype();
}
inline DataType reduceType(const Group &group) {
  return group.reduce_dtype() == DATA_TYPE_UNSPECIFIED ? group.dtype()
                                                       : group.reduce_dtype();
}

/// Bytes of a gathered copy of `group` (half of groupBytes() for a bf16
/// gather of an f32 group), for a plan that validatePlan() accepted.
inline uint64_t gatheredBytes(const Group &group) {
  return group.padded_elements() * dataTypeSize(gatherType(group));
}

/// Bytes of `group`'s gradients as a reduction sends them (its whole padded
/// size in its reduce type: half of groupBytes() for a bf16 reduction of an
/// f32 group), for a plan that validatePlan() accepted.
inline uint64_t reducedBytes(const Group &group) {
  return group.padded_elements() * dataTypeSize(reduceType(group));
}

/// Bytes of one rank's shard of `group` (no larger than the whole group).
inline uint64_t shardBytes(const Group &group, uint32_t worldSize) {
  return worldSize == 0 ? 0
                        : group.padded_elements() / worldSize *
                              dataTypeSize(group.dtype());
}

/// Bytes of every persistent group, whole; false on overflow.
inline bool checkedPersistentBytes(const Plan &plan, uint64_t &total) {
  total = 0;
  for (const Group &group : plan.groups()) {
    if (!group.persistent())
      continue;
    uint64_t bytes;
    if (!checkedGroupBytes(group, bytes) || !checkedAdd(total, bytes, total))
      return false;
  }
  return true;
}

} // namespace zplan::plan

#endif // ZPLAN_RUNTIME_PLAN_CHECKEDSIZES_H

//===- ScheduleChoices.h - the enumerated choices of a schedule -*- C++ -*-===//
//
// How gathers are placed (--policy) and which hardware profile the cost
// model reads (--hardware) are decided once, by zcc's flags, and read by the
// driver, the plan search, the dumps and the schedule passes. They travel as
// these enums all the way down: the passes take them as enum options
// (Passes.td), so that no layer compares their spellings. The spellings here
// are the flags' and the report's; Passes.td's option values repeat them for
// zcc-opt, and test/unit/PassOptionsTest.cpp checks that the two agree.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_SCHEDULECHOICES_H
#define ZPLAN_COMPILER_SCHEDULECHOICES_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/ErrorHandling.h"

namespace zplan {

/// --policy: how gathers are placed.
enum class SchedulePolicy {
  /// The scheduler's: prefetch as early as the cost model needs, within the
  /// budget and the in-flight limits.
  Default,
  /// Hook-based ZeRO-3: gather just before use, release right after, one
  /// group prefetched. The report's baseline.
  Jit,
};

/// --hardware: the embedded profiles (compiler/analysis/hardware/*.json).
/// The spelling is the profile's name and its JSON file's.
enum class Hardware { H200, H100, A100, Cpu };

/// One --policy value: its spelling and what the help text says of it.
struct SchedulePolicySpelling {
  SchedulePolicy policy;
  llvm::StringLiteral name;
  llvm::StringLiteral description;
};

/// One --hardware value: its spelling and what the help text says of it.
struct HardwareSpelling {
  Hardware hardware;
  llvm::StringLiteral name;
  llvm::StringLiteral description;
};

inline constexpr SchedulePolicySpelling kSchedulePolicySpellings[] = {
    {SchedulePolicy::Default, "default",
     "the scheduler's placement: prefetch under the budget"},
    {SchedulePolicy::Jit, "jit",
     "hook-based ZeRO-3: gather just before use (the baseline)"},
};

/// In the order --hardware documents them.
inline constexpr HardwareSpelling kHardwareSpellings[] = {
    {Hardware::H200, "h200", "NVIDIA H200 SXM"},
    {Hardware::H100, "h100", "NVIDIA H100 SXM"},
    {Hardware::A100, "a100", "NVIDIA A100 SXM 80GB"},
    {Hardware::Cpu, "cpu", "a CPU host (the runtime's reference backend)"},
};

/// Every SchedulePolicy with its spelling: the one table zcc's option and
/// the report use.
inline llvm::ArrayRef<SchedulePolicySpelling> getSchedulePolicySpellings() {
  return kSchedulePolicySpellings;
}

/// Every Hardware value with its spelling: the one table zcc's option, the
/// plan and the profiles use.
inline llvm::ArrayRef<HardwareSpelling> getHardwareSpellings() {
  return kHardwareSpellings;
}

/// The spelling of `policy` ("default" or "jit").
inline llvm::StringRef spell(SchedulePolicy policy) {
  for (const SchedulePolicySpelling &spelling : kSchedulePolicySpellings)
    if (spelling.policy == policy)
      return spelling.name;
  llvm_unreachable("every SchedulePolicy has a spelling");
}

/// The spelling of `hardware` ("h200", ...).
inline llvm::StringRef spell(Hardware hardware) {
  for (const HardwareSpelling &spelling : kHardwareSpellings)
    if (spelling.hardware == hardware)
      return spelling.name;
  llvm_unreachable("every Hardware value has a spelling");
}

} // namespace zplan

#endif // ZPLAN_COMPILER_SCHEDULECHOICES_H

//===- Dumps.h - the schedule, memory and report text dumps ---------------===//
//
// The text forms docs/design.md (section 5) makes a primary interface. They are
// written from the emitted plan (not from the IR), so they show exactly what
// zrun will run. The formats are stable: lit tests check them with FileCheck.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_PLAN_DUMPS_H
#define ZPLAN_COMPILER_PLAN_DUMPS_H

#include "compiler/ScheduleChoices.h"
#include "compiler/analysis/GenerationCost.h"
#include "compiler/plan/PlanEmitter.h"

#include "llvm/ADT/ArrayRef.h"

#include <string>
#include <utility>

namespace zplan {

/// One line per instruction: index, queue, op, operands (group and
/// parameter names for collectives), bytes moved or written, live arena
/// bytes after it.
std::string formatScheduleDump(const EmittedPlan &emitted);

/// Live arena bytes over the instruction index, the peak, the lower bound
/// (largest sum of simultaneously live buffers) and arena / lower bound.
std::string formatMemoryDump(const EmittedPlan &emitted);

/// Per program and policy: bytes gathered, collectives, peak per rank,
/// simulated time and exposed communication; then the group decisions of
/// the first policy (what stays whole, what is gathered more than once,
/// which blocks are recomputed).
std::string formatReport(
    llvm::ArrayRef<std::pair<SchedulePolicy, const EmittedPlan *>> policies);

/// The generation section of the report, per policy (the first is the
/// chosen one): bytes gathered per decoded token, resident and KV cache
/// bytes, simulated decode time per token and tokens/s, prefill time, and
/// how the residency choice fits the budget.
std::string formatGenerationReport(
    llvm::ArrayRef<std::pair<SchedulePolicy, const GenerationCost *>> policies);

/// "1.50 MiB"-style rendering used by every dump.
std::string formatSize(uint64_t bytes);

/// "410.800 ms"-style rendering (s, ms or us) used by every dump.
std::string formatSeconds(double seconds);

} // namespace zplan

#endif // ZPLAN_COMPILER_PLAN_DUMPS_H

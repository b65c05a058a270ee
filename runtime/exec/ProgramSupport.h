//===- ProgramSupport.h - can an executor run this program? --------------===//
//
// What validatePlan() cannot know -- which kernels a backend has, how this
// executor moves gradients -- checked once before any work, so that a plan
// this zrun cannot run is one message naming its first instruction, not a
// failure on N ranks in the middle of a run.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_EXEC_PROGRAMSUPPORT_H
#define ZPLAN_RUNTIME_EXEC_PROGRAMSUPPORT_H

#include "runtime/Backend.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/support/Status.h"

#include <string>

namespace zplan {

/// "instruction #12 'matmul' at '/h.0/attn/Gemm'": how every message of the
/// runtime names an instruction.
std::string describeInstruction(const plan::Instruction &instruction);

/// Checks, before any work, that an executor on `backend` can run every
/// instruction of `program` of validated `plan`: a kernel of the backend for
/// each compute opcode (Backend::hasKernel, the answer the executor's
/// kernel resolution gives), only all_gather, resident_gather and
/// carry_gather (and the gradient reductions) on the comm queue, and
/// gathers that move a SHARD buffer of their group into an ARENA buffer
/// large enough for the whole group (resident_gather: its RESIDENT copy,
/// carry_gather: its CARRY copy). Names the first instruction that fails.
Status checkProgramSupported(const plan::Plan &plan,
                             const plan::Program &program,
                             const Backend &backend);

} // namespace zplan

#endif // ZPLAN_RUNTIME_EXEC_PROGRAMSUPPORT_H

//===- ProgramContracts.h - what each kind of program binds ---------------===//
//
// A plan says what each program is (Program.kind) and what each of its
// bindings carries (Binding.role); this file holds the contract between the
// two: which roles a program of each kind takes and gives, with which
// element types and shapes, checked once when a plan is validated, so that
// the session (runtime/session) looks programs and bindings up by kind and
// role and never checks a name or a shape again:
//
//   kind              inputs                         outputs
//   infer             data...                        data..., logits?
//   train_micro_step  input_ids? [B,T] i64,          loss f32 (1)
//                     labels? (input_ids' shape),
//                     completion_mask?, old_logprobs?,
//                     ref_logprobs? f32 [B,T],
//                     advantages? f32 [B] or [B,T],
//                     data...
//   optimizer_step    hyper_parameters f32 [8]       -
//   generate_begin    -                              -
//   prefill           input_ids [B,P] i64,           logits [B,V] f32
//                     positions [B,P] i64,
//                     last_index [B] i64
//   decode            input_ids [B,1] i64,           logits [B,V] f32
//                     positions [B,1] i64
//   generate_end      -                              -
//   logprobs          input_ids [B,T] i64, data...   logprobs f32 [B,T],
//                                                    entropy? f32 [B,T]
//
// (? at most one; ... any number.) Beyond single programs: a plan has at
// most one program of each kind; the four generation kinds come together,
// with one B and V, and KV caches [B, H, L, D] of one L > P; a micro-step
// reduces the gradients of every group; a token-sum loss (plan
// LossNormalization) has a completion_mask to count.
//
// zcc checks its own plans against the same contract before it writes them
// (compiler/plan/PlanEmitter.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_PLAN_PROGRAMCONTRACTS_H
#define ZPLAN_RUNTIME_PLAN_PROGRAMCONTRACTS_H

#include "runtime/plan/plan.pb.h"
#include "runtime/support/Status.h"

#include <string>

namespace zplan::plan {

/// The name zcc gives a program of `kind` ("train_micro_step"), as messages
/// use it; "kind N" for a value this reader does not know.
std::string programKindName(ProgramKind kind);

/// The name of `role` as messages use it ("input_ids", "hyper_parameters").
std::string bindingRoleName(BindingRole role);

/// Checks every program's kind and bindings against the table above.
/// Assumes the plan's buffer ids are valid (validatePlan checks them first).
/// Names the program, the binding and what was expected.
Status checkProgramContracts(const Plan &plan);

} // namespace zplan::plan

#endif // ZPLAN_RUNTIME_PLAN_PROGRAMCONTRACTS_H

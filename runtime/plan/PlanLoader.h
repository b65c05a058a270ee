//===- PlanLoader.h - read, validate and locate the weights of a plan -----===//
//
// zrun's first step on every rank: read the plan file zcc wrote, refuse it
// with a one-line reason when it is not a plan this zrun can run (corrupt,
// another version, another world size, an id or offset out of range), and
// read this rank's section of the weights file beside it. Each concern has
// its own header; this one includes them all:
//
//   PlanFormat.h      the bytes of a plan file: version, element types,
//                     the checksum at its end, parsePlan / serializePlan
//   PlanLoading.h     reading the plan file (loadPlan)
//   PlanValidation.h  validatePlan: ids, offsets, sizes, opcodes, deadlock
//   Weights.h         the weights file: header, sections, checksums
//   Opcodes.h         the opcode table
//
// No exceptions and no LLVM: zrun builds with plain flags. Every function
// reports failure through Status.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_PLAN_PLANLOADER_H
#define ZPLAN_RUNTIME_PLAN_PLANLOADER_H

#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/PlanLoading.h"
#include "runtime/plan/PlanValidation.h"
#include "runtime/plan/Weights.h"

#endif // ZPLAN_RUNTIME_PLAN_PLANLOADER_H

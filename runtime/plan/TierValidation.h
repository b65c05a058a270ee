//===- TierValidation.h - offload: no read outside the device tier --------===//
//
// The static form of ZeRO-3 offload's "empty weight" (docs/offload.md): a
// buffer in the HOST or NVME tier has no device address, so an instruction
// that read it would read nothing. validatePlan() calls this for every
// program, after the per-instruction checks, and it proves:
//  - only tier_fetch, tier_store and an instruction that runs on the host
//    name a HOST or NVME buffer (or a view of one);
//  - a tier_fetch moves one tiered buffer into one ARENA staging buffer (not
//    a view) of at least its bytes; a tier_store moves one back, or (the
//    host-side optimizer step) moves a device STATE buffer (a gradient
//    accumulator) into a HOST_STAGING buffer; or (the host-side step over
//    moments in the nvme tier) moves an NVME buffer into a view of
//    HOST_STAGING of at least its bytes and back; two such copies in
//    flight at once never share bytes of one HOST_STAGING buffer;
//  - an instruction that runs on the host (Instruction.on_host) is an
//    optimizer update whose every operand and result lives in the HOST
//    tier, none of them still in a tier copy (before its tier_wait);
//  - a zero clears one STATE buffer of the device;
//  - each tier copy waits for the compute instruction before it (the
//    staging buffer's bytes may have been another buffer's until then, and
//    a store's were just written by the update), and has exactly one
//    tier_wait, whose only wait_for is that copy and whose operand is its
//    staging buffer;
//  - no other instruction names a staging buffer between its copy and that
//    copy's tier_wait: the copy may still be writing (fetch) or reading
//    (store) it. One exception: a collective after a tier_fetch on the
//    comm queue may read what it fetched (an offloaded shard's gather),
//    since that queue runs in order; the tier_wait then comes after a
//    compute instruction that waits for that collective, so that the
//    staging bytes are not reused while it still reads them. A
//    carry_gather is waited for by its run's end (docs/generation.md
//    section 6): the tier_wait of what it reads is the program's last
//    instruction.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_PLAN_TIERVALIDATION_H
#define ZPLAN_RUNTIME_PLAN_TIERVALIDATION_H

#include "runtime/plan/plan.pb.h"
#include "runtime/support/Status.h"

namespace zplan::plan {

/// Checks the tier copies of `program` (of a plan whose buffers,
/// instructions and views validatePlan() already checked). The message
/// names the program, the instruction and the buffer.
Status validateTierCopies(const Plan &plan, const Program &program);

} // namespace zplan::plan

#endif // ZPLAN_RUNTIME_PLAN_TIERVALIDATION_H

"""Writes a copy of an offload plan (zcc --offload-optimizer or
--offload-params) that breaks one rule of runtime/plan/TierValidation.h, for
the negative tests of test/train/offload.test, offload-params.test,
offload-host-step.test and test/generate/offload-carry.test.

    break_offload.py --proto-dir DIR MODE IN.zplan OUT.zplan

DIR holds the Python classes protoc generated for runtime/plan/plan.proto.
MODE:

  tier-read   the first adamw reads its first moment from the tier itself
              instead of the staging buffer (offload's "empty weight": a
              kernel reading memory that is not on the device);
  wait-late   the tier_wait of the first tier_fetch moves to right after
              the adamw that reads its staging buffer;
  store-early the first tier_store no longer waits for the adamw that
              wrote its staging buffer;
  gather-tier (--offload-params, N > 1) the first all_gather of
              train_micro_step reads the shard in its tier instead of the
              staging copy its tier_fetch filled;
  staging-early (--offload-params, N > 1) the tier_wait that ends that
              staging copy moves before the gather_wait of the all_gather
              that reads it;
  host-device (the host-side step, both offloaded to cpu) the first update
              on the host reads the gradient accumulator on the device
              instead of its host copy;
  host-early  that update moves before the tier_wait of the store that
              fills its gradient's host copy;
  zero-early  the zero of that group's accumulator moves before the same
              tier_wait, while the store may still read the accumulator;
  nvme-early  (the host-side step, moments in nvme) the first update on the
              host moves before the tier_wait of its first moment's fetch
              into host staging;
  slot-overlap (the same) the second group's first moment is fetched into
              the bytes of the first group's, while that fetch is in
              flight;
  carry-early (generation, --offload-params, a carried group) the tier_wait
              that ends decode's program, of the staging copy its
              carry_gather reads, moves one place up: the instruction
              after it could be given those bytes while the collective
              still reads them.

Indices and wait_for are renumbered, so only the rule broken fails. Prints
`broken: #INDEX 'OP'`, the instruction zrun must name.
"""
import argparse
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "zrun"))
import break_plan  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--proto-dir", required=True)
    parser.add_argument("mode", choices=["tier-read", "wait-late",
                                         "store-early", "gather-tier",
                                         "staging-early", "host-device",
                                         "host-early", "zero-early",
                                         "nvme-early", "slot-overlap",
                                         "carry-early"])
    parser.add_argument("input")
    parser.add_argument("output")
    args = parser.parse_args()
    pb = break_plan.load_plan_module(args.proto_dir)
    plan = pb.Plan()
    with open(args.input, "rb") as file:
        plan.ParseFromString(file.read())
    shards = args.mode in ("gather-tier", "staging-early")
    kind = (pb.PROGRAM_KIND_TRAIN_MICRO_STEP if shards
            else pb.PROGRAM_KIND_DECODE if args.mode == "carry-early"
            else pb.PROGRAM_KIND_OPTIMIZER_STEP)
    program = next(p for p in plan.programs if p.kind == kind)
    ops = program.instructions
    adamw = next((i for i in ops if i.opcode == pb.OPCODE_ADAMW), None)
    if args.mode == "carry-early":
        carry = next(i for i in ops if i.opcode == pb.OPCODE_CARRY_GATHER)
        fetch = next(i for i in ops if i.opcode == pb.OPCODE_TIER_FETCH
                     and i.results[0] == carry.operands[0])
        wait = next(i for i in ops if i.opcode == pb.OPCODE_TIER_WAIT
                    and list(i.wait_for) == [fetch.index])
        assert wait.index == len(ops) - 1, "the tier_wait does not end decode"
        broken = wait.index - 1
        break_plan.move_instruction(program, wait.index, broken)
    elif shards:
        gather = next(i for i in ops if i.opcode == pb.OPCODE_ALL_GATHER)
        fetch = next(i for i in ops if i.opcode == pb.OPCODE_TIER_FETCH
                     and i.results[0] == gather.operands[0])
        if args.mode == "gather-tier":
            gather.operands[0] = fetch.operands[0]
            broken = gather.index
        else:
            wait = next(i for i in ops if i.opcode == pb.OPCODE_TIER_WAIT
                        and list(i.wait_for) == [fetch.index])
            gather_wait = next(i for i in ops
                               if i.opcode == pb.OPCODE_GATHER_WAIT
                               and list(i.wait_for) == [gather.index])
            break_plan.move_instruction(program, wait.index,
                                        gather_wait.index)
            broken = gather_wait.index
    elif args.mode in ("nvme-early", "slot-overlap"):
        views = [i for i in ops if i.opcode == pb.OPCODE_TIER_FETCH
                 and plan.buffers[i.results[0] - 1].view_of != 0]
        if args.mode == "nvme-early":
            host = next(i for i in ops if i.on_host)
            wait = next(i for i in ops if i.opcode == pb.OPCODE_TIER_WAIT
                        and list(i.wait_for) == [views[0].index])
            broken = wait.index
            break_plan.move_instruction(program, host.index, wait.index)
        else:
            second = next(i for i in views if i.group != views[0].group)
            target = plan.buffers[second.results[0] - 1]
            first = plan.buffers[views[0].results[0] - 1]
            target.view_of = first.view_of
            target.view_offset = first.view_offset
            broken = second.index
    elif args.mode in ("host-device", "host-early", "zero-early"):
        host = next(i for i in ops if i.on_host)
        store = next(i for i in ops if i.opcode == pb.OPCODE_TIER_STORE
                     and i.results[0] == host.operands[1])
        wait = next(i for i in ops if i.opcode == pb.OPCODE_TIER_WAIT
                    and list(i.wait_for) == [store.index])
        zero = next(i for i in ops if i.opcode == pb.OPCODE_ZERO
                    and i.results[0] == store.operands[0])
        if args.mode == "host-device":
            host.operands[1] = store.operands[0]
            broken = host.index
        else:
            moved = host if args.mode == "host-early" else zero
            broken = wait.index
            break_plan.move_instruction(program, moved.index, wait.index)
    elif args.mode == "tier-read":
        staged = adamw.operands[2]
        fetch = next(i for i in ops if i.opcode == pb.OPCODE_TIER_FETCH
                     and i.results[0] == staged)
        adamw.operands[2] = fetch.operands[0]
        broken = adamw.index
    elif args.mode == "wait-late":
        fetch = next(i for i in ops if i.opcode == pb.OPCODE_TIER_FETCH)
        wait = next(i for i in ops if i.opcode == pb.OPCODE_TIER_WAIT
                    and list(i.wait_for) == [fetch.index])
        break_plan.move_instruction(program, wait.index, adamw.index)
        # After the move the adamw sits one place earlier.
        broken = adamw.index - 1
    else:
        store = next(i for i in ops if i.opcode == pb.OPCODE_TIER_STORE)
        del store.wait_for[:]
        broken = store.index
    instruction = program.instructions[broken]
    print(f"broken: #{broken} "
          f"'{break_plan.opcode_name(pb, instruction.opcode)}'")
    sealed = break_plan.seal_with_weights(plan, args)
    with open(args.output, "wb") as file:
        file.write(sealed)
    return 0


if __name__ == "__main__":
    sys.exit(main())

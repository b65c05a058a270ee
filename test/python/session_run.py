"""Trains and generates through zplan.Session, writing what zrun would write.

Run under mpirun like zrun, on a plan with training programs (generation
optional). Each rank feeds its own micro-batches, chosen as `zrun PLAN train`
chooses them (test/train/batches.py: the same rows for the same --seed, step,
micro-step and rank), so that the files below can be compared with zrun's:

  --loss-log FILE       step<TAB>loss<TAB>lr per optimizer step, in the format
                        of zrun train's --loss-log (printf "%llu\t%.9g\t%.9g")
  --tokens-before T.npy tokens generated before any training (the plan's
                        initial weights: what `zrun PLAN generate` gives)
  --tokens-after T.npy  tokens generated after the last step
  --save DIR            a checkpoint after the last step (for `zrun export`)
  --generate-after M    also generate after micro-step M (1-based; inside an
                        accumulation window when K does not divide M): the
                        loss log must not change
  --save-at S           also save after optimizer step S (under --save); at the end, load
                        that checkpoint and train steps S+1.. again: their
                        losses and lrs must be the ones of the first time
  --check               open the session with check=True (zrun's --check)

Generation reads --prompts/--prompt-lengths (the global batch: each rank its rows) and is
greedy. Rank 0 prints each generation's memory: this rank's bytes before,
the peak while the generation state was held, and after; after must equal
before (the training steady state), which is asserted on every rank.
"""
import argparse
import os
import sys

import numpy as np

import zplan

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
import batches  # noqa: E402  (the oracle's copy of zrun train's batch selection)


def generate_checked(session, args, label):
    """Generates this rank's rows of the prompts, as zrun generate does, and
    returns every rank's tokens; checks that memory returns to its level
    before."""
    rows = session.generation_shape["batch"]
    mine = slice(session.rank * rows, (session.rank + 1) * rows)
    prompts = np.load(args.prompts)[mine]
    lengths = np.load(args.prompt_lengths)[mine] if args.prompt_lengths else None
    before = session.memory
    tokens = session.generate(prompts, lengths, max_new_tokens=args.max_new_tokens, gather=True)
    after = session.memory
    assert after["current_bytes"] == before["current_bytes"], (label, before, after)
    assert after["peak_bytes"] >= before["current_bytes"] + after["generation_bytes"], (
        label, before, after)
    if session.rank == 0:
        print(f"{label}: memory {before['current_bytes']} B before, peak "
              f"{after['peak_bytes']} B (generation state {after['generation_bytes']} B), "
              f"{after['current_bytes']} B after")
    return tokens


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plan")
    parser.add_argument("--data", required=True, help="uint16 token file (.bin)")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loss-log")
    parser.add_argument("--save")
    parser.add_argument("--prompts")
    parser.add_argument("--prompt-lengths")
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--tokens-before")
    parser.add_argument("--tokens-after")
    parser.add_argument("--generate-after", type=int, default=0)
    parser.add_argument("--save-at", type=int, default=0)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.save_at and not args.save:
        parser.error("--save-at needs --save")

    # zrun's --steps only sets a cosine schedule's length; the loop below
    # takes the steps (Session refuses steps otherwise).
    session = zplan.Session(args.plan, check=args.check, lr=args.lr, warmup=args.warmup,
                            grad_accum=args.grad_accum)
    rank, world = session.rank, session.world_size
    rows, row_tokens = session.train_input_shape
    tokens = np.fromfile(args.data, dtype=np.uint16)

    if args.tokens_before:
        np.save(args.tokens_before, generate_checked(session, args, "before training"))

    def train(first_step, on_micro_step):
        """Optimizer steps first_step.. of the run; returns their loss log lines."""
        lines = []
        for step in range(first_step, args.steps):
            for micro in range(args.grad_accum):
                offsets = [batches.row_offset(args.seed, step, q, len(tokens), row_tokens)
                           for q in batches.micro_batch_rows(micro, rank, world, rows)]
                batch = np.stack([tokens[o:o + row_tokens] for o in offsets]).astype(np.int64)
                loss = session.train_step(batch)
                assert loss == session.loss
                on_micro_step(step)
            closed = session.last_step
            assert closed is not None and closed["step"] == step + 1, closed
            lines.append("%d\t%.9g\t%.9g\n" % (closed["step"], closed["loss"], closed["lr"]))
        assert session.optimizer_steps == args.steps
        return lines

    micro_steps = 0
    checkpoint = None

    def after_micro_step(step):
        nonlocal micro_steps, checkpoint
        micro_steps += 1
        if micro_steps == args.generate_after:
            generate_checked(session, args, f"after micro-step {micro_steps}")
        if micro_steps == args.save_at * args.grad_accum:
            checkpoint = session.save(args.save)

    log_lines = train(0, after_micro_step)

    if args.tokens_after:
        np.save(args.tokens_after, generate_checked(session, args, "after training"))
    if args.save:
        directory = session.save(args.save)
        if rank == 0:
            print(f"saved {directory}")
    if args.save_at:
        session.load(checkpoint)
        assert session.optimizer_steps == args.save_at and session.loss is None
        again = train(args.save_at, lambda step: None)
        assert again == log_lines[args.save_at:], (again, log_lines)
        if rank == 0:
            print(f"loaded {checkpoint}: steps {args.save_at + 1}-{args.steps} again, "
                  f"identical losses and lrs")
    if rank == 0 and args.loss_log:
        with open(args.loss_log, "w") as log:
            log.writelines(log_lines)
    if rank == 0:
        print(f"trained {args.steps} steps ({micro_steps} micro-steps) on {world} ranks, "
              f"final loss {log_lines[-1].split()[1]}")


if __name__ == "__main__":
    main()

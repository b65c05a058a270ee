"""DPO from Python: prefer real text over the same bytes shuffled.

Direct Preference Optimization as TRL's DPOTrainer runs it (sigmoid loss),
data parallel: each rank makes its own preference pairs from the bundled
corpus (data/gpl-3.0.bin, the GPL-3 text as bytes): a prefix of P bytes, then
as the chosen completion the C bytes that really follow it, and as the
rejected one the same C bytes in a random order. The policy's plan is `zcc
--mode train --loss dpo --beta BETA` with input_ids [2 x pairs, P + C], the
pairs' chosen rows first, then their rejected rows (TRL's concatenated
order); the reference is the starting model, a frozen `zcc --mode logprobs`
plan whose per-token log-probs are computed once per batch and fed to the
step as ref_logprobs.

Every step rank 0 prints the loss and TRL's reward margin over every rank's
pairs: beta ((pi_c - ref_c) - (pi_r - ref_r)), the sums of the completion
tokens' log-probs, from the policy's log-probs before the step (as TRL logs
rewards/margins from the step's own forward), and the share of pairs whose
margin is positive (rewards/accuracies). Held-out pairs from the corpus's last
tenth are scored before and after training.

The model is the bundled tiny GPT-2 pretrained briefly on the corpus with
`zrun train` and exported (examples/grpo.py's `prepare` does the same; the
pretrained model is shared). One command does it all:

    python3 examples/dpo.py all --work build/rl --log build/rl/dpo.json

or step by step:

    python3 examples/dpo.py prepare --work build/rl
    PYTHONPATH=build/python mpirun -np 2 python3 examples/dpo.py run \\
        build/rl/dpo-policy.zplan build/rl/dpo-reference.zplan --log build/rl/dpo.json
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grpo import (CORPUS, MODEL, REPO, pretrain, run_command, run_command_of,  # noqa: E402
                  run_script_under_mpi, text, tool, word_starts)


def prepare(args):
    os.makedirs(args.work, exist_ok=True)
    start = time.time()
    weights = pretrain(args.work, args.model, args.ranks, args.pretrain_steps)
    common = ["--world-size", args.ranks, "--persistence-threshold", "0", "--input-shape",
              f"input_ids={2 * args.pairs}x{args.prompt_len + args.completion_len}"]
    policy = os.path.join(args.work, "dpo-policy.zplan")
    reference = os.path.join(args.work, "dpo-reference.zplan")
    run_command([tool("zcc"), weights, "--mode", "train", "--loss", "dpo", "--beta", args.beta]
                + common + ["-o", policy], quiet=True)
    run_command([tool("zcc"), weights, "--mode", "logprobs"] + common + ["-o", reference],
                quiet=True)
    print(f"== prepared in {time.time() - start:.0f} s: {policy}, {reference}", flush=True)
    return policy, reference


def run_mpi(args, policy, reference):
    run_script_under_mpi(args, __file__, policy, reference,
                         ["--steps", args.steps, "--lr", args.lr, "--beta", args.beta,
                          "--prompt-len", args.prompt_len, "--seed", args.seed])


# ---------------------------------------------------------------------------
# The loop (under mpirun; every zplan call is collective)
# ---------------------------------------------------------------------------

def make_pairs(corpus, starts, rng, pairs, prompt_len, length):
    """[2 x pairs, length] rows (chosen rows, then rejected rows) and their
    completion mask: a corpus prefix, then its real continuation or the
    continuation's bytes shuffled."""
    picked = rng.choice(starts, size=pairs)
    chosen = np.stack([corpus[s:s + length] for s in picked]).astype(np.int64)
    rejected = chosen.copy()
    for row in rejected:
        row[prompt_len:] = rng.permutation(row[prompt_len:])
    mask = np.zeros((2 * pairs, length), np.float32)
    mask[:, prompt_len:] = 1.0
    return np.concatenate([chosen, rejected]), mask


def margins(policy, reference_logprobs, ids, mask, beta):
    """Per pair: TRL's chosen and rejected rewards, beta (pi - ref) summed
    over the completion tokens, from the policy's log-probs now."""
    logprobs = policy.logprobs(ids, mask=mask).astype(np.float64).sum(1)
    reference = reference_logprobs.astype(np.float64).sum(1)
    pairs = len(ids) // 2
    rewards = beta * (logprobs - reference)
    return rewards[:pairs], rewards[pairs:]


def loop(args):
    import zplan

    rank, world = zplan.rank(), zplan.world_size()
    policy = zplan.Session(args.policy, lr=args.lr, weight_decay=0.0)
    reference = zplan.Session(args.reference)
    rows, length = policy.train_input_shape  # chosen rows, then rejected rows
    pairs = rows // 2
    corpus = np.fromfile(args.data, dtype=np.uint16).astype(np.int64)
    split = int(len(corpus) * 0.9)
    train_starts = word_starts(corpus[:split], length)
    held_out_starts = word_starts(corpus[split:], length) + split
    if rank == 0:
        print(f"DPO on {world} ranks: {pairs} pairs a rank, {args.prompt_len}+"
              f"{length - args.prompt_len} bytes a row, beta {args.beta}, lr {args.lr}",
              flush=True)

    # Fixed held-out pairs (the same before and after), each rank its own.
    held_rng = np.random.default_rng([args.seed, rank, 1])
    held_out = []
    for _ in range(args.held_out_batches):
        ids, mask = make_pairs(corpus, held_out_starts, held_rng, pairs, args.prompt_len, length)
        held_out.append((ids, mask, reference.logprobs(ids, mask=mask)))

    def evaluate():
        rewards = [margins(policy, ref, ids, mask, args.beta) for ids, mask, ref in held_out]
        margin = np.concatenate([c - r for c, r in rewards])
        totals = zplan.gather_rows(np.array([[margin.sum(), (margin > 0).sum(), len(margin)]]))
        return totals[:, 0].sum() / totals[:, 2].sum(), totals[:, 1].sum() / totals[:, 2].sum()

    log = {"config": {"ranks": world, "pairs_per_rank": pairs, "prompt_len": args.prompt_len,
                      "completion_len": length - args.prompt_len, "lr": args.lr,
                      "beta": args.beta, "seed": args.seed,
                      "policy": os.path.basename(args.policy)},
           "steps": []}
    held_margin, held_accuracy = evaluate()
    log["held_out_before"] = {"margin": float(held_margin), "accuracy": float(held_accuracy)}
    if rank == 0:
        print(f"held-out before: margin {held_margin:.4f}, accuracy {held_accuracy:.2f}",
              flush=True)
    rng = np.random.default_rng([args.seed, rank])  # each rank its own pairs
    start = time.time()
    for step in range(1, args.steps + 1):
        ids, mask = make_pairs(corpus, train_starts, rng, pairs, args.prompt_len, length)
        ref_logprobs = reference.logprobs(ids, mask=mask)  # once per batch
        chosen, rejected = margins(policy, ref_logprobs, ids, mask, args.beta)
        loss = policy.train_step(ids, completion_mask=mask, ref_logprobs=ref_logprobs)
        margin = chosen - rejected
        # -log sigmoid(margin), TRL's loss per pair, for the cross-check in the log.
        pair_loss = np.logaddexp(0.0, -margin)
        totals = zplan.gather_rows(np.array([[margin.sum(), (margin > 0).sum(), chosen.sum(),
                                              rejected.sum(), pair_loss.sum(), len(margin)]]))
        count = totals[:, 5].sum()
        mean = totals[:, :5].sum(0) / count
        if rank == 0:
            seconds = time.time() - start
            print(f"step {step}: loss {loss:.4f}, margin {mean[0]:.4f}, accuracy {mean[1]:.2f}, "
                  f"chosen {mean[2]:+.4f}, rejected {mean[3]:+.4f}, "
                  f"{policy.memory['current_bytes']} B held, {seconds:.1f} s", flush=True)
            log["steps"].append({"step": step, "loss": float(loss), "margin": float(mean[0]),
                                 "accuracy": float(mean[1]), "chosen_reward": float(mean[2]),
                                 "rejected_reward": float(mean[3]),
                                 "loss_from_logprobs": float(mean[4]),
                                 "held_bytes": int(policy.memory["current_bytes"]),
                                 "seconds": round(seconds, 3)})
            if args.log:
                with open(args.log + ".tmp", "w") as f:
                    json.dump(log, f, indent=1)
                os.replace(args.log + ".tmp", args.log)
    held_margin, held_accuracy = evaluate()
    log["held_out_after"] = {"margin": float(held_margin), "accuracy": float(held_accuracy)}
    if rank == 0:
        print(f"held-out after: margin {held_margin:.4f}, accuracy {held_accuracy:.2f}",
              flush=True)
        ids, mask, _ = held_out[0]
        print(f"  e.g. chosen {text(ids[0, args.prompt_len:])!r}, rejected "
              f"{text(ids[pairs, args.prompt_len:])!r} after {text(ids[0, :args.prompt_len])!r}",
              flush=True)
        if args.log:
            with open(args.log + ".tmp", "w") as f:
                json.dump(log, f, indent=1)
            os.replace(args.log + ".tmp", args.log)
    reference.close()
    policy.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    commands = parser.add_subparsers(dest="command", required=True)

    def run_options(p):
        p.add_argument("--steps", type=int, default=60)
        p.add_argument("--lr", type=float, default=5e-4, help="AdamW, constant")
        p.add_argument("--beta", type=float, default=0.1,
                       help="the DPO temperature the policy plan was compiled with (zcc --beta)")
        p.add_argument("--prompt-len", type=int, default=16,
                       help="P: the first P bytes of each row are the prompt")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--log", help="write the per-step figures to this JSON file")

    def prepare_options(p):
        p.add_argument("--work", default=os.path.join(REPO, "build", "rl"))
        p.add_argument("--model", default=MODEL)
        p.add_argument("--ranks", type=int, default=2)
        p.add_argument("--pretrain-steps", type=int, default=2000,
                       help="zrun train steps on the corpus first (0: the model as is)")
        p.add_argument("--completion-len", type=int, default=16)
        p.add_argument("--pairs", type=int, default=8, help="pairs per rank and step")

    p = commands.add_parser("run", help="the loop, under mpirun")
    p.add_argument("policy", help="zcc --mode train --loss dpo plan")
    p.add_argument("reference", help="zcc --mode logprobs plan of the same starting weights")
    p.add_argument("--data", default=CORPUS, help="byte tokens (uint16) to make pairs from")
    p.add_argument("--held-out-batches", type=int, default=4)
    run_options(p)
    p = commands.add_parser("prepare", help="pretrain, export and compile both plans")
    prepare_options(p)
    run_options(p)
    p = commands.add_parser("all", help="prepare, then run on --ranks ranks")
    prepare_options(p)
    run_options(p)
    run_command_of(parser.parse_args(), __file__, prepare, run_mpi, loop)


if __name__ == "__main__":
    main()

"""GRPO from Python: sample, score, group-normalize, train with a KL to a reference.

Group Relative Policy Optimization as TRL's GRPOTrainer runs it, data
parallel: each rank samples G completions (temperature 1) for each of its own
prompts, scores them with a verifiable reward, turns the rewards into
group-normalized advantages (r - mean of the group) / (std of the group +
1e-4), and trains one micro-step per group on the policy's plan (zcc --loss
grpo), with the KL to a frozen reference (zcc --mode logprobs, the starting
weights) in the loss. The policy is ONE `train,generate` plan: the weights
generate() samples from are the ones train_step just updated. The reward is
the share of a completion's bytes that are lowercase vowels (--chars), which a
byte-level model can raise within a few dozen iterations; the KL term keeps
it from turning every byte into a vowel (with --beta 0.04 and --lr 1e-3 it
does, within 20 iterations).

The model is the bundled tiny GPT-2, first pretrained briefly on the bundled
corpus (data/gpl-3.0.bin, the GPL-3 text as bytes) with `zrun train` and
exported with `zrun export`, so that its completions are text-like. One
command does it all (pretrain, export, compile both plans, run on 2 ranks):

    python3 examples/grpo.py all --work build/rl --log build/rl/grpo.json

or step by step (`prepare` prints the commands it runs):

    python3 examples/grpo.py prepare --work build/rl
    PYTHONPATH=build/python mpirun -np 2 python3 examples/grpo.py run \\
        build/rl/grpo-policy.zplan build/rl/grpo-reference.zplan --log build/rl/grpo.json

Shapes come from the plans: the train micro-batch [G, T] is one prompt's group
of G completions (prompt P + completion T - P bytes), the generation batch is
this rank's prompts x G, and one optimizer step takes one micro-step per
prompt (grad_accum). Every iteration rank 0 prints the mean reward over every
rank's completions, the KL to the reference (the mean over completion tokens
of TRL's k3 estimator exp(ref - logp) - (ref - logp) - 1, from the policy's
log-probs before the step), the step's loss and the bytes each session holds.
Without --eos every completion has the same length and each group's
advantages sum to 0, so the step's loss is beta x that KL (TRL's loss with
ratio 1): a check that the compiled loss and the log-probs agree.

The defaults (2,000 pretraining steps, then 100 iterations of 4 prompts x 8
completions of 32 bytes a rank) take about 35 s on 2 idle cores.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO, "data", "gpl-3.0.bin")
MODEL = os.path.join(REPO, "test", "models", "gpt2-opset17.onnx")


# ---------------------------------------------------------------------------
# Preparing: pretrain, export, compile (one process; no zplan import)
# ---------------------------------------------------------------------------

def tool(name):
    """build/bin/NAME of this checkout, else NAME on the PATH."""
    built = os.path.join(REPO, "build", "bin", name)
    return built if os.path.exists(built) else name


def mpirun(ranks):
    command = ["mpirun", "-np", str(ranks), "--oversubscribe"]
    if os.geteuid() == 0:
        command.append("--allow-run-as-root")
    return command


def run_command(command, quiet=False, env=None):
    print("==", " ".join(shlex.quote(str(c)) for c in command), flush=True)
    environment = dict(os.environ, OPENBLAS_NUM_THREADS="1", **(env or {}))
    result = subprocess.run([str(c) for c in command], env=environment,
                            stdout=subprocess.PIPE if quiet else None,
                            stderr=subprocess.STDOUT if quiet else None, text=True)
    if result.returncode != 0:
        if quiet:
            sys.stdout.write(result.stdout)
        sys.exit(f"failed ({result.returncode}): {command[0]}")


def pretrain(work, model, ranks, steps, seed=0):
    """The starting weights: MODEL trained for STEPS AdamW steps on the
    corpus (scripts/train_curve.sh's schedule, 8 rows of 64 bytes per step)
    and exported to ONNX; reused when already there. STEPS = 0: MODEL."""
    if steps == 0:
        return model
    stem = os.path.splitext(os.path.basename(model))[0]
    out = os.path.join(work, f"pretrained-{stem}-{steps}.onnx")
    if os.path.exists(out):
        print(f"== reusing {out}", flush=True)
        return out
    if 8 % ranks:
        sys.exit(f"pretraining takes 8 rows per step: --ranks {ranks} does not divide 8")
    plan = os.path.join(work, f"pretrain-{stem}.zplan")
    checkpoint = os.path.join(work, f"pretrain-{stem}-{steps}")
    subprocess.run(["rm", "-rf", checkpoint], check=True)
    run_command([tool("zcc"), model, "--mode", "train", "--world-size", ranks,
                 "--input-shape", f"input_ids={8 // ranks}x64", "--persistence-threshold", "0",
                 "-o", plan], quiet=True)
    run_command(mpirun(ranks) + [tool("zrun"), plan, "train", "--data", CORPUS,
                                 "--steps", steps, "--lr", "3e-3", "--warmup", "30",
                                 "--lr-schedule", "cosine", "--min-lr", "3e-4",
                                 "--weight-decay", "0.1", "--seed", seed,
                                 "--log-every", max(1, steps // 4), "--save", checkpoint,
                                 "--loss-log", checkpoint + ".tsv"])
    run_command([tool("zrun"), plan, "export", "--checkpoint", checkpoint, "--model", model,
                 "-o", out])
    return out


def prepare(args):
    os.makedirs(args.work, exist_ok=True)
    start = time.time()
    weights = pretrain(args.work, args.model, args.ranks, args.pretrain_steps)
    rows, length = args.group, args.prompt_len + args.completion_len
    common = ["--world-size", args.ranks, "--persistence-threshold", "0",
              "--input-shape", f"input_ids={rows}x{length}"]
    policy = os.path.join(args.work, "grpo-policy.zplan")
    reference = os.path.join(args.work, "grpo-reference.zplan")
    run_command([tool("zcc"), weights, "--mode", "train,generate", "--loss", "grpo",
                 "--loss-type", args.loss_type, "--beta", args.beta,
                 "--batch", args.prompts_per_rank * args.group,
                 "--prompt-len", args.prompt_len, "--max-seq-len", length]
                + common + ["-o", policy], quiet=True)
    run_command([tool("zcc"), weights, "--mode", "logprobs"] + common + ["-o", reference],
                quiet=True)
    print(f"== prepared in {time.time() - start:.0f} s: {policy}, {reference}", flush=True)
    return policy, reference


def run_script_under_mpi(args, script, policy, reference, options):
    """mpirun -np RANKS python3 SCRIPT run POLICY REFERENCE OPTIONS [--log LOG],
    with build/python on PYTHONPATH (also what examples/dpo.py runs)."""
    command = mpirun(args.ranks) + [sys.executable, os.path.abspath(script), "run", policy,
                                    reference] + options
    if args.log:
        command += ["--log", args.log]
    python_path = os.path.join(REPO, "build", "python")
    if os.environ.get("PYTHONPATH"):
        python_path += os.pathsep + os.environ["PYTHONPATH"]
    run_command(command, env={"PYTHONPATH": python_path})


def run_mpi(args, policy, reference):
    """mpirun -np RANKS python3 THIS run POLICY REFERENCE ..."""
    options = ["--iterations", args.iterations, "--lr", args.lr, "--beta", args.beta,
               "--chars", args.chars, "--seed", args.seed]
    if args.eos is not None:
        options += ["--eos", args.eos]
    run_script_under_mpi(args, __file__, policy, reference, options)


def run_command_of(args, script, prepare, run_mpi, loop):
    """The `run`, `prepare` and `all` commands of SCRIPT (also examples/dpo.py)."""
    if args.command == "run":
        loop(args)
        return
    policy, reference = prepare(args)
    if args.command == "all":
        run_mpi(args, policy, reference)
    else:
        print("then: PYTHONPATH=build/python " + " ".join(mpirun(args.ranks)) +
              f" python3 {os.path.relpath(script)} run {policy} {reference}", flush=True)


# ---------------------------------------------------------------------------
# The loop (under mpirun; every zplan call is collective)
# ---------------------------------------------------------------------------

def word_starts(corpus, length):
    """The offsets of the corpus's words (a letter after a space or a line
    break) that have LENGTH bytes after them."""
    letter = np.isin(corpus[1:-length], np.frombuffer(
        b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", np.uint8))
    after_space = np.isin(corpus[:-length - 1], (ord(" "), ord("\n")))
    return np.flatnonzero(letter & after_space) + 1


def corpus_prompts(corpus, rng, count, length):
    """COUNT prompts of LENGTH bytes of the corpus, each starting a word."""
    starts = word_starts(corpus, length)
    picked = rng.choice(starts, size=count)
    return np.stack([corpus[s:s + length] for s in picked]).astype(np.int64)


def completion_mask(completions, eos):
    """[B, M] 1 on each completion's tokens up to and including its first
    EOS (generate() fills the rest with EOS), as TRL masks them."""
    if eos is None:
        return np.ones(completions.shape, np.float32)
    is_eos = completions == eos
    first = np.where(is_eos.any(1), is_eos.argmax(1), completions.shape[1])
    return (np.arange(completions.shape[1])[None, :] <= first[:, None]).astype(np.float32)


def vowel_reward(completions, mask, chars, eos):
    """The share of each completion's M slots holding one of CHARS (the EOS
    and what follows it count as misses, so stopping early earns less)."""
    hits = np.isin(completions, np.frombuffer(chars.encode(), np.uint8).astype(np.int64))
    if eos is not None:
        hits &= completions != eos
    return (hits * mask).sum(1) / completions.shape[1]


def group_advantages(rewards, group):
    """TRL's: (r - mean of its group) / (std of its group + 1e-4), the
    unbiased std (torch.std)."""
    grouped = rewards.reshape(-1, group)
    mean = grouped.mean(1, keepdims=True)
    std = grouped.std(1, ddof=1, keepdims=True)
    return ((grouped - mean) / (std + 1e-4)).reshape(-1).astype(np.float32)


def text(tokens):
    return bytes(int(t) for t in tokens).decode("latin-1")


def loop(args):
    import zplan

    rank, world = zplan.rank(), zplan.world_size()
    policy = zplan.Session(args.policy, lr=args.lr, grad_accum=1, weight_decay=0.0)
    shape = policy.generation_shape
    group, length = policy.train_input_shape  # one group per micro-step
    prompt_len = shape["prompt_len"]
    new_tokens = length - prompt_len
    if shape["batch"] % group or length > shape["max_seq_len"]:
        sys.exit(f"the plan's generation batch {shape['batch']} is not a multiple of its "
                 f"train micro-batch {group}, or its rows {length} exceed max_seq_len")
    prompts_per_rank = shape["batch"] // group
    policy.close()  # reopen with grad_accum = prompts per rank: one step per iteration
    policy = zplan.Session(args.policy, lr=args.lr, grad_accum=prompts_per_rank,
                           weight_decay=0.0)
    reference = zplan.Session(args.reference)
    corpus = np.fromfile(args.data, dtype=np.uint16).astype(np.int64)
    rng = np.random.default_rng([args.seed, rank])  # each rank its own prompts
    if rank == 0:
        print(f"GRPO on {world} ranks: {prompts_per_rank} prompts x {group} completions a "
              f"rank, {prompt_len}+{new_tokens} bytes a row, reward: share of "
              f"{args.chars!r}, beta {args.beta}, lr {args.lr}", flush=True)
    log = {"config": {"ranks": world, "group": group, "prompts_per_rank": prompts_per_rank,
                      "prompt_len": prompt_len, "completion_len": new_tokens,
                      "lr": args.lr, "beta": args.beta, "chars": args.chars,
                      "seed": args.seed, "eos": args.eos,
                      "policy": os.path.basename(args.policy)},
           "iterations": []}
    start = time.time()
    for iteration in range(1, args.iterations + 1):
        prompts = corpus_prompts(corpus, rng, prompts_per_rank, prompt_len)
        rows = np.repeat(prompts, group, axis=0)  # G rows per prompt
        completions = policy.generate(rows, max_new_tokens=new_tokens, temperature=1.0,
                                      seed=args.seed * 100003 + iteration, eos=args.eos)
        ids = np.concatenate([rows, completions], axis=1)
        mask = np.concatenate([np.zeros((len(rows), prompt_len), np.float32),
                               completion_mask(completions, args.eos)], axis=1)
        rewards = vowel_reward(completions, mask[:, prompt_len:], args.chars, args.eos)
        advantages = group_advantages(rewards, group)
        kl_sum = 0.0
        for g in range(prompts_per_rank):
            mine = slice(g * group, (g + 1) * group)
            ref_logprobs = reference.logprobs(ids[mine], mask=mask[mine])
            logprobs = policy.logprobs(ids[mine], mask=mask[mine])  # before the step
            delta = ref_logprobs - logprobs
            kl_sum += float(((np.exp(delta) - delta - 1) * mask[mine]).sum())
            # The plan says whether its loss has a KL term (zcc --beta > 0).
            extra = ({"ref_logprobs": ref_logprobs}
                     if "ref_logprobs" in policy.train_rl_inputs else {})
            policy.train_step(ids[mine], completion_mask=mask[mine],
                              advantages=advantages[mine], **extra)
        step = policy.last_step
        totals = zplan.gather_rows(np.array([[rewards.sum(), len(rewards), kl_sum, mask.sum(),
                                              rewards.max(), rewards.min()]]))
        reward = totals[:, 0].sum() / totals[:, 1].sum()
        kl = totals[:, 2].sum() / totals[:, 3].sum()
        held = policy.memory["current_bytes"]
        reference_held = reference.memory["current_bytes"]
        if rank == 0:
            seconds = time.time() - start
            print(f"iteration {iteration}: reward {reward:.3f}, kl {kl:.2e}, "
                  f"loss {step['loss']:.4f}, {held} B held, reference {reference_held} B, "
                  f"{seconds:.1f} s", flush=True)
            if args.show and iteration % args.show == 0:
                best = int(np.argmax(rewards))
                print(f"  sample (reward {rewards[best]:.2f}): {text(rows[best])!r} -> "
                      f"{text(completions[best])!r}", flush=True)
            log["iterations"].append({
                "iteration": iteration, "reward": float(reward), "kl": float(kl),
                "loss": float(step["loss"]), "reward_max": float(totals[:, 4].max()),
                "reward_min": float(totals[:, 5].min()), "held_bytes": int(held),
                "reference_bytes": int(reference_held), "seconds": round(seconds, 3)})
            if args.log:
                with open(args.log + ".tmp", "w") as f:
                    json.dump(log, f, indent=1)
                os.replace(args.log + ".tmp", args.log)
    if rank == 0:
        first, last = log["iterations"][0]["reward"], log["iterations"][-1]["reward"]
        print(f"reward {first:.3f} -> {last:.3f} over {args.iterations} iterations "
              f"in {time.time() - start:.1f} s", flush=True)
    reference.close()
    policy.close()


# ---------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    commands = parser.add_subparsers(dest="command", required=True)

    def run_options(p):
        p.add_argument("--iterations", type=int, default=100)
        p.add_argument("--lr", type=float, default=3e-4, help="AdamW, constant")
        p.add_argument("--beta", type=float, default=0.1,
                       help="the KL coefficient the policy plan was compiled with "
                            "(zcc --beta); 0: no ref_logprobs input")
        p.add_argument("--chars", default="aeiou", help="the bytes the reward counts")
        p.add_argument("--eos", type=int, default=None,
                       help="stop a completion at this byte (e.g. 10, a newline)")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--log", help="write the per-iteration figures to this JSON file")

    def prepare_options(p):
        p.add_argument("--work", default=os.path.join(REPO, "build", "rl"))
        p.add_argument("--model", default=MODEL)
        p.add_argument("--ranks", type=int, default=2)
        p.add_argument("--pretrain-steps", type=int, default=2000,
                       help="zrun train steps on the corpus first (0: the model as is)")
        p.add_argument("--prompt-len", type=int, default=16)
        p.add_argument("--completion-len", type=int, default=32)
        p.add_argument("--group", type=int, default=8, help="G completions per prompt")
        p.add_argument("--prompts-per-rank", type=int, default=4)
        p.add_argument("--loss-type", default="dapo", choices=("grpo", "dapo"))

    p = commands.add_parser("run", help="the loop, under mpirun")
    p.add_argument("policy", help="zcc --mode train,generate --loss grpo plan")
    p.add_argument("reference", help="zcc --mode logprobs plan of the same starting weights")
    p.add_argument("--data", default=CORPUS, help="byte tokens (uint16) to take prompts from")
    p.add_argument("--show", type=int, default=10,
                   help="print the best completion every SHOW iterations (0: never)")
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

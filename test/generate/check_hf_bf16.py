"""Checks zrun generate's bf16 tokens against Hugging Face's bf16 greedy loop.

The oracle is test/models/goldens/llama-opset17-bf16-generate.npz (written by
scripts/bf16_generate_goldens.py: model.to(torch.bfloat16), generate(
do_sample=False)). zplan and torch round differently, so a token is compared
only where it is determined: at a step whose torch top-1 margin is clear
(margin >= the golden's margin_threshold) and whose earlier tokens agree in
both runs (the same context). Every such step must give torch's token, and
on every step whose earlier tokens agree the logits must lie within the
golden's logit_tolerance (half the threshold: what keeps a clear step's
top-1 in place). At least --min-compared clear steps must be compared, so
that a run that leaves torch's tokens early cannot pass by comparing
nothing.

    check_hf_bf16.py GOLDEN --prompts P.npy --prompt-lengths L.npy TOKENS LOGITS

P.npy and L.npy are the files zrun was given (they must be the golden's
prompts); TOKENS is zrun's --output (int64 or int32 [B, M]); LOGITS its
--logits-output (float32 [M, B, V]). Prints `ok ...` lines, or `FAIL ...`
lines and exits 1. numpy only.
"""
import argparse
import sys

import numpy as np


def fail(message):
    print(f"FAIL {message}")
    return 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("golden")
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--prompt-lengths", required=True)
    parser.add_argument("--min-compared", type=int, default=24,
                        help="fewest clear row-steps that must be compared (default 24)")
    parser.add_argument("tokens")
    parser.add_argument("logits")
    args = parser.parse_args()

    golden = np.load(args.golden)
    prompts, lengths = np.load(args.prompts), np.load(args.prompt_lengths)
    if not (np.array_equal(prompts, golden["prompts"])
            and np.array_equal(lengths, golden["prompt_lengths"])):
        return fail(f"{args.prompts}, {args.prompt_lengths}: not the golden's prompts "
                    f"(make_prompts.py {golden['make_prompts_args']})")
    want_tokens, want_logits = golden["tokens"], golden["logits"]
    tokens, logits = np.load(args.tokens), np.load(args.logits)
    if tokens.shape != want_tokens.shape or tokens.dtype not in (np.int64, np.int32):
        return fail(f"tokens: {tokens.dtype} {list(tokens.shape)}, expected int64 or int32 "
                    f"{list(want_tokens.shape)}")
    if logits.shape != want_logits.shape or logits.dtype != np.float32:
        return fail(f"logits: {logits.dtype} {list(logits.shape)}, expected float32 "
                    f"{list(want_logits.shape)}")
    batch, steps = want_tokens.shape
    threshold = float(golden["margin_threshold"])
    tolerance = float(golden["logit_tolerance"])
    clear = golden["margin"] >= threshold  # [M, B]

    failures = 0
    compared = agreed_steps = unclear_differ = 0
    worst = 0.0
    for row in range(batch):
        for k in range(steps):
            if not np.array_equal(tokens[row, :k], want_tokens[row, :k]):
                break  # a different context: nothing later in the row compares
            agreed_steps += 1
            diff = float(np.abs(logits[k, row] - want_logits[k, row]).max())
            worst = max(worst, diff)
            if diff > tolerance:
                failures += fail(f"logits: row {row} step {k}: max |diff| {diff:.5f} > "
                                 f"{tolerance:.5f}")
            same = tokens[row, k] == want_tokens[row, k]
            if clear[k, row]:
                compared += 1
                if not same:
                    failures += fail(f"tokens: row {row} step {k}: {tokens[row, k]}, torch "
                                     f"bf16 {want_tokens[row, k]} (margin "
                                     f"{golden['margin'][k, row]:.5f} >= {threshold:.5f})")
            elif not same:
                unclear_differ += 1
    if compared < args.min_compared:
        failures += fail(f"only {compared} clear row-steps compared, fewer than "
                         f"{args.min_compared}")
    if failures:
        return 1
    print(f"ok tokens: {compared} clear row-steps compared, all equal "
          f"({batch * steps} row-steps, {int(clear.sum())} clear in torch; "
          f"{unclear_differ} unclear steps differ)")
    print(f"ok logits: max |diff| {worst:.5f} <= {tolerance:.5f} on {agreed_steps} "
          f"row-steps with torch's context")
    return 0


if __name__ == "__main__":
    sys.exit(main())

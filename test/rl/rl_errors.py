"""The RL calls' errors: each raises RuntimeError on every rank, naming the
missing, extra or misshaped input, and the session stays usable.

Run under mpirun on POLICY (--loss grpo --beta 0.04, micro-batch [2, 8],
per-sequence advantages) and TRAIN (--loss causal-lm). Rank 0 prints
"<case>: <message>" for FileCheck; a rank that does not raise exits 1. In
"one rank wrong" only rank 1's advantages are misshaped: the ranks agree
before the step, so both raise.
"""
import sys

import numpy as np

import zplan


def expect_error(case, call):
    try:
        call()
    except RuntimeError as error:
        if zplan.rank() == 0:
            print(f"{case}: {error}", flush=True)
        return
    sys.exit(f"{case}: no RuntimeError on rank {zplan.rank()}")


def main():
    policy_plan, train_plan = sys.argv[1:3]
    rank = zplan.rank()
    ids = np.arange(16, dtype=np.int64).reshape(2, 8) % 256
    mask = np.ones((2, 8), dtype=np.float32)
    advantages = np.array([0.5, -0.5], dtype=np.float32)
    ref = np.zeros((2, 8), dtype=np.float32)
    with zplan.Session(policy_plan, lr=1e-3) as policy:
        expect_error("missing mask", lambda: policy.train_step(
            ids, advantages=advantages, ref_logprobs=ref))
        expect_error("missing ref", lambda: policy.train_step(
            ids, completion_mask=mask, advantages=advantages))
        expect_error("extra old", lambda: policy.train_step(
            ids, completion_mask=mask, advantages=advantages, ref_logprobs=ref,
            old_logprobs=ref))
        expect_error("misshaped advantages", lambda: policy.train_step(
            ids, completion_mask=mask, advantages=np.zeros((2, 8), np.float32),
            ref_logprobs=ref))
        expect_error("text mask", lambda: policy.train_step(
            ids, completion_mask=np.full((2, 8), "x"), advantages=advantages,
            ref_logprobs=ref))
        bad = advantages if rank == 0 else np.zeros(3, np.float32)
        expect_error("one rank wrong", lambda: policy.train_step(
            ids, completion_mask=mask, advantages=bad, ref_logprobs=ref))
        expect_error("logprobs shape", lambda: policy.logprobs(ids[:1]))
        # Still usable: a good step runs.
        loss = policy.train_step(ids, completion_mask=mask, advantages=advantages,
                                 ref_logprobs=ref)
        if rank == 0:
            print(f"usable: loss {loss:.4f}")
    with zplan.Session(train_plan, lr=1e-3) as session:
        expect_error("rl input to causal-lm", lambda: session.train_step(
            ids, completion_mask=mask))
        expect_error("no logprobs program", lambda: session.logprobs(ids))


if __name__ == "__main__":
    main()

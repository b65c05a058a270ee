"""The CPU GEMM's packed weights (runtime/cpu/StationaryWeights.h) follow
every write to the weights: run under mpirun, one process per rank.

    stationary_weights.py PLAN WORK_DIR

PLAN is a --loss grpo plan (a train step and a logprobs program over one set
of shards). On one Session, logprobs() runs three times on the same rows:
the first packs nothing, the second packs each matmul's weight, the third
reads the packed copies -- the three are the same bits. Then:
  - a train step (an optimizer step: grad_accum 1) moves the weights: the
    next logprobs() differ from before it, and equal bit for bit those of a
    fresh Session that loads the step's checkpoint (a stale packed copy
    would give the old ones);
  - Session.load of the checkpoint from before the step puts the old
    weights back: logprobs() are the first ones again, three runs in a row.
Prints "ok" lines (rank 0); exits 1 at the first difference.
"""
import os
import sys

import numpy as np
import zplan


def check(condition, message):
    if not condition:
        print(f"FAIL rank {zplan.rank()}: {message}", flush=True)
        sys.exit(1)
    if zplan.rank() == 0:
        print(f"ok {message}", flush=True)


def same(a, b):
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def three_runs(session, ids):
    """logprobs() three times: the same bits each time (unpacked, packing,
    packed); returns them."""
    runs = [session.logprobs(ids) for _ in range(3)]
    return runs[0], same(runs[0], runs[1]) and same(runs[0], runs[2])


def main():
    plan, work = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(5 + zplan.rank())
    ids = rng.integers(0, 50, size=(4, 16), dtype=np.int64)
    with zplan.Session(plan, lr=0.5) as session:
        before, steady = three_runs(session, ids)
        check(steady, "three logprobs runs before training: the same bits")
        start = session.save(os.path.join(work, "before"))

        rl = {"completion_mask": np.ones(ids.shape, dtype=np.int64),
              "advantages": np.linspace(-1.0, 1.0, ids.shape[0], dtype=np.float32),
              "old_logprobs": before}
        session.train_step(ids, **{name: rl[name] for name in session.train_rl_inputs})
        stepped = session.save(os.path.join(work, "after"))
        after, steady = three_runs(session, ids)
        check(not same(after, before), "after the optimizer step: other log-probs")
        check(steady, "three logprobs runs after the step: the same bits")
        with zplan.Session(plan) as fresh:
            fresh.load(stepped)
            check(same(fresh.logprobs(ids), after),
                  "after the step: a fresh session on its checkpoint's bits")

        session.load(start)
        restored, steady = three_runs(session, ids)
        check(same(restored, before),
              "after loading the checkpoint before the step: the first log-probs")
        check(steady, "three logprobs runs after the load: the same bits")


if __name__ == "__main__":
    main()

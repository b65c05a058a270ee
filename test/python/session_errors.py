"""zplan's errors: each call below must raise RuntimeError on every rank.

Run under mpirun on two plans: TRAIN (training only, micro-batch [2, 16]) and
GENERATE (generation only, 3 rows). Rank 0 prints each message as
"<case>: <message>" for FileCheck; a rank that does not raise exits 1. The
sessions still work after the refused calls (a failure before any program
ran leaves a session usable). The rank-dependent cases give one rank a bad
argument and the other a good one: the ranks agree before any collective,
so both raise instead of one waiting forever in it.
"""
import sys

import numpy as np

import zplan


def expect_error(case, call):
    try:
        call()
    except RuntimeError as error:
        message = str(error)
        if zplan.rank() == 0:
            print(f"{case}: {message}", flush=True)
        return message
    sys.exit(f"{case}: no RuntimeError on rank {zplan.rank()}")


def main():
    train_plan, generate_plan, missing = sys.argv[1:4]
    rank = zplan.rank()
    expect_error("missing plan", lambda: zplan.Session(missing))
    expect_error("unknown option", lambda: zplan.Session(train_plan, learning_rate=1e-3))
    expect_error("bad option", lambda: zplan.Session(train_plan, lr=-1.0))
    expect_error("not a session option", lambda: zplan.Session(train_plan, data="x.bin"))
    expect_error("rows' options", lambda: zplan.Session(train_plan, shuffle=True))
    expect_error("threads", lambda: zplan.Session(train_plan, threads=0))
    expect_error("steps without cosine", lambda: zplan.Session(train_plan, steps=10))
    expect_error("backend", lambda: zplan.Session(train_plan, backend="gpu"))

    session = zplan.Session(train_plan, lr=1e-3)
    good = np.arange(32, dtype=np.int64).reshape(2, 16)
    expect_error("wrong shape", lambda: session.train_step(np.zeros((3, 16), dtype=np.int64)))
    expect_error("float ids", lambda: session.train_step(good.astype(np.float32)))
    expect_error("one rank wrong", lambda: session.train_step(
        good if rank == 0 else np.zeros((2, 8), dtype=np.int64)))
    expect_error("no generation", lambda: session.generate(good))
    # Every dtype and layout numpy hands over converts or raises (a uint64
    # array used to crash the module).
    expect_error("uint64 beyond int64", lambda: session.train_step(
        np.full((2, 16), 2**63 + 5, dtype=np.uint64)))
    expect_error("bool ids", lambda: session.train_step(good.astype(bool)))
    expect_error("0-d ids", lambda: session.train_step(np.int64(3)))
    expect_error("labels the plan ignores", lambda: session.train_step(good, good))
    expect_error("out of vocabulary", lambda: session.train_step(good + 240))
    expect_error("one rank negative", lambda: session.train_step(
        good if rank == 0 else good - 1))
    assert session.loss is None
    loss = session.train_step(good.astype(np.int32))
    assert np.isfinite(loss) and session.loss == loss, loss
    readonly = good.copy()
    readonly.setflags(write=False)
    for ids in (good.astype(np.uint64), good.astype(np.uint8), good.astype(">i8"),
                np.arange(64).reshape(2, 32)[:, ::2], np.asfortranarray(good), readonly):
        assert np.isfinite(session.train_step(ids)), ids.dtype

    generator = zplan.Session(generate_plan)
    prompts = np.full((3, 4), 5, dtype=np.int64)
    expect_error("no training", lambda: generator.train_step(good))
    expect_error("prompt rows", lambda: generator.generate(prompts[:2]))
    expect_error("too many tokens", lambda: generator.generate(prompts, max_new_tokens=100))
    expect_error("top_k without temperature", lambda: generator.generate(prompts, top_k=5))
    expect_error("no new tokens", lambda: generator.generate(prompts, max_new_tokens=0))
    expect_error("bool option", lambda: generator.generate(prompts, temperature=True))
    expect_error("one rank's lengths", lambda: generator.generate(
        prompts, np.array([4, 4, 4 if rank == 0 else 9]), max_new_tokens=3))
    # No max_new_tokens: as many as the plan leaves room for, 16 - 6 = 10
    # (the default of 16 would not fit).
    assert generator.generate(prompts).shape == (3, 10)
    tokens = generator.generate(prompts, max_new_tokens=np.int64(3), eos=np.int32(7),
                                temperature=np.float32(0.5), top_k=4, seed=1)
    assert tokens.shape == (3, 3) and tokens.dtype == np.int64, (tokens.shape, tokens.dtype)
    # Each rank its own rows: gather=True gives every rank's, in rank order.
    everyone = generator.generate(prompts + rank, max_new_tokens=3, gather=True)
    mine = generator.generate(prompts + rank, max_new_tokens=3)
    assert everyone.shape == (6, 3), everyone.shape
    assert (everyone[3 * rank:3 * rank + 3] == mine).all(), (everyone, mine)
    expect_error("gather_rows shapes", lambda: zplan.gather_rows(
        np.zeros((2 if rank == 0 else 3, 2))))
    expect_error("gather_rows 0-d", lambda: zplan.gather_rows(np.float64(1.0)))
    stacked = zplan.gather_rows(np.full((1, 2), rank, dtype=np.int32))
    assert stacked.dtype == np.int64 and stacked.tolist() == [[0, 0], [1, 1]], stacked
    generator.close()
    expect_error("closed", lambda: generator.generate(prompts))
    if rank == 0:
        print("ok every error raised on every rank; the sessions still ran after them")


if __name__ == "__main__":
    main()

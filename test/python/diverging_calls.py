"""Ranks that diverge in Python: every rank raises RuntimeError naming each
rank's call, and the session still works after; a rank that leaves ends the
job through the watchdog.

    mpirun -np 2 python diverging_calls.py PLAN calls
    mpirun -np 2 python diverging_calls.py PLAN exit

PLAN is a train,generate plan (micro-batch [2, 16], 3 rows of generation).
`calls`: rank 1 makes another call than rank 0, or the same call with other
settings; rank 0 prints each message as "<case>: <message>". (How many tokens
each rank asks for, and its EOS, are its own: ragged-requests.test.) `exit`: rank 1
returns from the script (sys.exit(0)) while rank 0 calls train_step, with a
3 s collective timeout; the job must end non-zero (the caller checks).
"""
import sys

import numpy as np

import zplan
from session_errors import expect_error  # beside this script


def main():
    plan, mode = sys.argv[1:3]
    rank = zplan.rank()
    ids = np.arange(32).reshape(2, 16) % 200
    prompts = np.full((3, 4), 5)
    if mode == "exit":
        zplan.set_collective_timeout(3)
        session = zplan.Session(plan, lr=1e-3)
        session.train_step(ids)
        if rank == 1:
            sys.exit(0)
        session.train_step(ids)
        sys.exit("rank 0 finished a train_step that rank 1 never joined")
    expect_error("lr", lambda: zplan.Session(plan, lr=1e-3 if rank == 0 else 2e-3))
    session = zplan.Session(plan, lr=1e-3)
    expect_error("train_step against generate", lambda: (
        session.train_step(ids) if rank == 0 else session.generate(prompts)))
    expect_error("temperature", lambda: session.generate(
        prompts, max_new_tokens=4, temperature=0.0 if rank == 0 else 1.0))
    expect_error("seed", lambda: session.generate(
        prompts, max_new_tokens=4, temperature=1.0, seed=1 + rank))
    expect_error("save against load", lambda: (
        session.save("ck") if rank == 0 else session.load("ck")))
    # The same settings with per-rank prompts: data-parallel generation.
    tokens = session.generate(prompts + rank, max_new_tokens=4, temperature=np.float32(1.0),
                              seed=np.int64(3))
    assert tokens.shape == (3, 4), tokens.shape
    assert np.isfinite(session.train_step(ids))
    if rank == 0:
        print("ok every divergence raised on every rank; the session still ran after them")


if __name__ == "__main__":
    main()

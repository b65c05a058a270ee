"""Rank 1 raises an exception no one catches while rank 0 is in train_step.

Rank 0 waits in the step's collective for rank 1, which never comes: the
module's excepthook prints rank 1's traceback and aborts every rank, so
that mpirun exits non-zero instead of rank 0 waiting forever.
"""
import sys

import numpy as np

import zplan

session = zplan.Session(sys.argv[1])
if session.rank == 1:
    raise ValueError("rank 1 stops here")
session.train_step(np.zeros(session.train_input_shape, dtype=np.int64))
print("rank 0 was not aborted")

"""Writes the malformed row files of rows-errors.test into a directory.

From the committed rows (test/models/goldens/sft-rows.npy, [10, 16] int64) and
labels: each file below breaks one rule of `zrun train --data ROWS.npy
--labels LABELS.npy` (runtime/train/RowData.h, RowSampler.h).

    python3 make_row_files.py GOLDENS_DIR OUT_DIR
"""
import os
import sys

import numpy as np


def main():
    goldens, out = sys.argv[1], sys.argv[2]
    rows = np.load(os.path.join(goldens, "sft-rows.npy"))
    labels = np.load(os.path.join(goldens, "sft-labels.npy"))
    os.makedirs(out, exist_ok=True)
    files = {
        "three-rows.npy": rows[:3],                        # fewer than a step
        "float32.npy": rows.astype(np.float32),            # a float dtype
        "uint8.npy": rows.astype(np.uint8),                # an unsigned dtype
        "rank3.npy": rows[:, :, None],                     # three dimensions
        "t12.npy": rows[:, :12],                           # T is not the plan's
        "labels-t15.npy": labels[:, :15],                  # labels of another shape
        "labels-float.npy": labels.astype(np.float64),     # labels of a float dtype
        "rows-int32.npy": rows.astype(np.int32),
        "labels-int32.npy": labels.astype(np.int32),
    }
    bad_label = labels.copy()
    bad_label[7, 6] = -5                                   # row 7: rank 1 reads it at step 2
    files["labels-minus5.npy"] = bad_label
    bad_token = rows.copy()
    bad_token[7, 6] = 300                                  # outside the vocabulary of 256
    files["rows-300.npy"] = bad_token
    for name, array in files.items():
        np.save(os.path.join(out, name), array)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Make the small training corpus in data/: byte-level tokens as a uint16 .bin.

The text is the GNU General Public License, version 3 (data/gpl-3.0.txt, 35,149
bytes of English prose, copied verbatim from Debian's
/usr/share/common-licenses/GPL-3). It may be shipped here because the license
document itself says "Everyone is permitted to copy and distribute verbatim
copies of this license document, but changing it is not allowed": the file is
committed unchanged, and the token file is a mechanical encoding of it.

Tokenisation is byte-level, matching the fixtures' vocabulary of 256: token i
is the i-th byte of the text. The .bin is nanoGPT's layout: the tokens as
little-endian uint16, nothing else (no header), so `zrun PLAN train --data
data/gpl-3.0.bin` reads it with the default `--data-dtype uint16`.

    python3 scripts/make_corpus.py                       # data/gpl-3.0.txt -> data/gpl-3.0.bin
    python3 scripts/make_corpus.py --source /usr/share/common-licenses/GPL-3
                                                         # refresh the text first

Needs only numpy. The output is a pure function of the text (identical bytes on
every run); the script prints the token count and both SHA-256 sums.
"""
import argparse
import hashlib
import os
import shutil
import sys

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = os.path.join(REPO_ROOT, "data", "gpl-3.0.txt")
TOKENS = os.path.join(REPO_ROOT, "data", "gpl-3.0.bin")


def tokenize(data: bytes) -> np.ndarray:
    """Byte-level tokens: one uint16 per byte, in file order."""
    return np.frombuffer(data, dtype=np.uint8).astype("<u2")


def write_atomically(path, data: bytes):
    temporary = path + ".tmp"
    with open(temporary, "wb") as f:
        f.write(data)
    os.replace(temporary, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", help="copy this text over data/gpl-3.0.txt first")
    parser.add_argument("--text", default=TEXT)
    parser.add_argument("--out", default=TOKENS)
    args = parser.parse_args()
    if args.source:
        shutil.copyfile(args.source, args.text)
    with open(args.text, "rb") as f:
        data = f.read()
    if not data:
        sys.exit(f"make_corpus: error: {args.text} is empty")
    tokens = tokenize(data)
    write_atomically(args.out, tokens.tobytes())
    # Read back: the file must decode to the text, byte for byte.
    check = np.fromfile(args.out, dtype="<u2")
    if check.astype(np.uint8).tobytes() != data or int(check.max()) >= 256:
        sys.exit(f"make_corpus: error: {args.out} does not decode to {args.text}")
    print(f"{os.path.relpath(args.text, REPO_ROOT)}: {len(data)} bytes, "
          f"sha256 {hashlib.sha256(data).hexdigest()[:16]}")
    print(f"{os.path.relpath(args.out, REPO_ROOT)}: {len(tokens)} uint16 tokens "
          f"(max {int(tokens.max())}), sha256 "
          f"{hashlib.sha256(tokens.tobytes()).hexdigest()[:16]}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes the seed corpora that need Python (onnx, numpy) for the harnesses.

    fuzz/make_seeds.py SEEDS_DIR

SEEDS_DIR/importer/: every ONNX text model under test/import (the lit tests'
.onnxtxt files, errors/ included) converted to binary protobuf; files that
are not valid text format (the syntax-error tests) are skipped.
SEEDS_DIR/npy/: small .npy files of every dtype zrun reads, at ranks 0 to 3,
in format versions 1.0 and 2.0, plus the kinds zrun must refuse (Fortran
order, big-endian, an object array, a truncated file).
SEEDS_DIR/arrays/: one input of the arrays harness (ArraysFuzzer.cpp) per
dtype it can make, in each layout, with token-like element bytes.
The binary fixtures and the compiled plans are added by scripts/fuzz.sh.
"""
import io
import os
import pathlib
import sys

import numpy as np
import onnx
from google.protobuf import text_format

ROOT = pathlib.Path(__file__).resolve().parent.parent


def split_file_sections(text):
    """(name, text) per `#--- name` section of a lit split-file test, or the
    whole text as one unnamed section."""
    sections = [("", [])]
    for line in text.splitlines():
        if line.startswith("#--- "):
            sections.append((line[len("#--- "):].strip(), []))
        else:
            sections[-1][1].append(line)
    named = [(name, "\n".join(lines)) for name, lines in sections if name]
    return named or [("", text)]


def write_importer_seeds(out):
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    for path in sorted((ROOT / "test" / "import").rglob("*.onnxtxt")):
        stem = str(path.relative_to(ROOT / "test" / "import"))[: -len(".onnxtxt")]
        for section, text in split_file_sections(path.read_text()):
            model = onnx.ModelProto()
            try:
                text_format.Parse(text, model)
            except text_format.ParseError:
                continue  # a syntax-error test, or not a model
            name = stem + ("-" + section.split(".")[0] if section else "")
            (out / (name.replace("/", "-") + ".onnx")).write_bytes(
                model.SerializeToString())
            written += 1
    return written


def npy_bytes(array, version=None):
    stream = io.BytesIO()
    np.lib.format.write_array(stream, array, version=version,
                              allow_pickle=True)
    return stream.getvalue()


def write_npy_seeds(out):
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    seeds = {}
    for dtype in ["<f4", "<f8", "<i8", "<i4", "|b1", "|i1", "|u1", "<f2"]:
        tag = dtype[1:]
        for shape in [(), (3,), (2, 3), (1, 2, 2)]:
            array = (rng.standard_normal(shape) * 10).astype(dtype)
            rank = len(shape)
            seeds[f"{tag}-rank{rank}.npy"] = npy_bytes(array)
        seeds[f"{tag}-v2.npy"] = npy_bytes(np.zeros((2, 2), dtype), (2, 0))
        seeds[f"{tag}-empty.npy"] = npy_bytes(np.zeros((0, 4), dtype))
    seeds["input-ids-2x16.npy"] = npy_bytes(np.arange(32, dtype="<i8").reshape(2, 16))
    # What zrun refuses; the mutator starts close to each error path.
    seeds["refused-fortran.npy"] = npy_bytes(np.asfortranarray(np.ones((2, 3), "<f4")))
    seeds["refused-big-endian.npy"] = npy_bytes(np.ones((2,), ">f4"))
    seeds["refused-object.npy"] = npy_bytes(np.array([1, "a"], dtype=object))
    seeds["refused-truncated.npy"] = npy_bytes(np.ones((4, 4), "<f4"))[:-5]
    for name, data in seeds.items():
        (out / name).write_bytes(data)
    return len(seeds)


def write_arrays_seeds(out):
    """Inputs of ArraysFuzzer.cpp: 8 bytes of spec (dtype index, ndim, four
    extents, layout bits, the rank asked for), then the elements' bytes."""
    out.mkdir(parents=True, exist_ok=True)
    payload = bytes(range(1, 65))
    count = 0
    # 30 dtypes (ArraysFuzzer.cpp's DTYPES); 2x3 arrays asked for as 2-D,
    # in C order, Fortran order, strided, reversed, read-only, unaligned,
    # and as a list and a scalar.
    for dtype in range(30):
        for layout in (0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40):
            spec = bytes([dtype, 2, 2, 3, 0, 0, layout, 2])
            (out / f"dtype{dtype}-layout{layout:02x}").write_bytes(spec + payload)
            count += 1
    return count


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_seeds.py SEEDS_DIR")
    seeds = pathlib.Path(sys.argv[1])
    importer = write_importer_seeds(seeds / "importer")
    npy = write_npy_seeds(seeds / "npy")
    arrays = write_arrays_seeds(seeds / "arrays")
    print(f"seeds: {importer} importer models from test/import, {npy} .npy files, "
          f"{arrays} array specs")


if __name__ == "__main__":
    main()

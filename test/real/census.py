"""The op-type census of ONNX files against the op types zcc's importer takes.

    census.py --zcc zcc FILE.onnx ...

For each file: every node's (domain, op type), subgraphs and functions
included, with counts, and the op types `zcc --list-ops` does not list (or a
node of a domain other than the default one). Prints one `ok FILE: ...` or
`FAIL FILE: op types zcc does not know: ...` line per file; ops zcc folds only
when their inputs are compile-time constants are named too (`constant-only`),
since whether their inputs are constants shows only at import. Exits 1 if any
file has an op type zcc does not know. Reads the files with onnxwire.py (no
onnx package, no torch).
"""
import argparse
import collections
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnxwire  # noqa: E402


def supported(zcc):
    done = subprocess.run([zcc, "--list-ops"], capture_output=True, text=True, timeout=60)
    if done.returncode != 0 or not done.stdout.strip():
        sys.exit(f"FAIL {zcc} --list-ops: exit {done.returncode}: {done.stderr.strip()}")
    table = {}
    for line in done.stdout.splitlines():
        name, kind = line.split()
        table[name] = kind
    return table


def census(path):
    model = onnxwire.Model(path)
    counts = collections.Counter(model.nodes)
    opsets = ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in model.opsets)
    return counts, f"ir {model.ir_version}, opset {opsets}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--zcc", default="zcc")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    table = supported(args.zcc)
    failed = False
    for file in args.files:
        counts, header = census(file)
        name = pathlib.Path(file).name
        unknown = sorted((op if domain in ("", "ai.onnx") else f"{domain}::{op}", n)
                         for (domain, op), n in counts.items()
                         if domain not in ("", "ai.onnx") or op not in table)
        constant = sorted(op for (domain, op) in counts if table.get(op) == "constant")
        listing = ", ".join(f"{op} {n}" for (_, op), n in sorted(counts.items(),
                                                                 key=lambda kv: kv[0][1]))
        print(f"  {name}: {header}; {sum(counts.values())} nodes: {listing}")
        if unknown:
            failed = True
            print(f"FAIL {name}: op types zcc does not know: "
                  + ", ".join(f"{op} ({n})" for op, n in unknown))
        else:
            print(f"ok {name}: {len(counts)} op types, all known to zcc"
                  + (f"; constant-only: {', '.join(constant)}" if constant else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

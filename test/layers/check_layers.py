"""Checks the runtime's includes against its layer table.

    check_layers.py [--root DIR]

DIR (default: the repository this script is in) holds runtime/README.md,
whose table between `<!-- layers` and `<!-- end of layers -->` gives each
layer its place (a directory or one file) and what it includes: other layers
by name, or single files by path. Every `#include "runtime/..."` in a source
file under runtime/ or python/ must name a file of the same layer or of one
its row lists. Prints each violation as

    FILE:LINE: layer 'A' includes 'PATH' of layer 'B' (A includes: ...)

and exits 1 when there is one; prints the number of includes checked and
exits 0 otherwise. Files of no layer (none under the table's places) are
violations too, so that a new directory gets a row.
"""
import argparse
import os
import re
import sys

SOURCE_SUFFIXES = (".h", ".cpp", ".cu", ".cuh", ".def", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s+"((?:runtime|python)/[^"]+)"')


def read_table(readme):
    text = open(readme, encoding="utf-8").read()
    start = text.find("<!-- layers")
    end = text.find("<!-- end of layers -->")
    if start < 0 or end < 0:
        sys.exit(f"check_layers: no layer table in {readme}")
    layers = {}
    order = []
    for line in text[start:end].splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0] or cells[0] in ("layer",):
            continue
        if set(cells[0]) <= set("-: "):
            continue
        name, where, includes = cells
        where = where.strip("`")
        allowed = set()
        for entry in includes.split(","):
            entry = entry.strip().strip("`")
            if entry and entry not in ("—", "-"):
                allowed.add(entry)
        layers[name] = (where, allowed)
        order.append(name)
    return layers, order


def layer_of(path, layers):
    """The layer whose place holds `path` (repository-relative), the most
    specific place first; None when no place does."""
    best = None
    for name, (where, _) in layers.items():
        if path == where or path.startswith(where.rstrip("/") + "/"):
            if best is None or len(where) > len(layers[best][0]):
                best = name
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root",
        default=os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))))
    args = parser.parse_args()
    layers, _ = read_table(os.path.join(args.root, "runtime", "README.md"))
    problems = []
    checked = 0
    for top in ("runtime", "python"):
        for directory, _, files in os.walk(os.path.join(args.root, top)):
            for file in sorted(files):
                if not file.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.relpath(os.path.join(directory, file), args.root)
                mine = layer_of(path, layers)
                if mine is None:
                    problems.append(f"{path}: in no layer of runtime/README.md")
                    continue
                allowed = layers[mine][1]
                with open(os.path.join(args.root, path), encoding="utf-8",
                          errors="replace") as source:
                    for number, line in enumerate(source, 1):
                        match = INCLUDE.match(line)
                        if not match:
                            continue
                        target = match.group(1)
                        checked += 1
                        theirs = layer_of(target, layers)
                        if theirs == mine or theirs in allowed or \
                                target in allowed:
                            continue
                        problems.append(
                            f"{path}:{number}: layer '{mine}' includes "
                            f"'{target}' of layer '{theirs}' ({mine} "
                            f"includes: {', '.join(sorted(allowed)) or 'none'})")
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} include(s) break the layer order")
        return 1
    print(f"{checked} includes follow the layer order of {len(layers)} layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())

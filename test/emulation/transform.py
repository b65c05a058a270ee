#!/usr/bin/env python3
"""Rewrites one CUDA source (.cu/.cuh) into plain C++ for the SIMT emulator.

Usage: transform.py INPUT OUTPUT

Two source rewrites; everything else is done by macros in Prelude.h:
  - `kernel<T...><<<grid, block[, shared[, stream]]>>>(args...)` becomes
    `emu::launch("File.cu:line kernel<T...>", grid, block, shared, stream,
    [&](auto &...a) { kernel<T...>(a...); }, args...)`; the lambda lets a
    kernel template whose trailing parameters are deduced from the
    arguments (Strided.cuh's body functors) be launched as nvcc would; the
    site names the launch for launch_coverage.py;
  - `extern __shared__ T name[];` (dynamic shared memory of any type)
    becomes `T *name = emu::dynamicShared<T>();`;
  - `__shared__ T name[N]...;` (static shared memory) becomes a function
    static that the first thread of each block to declare it poisons
    (0xff bytes: NaN, -1), as shared memory starts undefined on a device.
Run by CMake at build time on every runtime/cuda/*.cu and *.cuh into the
build tree (test/emulation/CMakeLists.txt); nothing transformed is committed.

After helper B's private emulator (/work/wt/B_emu/transform.py), generalized.
"""
import os
import re
import sys


def split_top(text):
    """Splits `text` at the commas outside any (), <>, [] or {}."""
    parts, depth, current = [], 0, ''
    for ch in text:
        if ch in '(<[{':
            depth += 1
        elif ch in ')>]}':
            depth -= 1
        if ch == ',' and depth == 0:
            parts.append(current.strip())
            current = ''
        else:
            current += ch
    parts.append(current.strip())
    return parts


def kernel_start(src, end):
    """The index where the kernel expression ending before `end` starts:
    an identifier (with ::) optionally followed by balanced <...>."""
    i = end
    while i > 0 and src[i - 1].isspace():
        i -= 1
    if src[i - 1] == '>':
        depth = 0
        while True:
            i -= 1
            if src[i] == '>':
                depth += 1
            elif src[i] == '<':
                depth -= 1
                if depth == 0:
                    break
    while i > 0 and (src[i - 1].isalnum() or src[i - 1] in '_:'):
        i -= 1
    return i


def launch_sites(src, name):
    """The launch sites of a source, as `name:line kernel` (what the
    emulator records for each launch it runs)."""
    sites, pos = [], 0
    while True:
        open_ = src.find('<<<', pos)
        if open_ < 0:
            return sites
        start = kernel_start(src, open_)
        kernel = ' '.join(src[start:open_].split())
        sites.append('%s:%d %s' % (name, src.count('\n', 0, start) + 1, kernel))
        pos = open_ + 3


def rewrite_launches(src, name):
    sites = iter(launch_sites(src, name))
    out, pos = [], 0
    while True:
        open_ = src.find('<<<', pos)
        if open_ < 0:
            break
        close = src.find('>>>', open_)
        if close < 0 or src[close + 3] != '(':
            sys.exit('transform.py: unparsed launch at offset %d' % open_)
        start = kernel_start(src, open_)
        kernel = ' '.join(src[start:open_].split())
        config = split_top(' '.join(src[open_ + 3:close].split()))
        while len(config) < 4:
            config.append('0')
        out.append(src[pos:start])
        out.append('emu::launch("%s", %s, [&](auto &...a) { %s(a...); }, ' %
                   (next(sites), ', '.join(config), kernel))
        # Keep the line numbers of the original (#line below).
        out.append('\n' * src.count('\n', start, close + 4))
        pos = close + 4
    out.append(src[pos:])
    return ''.join(out)


DYNAMIC_SHARED = re.compile(
    r'extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w:<>\s]+?)\s+(\w+)\s*\[\s*\]\s*;')


STATIC_SHARED = re.compile(
    r'^(\s*)__shared__\s+([^;\n]+?)\s+(\w+)((?:\s*\[[^\]\n]+\])*)\s*;', re.M)


def main():
    source, target = sys.argv[1], sys.argv[2]
    with open(source) as f:
        src = f.read()
    src = rewrite_launches(src, os.path.basename(source))
    src = DYNAMIC_SHARED.sub(r'\1 *\2 = emu::dynamicShared<\1>();', src)
    src = STATIC_SHARED.sub(
        r'\1static \2 \3\4; emu::poisonShared(&\3, sizeof(\3));', src)
    with open(target, 'w') as f:
        f.write('// Generated from %s by test/emulation/transform.py.\n' % source)
        f.write('#line 1 "%s"\n' % source)
        f.write(src)


if __name__ == '__main__':
    main()

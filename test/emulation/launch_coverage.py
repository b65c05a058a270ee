#!/usr/bin/env python3
"""Every kernel launch in runtime/cuda runs in the emulated KernelDiff cases.

Usage: launch_coverage.py TEST_BINARY SOURCE_DIR

Runs TEST_BINARY (ZplanKernelDiffEmulatedTests, all cases in one process)
with $ZPLAN_EMULATION_LAUNCHES set, so the emulator writes the launch sites
it ran, and compares them with every `<<<` in runtime/cuda/*.cu(h) (the
sites transform.py names). A site no case reaches is a kernel the diff test
never checks: add a case to test/gpu/KernelDiffTest.cpp, or list it in
UNREACHABLE below with the reason no test can reach it.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transform import launch_sites  # noqa: E402

# Sites no test can reach, with why: by file and kernel, without the line
# (an edit above a site moves it; the file holds one such launch).
UNREACHABLE = {
    # Taken only when a layout's count or an offset reaches 2^30 elements
    # (Strided.cuh's fits32): a 1 GiB tensor at least, too big to fill,
    # copy and emulate in CI. Same template body as the int32_t launch
    # above it; StridedLayoutHostTest checks the int64 index math.
    'Strided.cuh stridedKernel<N, int64_t>':
        'needs a tensor of >= 2^30 elements',
}


def main():
    binary, source_dir = sys.argv[1], sys.argv[2]
    expected = set()
    for path in sorted(glob.glob(os.path.join(source_dir, 'runtime/cuda/*.cu')) +
                       glob.glob(os.path.join(source_dir, 'runtime/cuda/*.cuh'))):
        with open(path) as f:
            expected.update(launch_sites(f.read(), os.path.basename(path)))
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, 'launches')
        env = dict(os.environ, ZPLAN_EMULATION_LAUNCHES=log)
        run = subprocess.run([binary, '--gtest_brief=1'], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        if run.returncode != 0:
            print(run.stdout[-4000:])
            print('launch_coverage: %s failed (exit %d)' % (binary, run.returncode))
            return 1
        with open(log) as f:
            ran = set(line.strip() for line in f if line.strip())
    def unlined(site):
        return re.sub(r':\d+ ', ' ', site, count=1)
    missing = sorted(site for site in expected - ran
                     if unlined(site) not in UNREACHABLE)
    stale = sorted(set(UNREACHABLE) - set(map(unlined, expected)))
    print('launch_coverage: %d launch sites, %d run, %d unreachable (listed)'
          % (len(expected), len(expected & ran), len(UNREACHABLE)))
    for site in missing:
        print('  never launched by any case: ' + site)
    for site in stale:
        print('  UNREACHABLE names a site that no longer exists: ' + site)
    return 1 if missing or stale else 0


if __name__ == '__main__':
    sys.exit(main())

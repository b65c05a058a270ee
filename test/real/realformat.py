"""The lit test format of test/real/ (see lit.local.cfg): a module, so that
lit's worker processes can unpickle it."""
import os
import shutil
import subprocess
import tempfile
import time

import lit.formats
import lit.Test

FAMILIES = ["gpt2", "llama", "llama-tied", "qwen2", "qwen3", "phi3", "gptneox", "opt",
            "gemma"]
EXPORTERS = ["ts17", "dynamo", "optimum"]
PLAIN_CHECKS = ["infer", "gradients", "train", "generate"]
TRAIN_GENERATE = ["llama-tied"]


def expected_failures(path):
    table = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if not line.strip() or line.startswith("#"):
                    continue
                name, _, text = line.partition("\t")
                table[name.strip()] = text.strip()
    return table


class RealFixtures(lit.formats.TestFormat):
    def __init__(self):
        self.here = os.path.dirname(os.path.abspath(__file__))

    def names(self, models):
        for family in FAMILIES:
            if not os.path.exists(os.path.join(models, "goldens", f"{family}.npz")):
                continue
            yield (family, "golden")
            for exporter in EXPORTERS:
                if not os.path.exists(os.path.join(models, f"{family}-{exporter}.onnx")):
                    continue
                yield (family, exporter, "ops")
                checks = PLAIN_CHECKS if exporter != "optimum" else ["generate"]
                if exporter != "optimum" and family in TRAIN_GENERATE:
                    checks = checks + ["train-generate"]
                for check in checks:
                    yield (family, exporter, check)

    def getTestsInDirectory(self, testSuite, path_in_suite, litConfig, localConfig):
        if path_in_suite[-1:] != ("real",):
            return  # a subdirectory (__pycache__): the tests are test/real's own
        models = os.path.join(localConfig.zplan_src_root, "test", "models", "real")
        for name in self.names(models):
            yield lit.Test.Test(testSuite, path_in_suite + name, localConfig)

    def execute(self, test, litConfig):
        config = test.config
        src = config.zplan_src_root
        models = os.path.join(src, "test", "models", "real")
        # ZPLAN_REAL_TOOLS_DIR: run another build's zcc and zrun (e.g. main's).
        tools = os.environ.get("ZPLAN_REAL_TOOLS_DIR") or config.zplan_tools_dir
        name = test.path_in_suite[1:]
        family = name[0]
        python = config.python_executable
        zcc = os.path.join(tools, "zcc")
        out = None
        if name[-1] == "golden":
            command = [python, os.path.join(self.here, "check_real.py"), "--family", family,
                       "--models", models, "--oracle-only"]
        elif name[-1] == "ops":
            command = [python, os.path.join(self.here, "census.py"), "--zcc", zcc,
                       os.path.join(models, f"{family}-{name[1]}.onnx")]
        else:
            # A directory of its own per run: two runs of one test (two people
            # on one build) must not share plans and outputs. Kept on FAIL.
            # Those of earlier runs go after ten minutes.
            parent = os.path.dirname(test.getExecPath())
            os.makedirs(parent, exist_ok=True)
            for old in os.listdir(parent):
                path = os.path.join(parent, old)
                if old.startswith(name[-1] + ".") and time.time() - os.path.getmtime(path) > 600:
                    shutil.rmtree(path, ignore_errors=True)
            out = tempfile.mkdtemp(prefix=name[-1] + ".", dir=parent)
            command = [python, os.path.join(self.here, "check_real.py"), "--zcc", zcc,
                       "--zrun", os.path.join(tools, "zrun"), "--family", family,
                       "--models", models, "--data", os.path.join(src, "data", "gpl-3.0.bin"),
                       "--out", out, "--exporters", name[1], "--checks", name[2]]
        env = dict(os.environ)
        env.update(config.environment)
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env,
                                  timeout=900)
            output, code = done.stdout + done.stderr, done.returncode
        except subprocess.TimeoutExpired as timeout:
            output, code = f"timed out after {timeout.timeout} s", 124
        report = " ".join(command) + "\n" + output
        status, text = self.judge(test, name, code, output, report)
        if out is not None:
            if status in (lit.Test.PASS, lit.Test.XFAIL):
                shutil.rmtree(out, ignore_errors=True)
            else:
                text += f"\nits files: {out}\n"
        return status, text

    def judge(self, test, name, code, output, report):
        key = "/".join(name)
        expected = None
        if os.environ.get("ZPLAN_REAL_STRICT", "") not in ("1", "yes", "true"):
            expected = expected_failures(os.path.join(self.here, "expected-failures.txt")).get(key)
        failed = code != 0 or "\nFAIL " in "\n" + output
        first = next((l for l in output.splitlines() if l.startswith("FAIL ")), "")
        if not failed:
            if expected is not None:
                return lit.Test.XPASS, (report + f"\npasses: remove '{key}' from "
                                        "test/real/expected-failures.txt\n")
            return lit.Test.PASS, report
        if expected is not None:
            if expected in first:
                return lit.Test.XFAIL, report
            return lit.Test.FAIL, (report + f"\nexpected to fail with '{expected}' "
                                   f"(test/real/expected-failures.txt), failed with: {first}\n")
        return lit.Test.FAIL, report


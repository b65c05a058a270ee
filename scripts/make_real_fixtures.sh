#!/usr/bin/env bash
# Runs scripts/make_real_fixtures.py (the real-exporter fixtures and goldens
# under test/models/real/, or --census DIR) in a virtual environment of its own
# with the pinned versions below: .venv-fixtures/ under the repository
# (git-ignored), created on first use, or ZPLAN_FIXTURES_VENV=DIR. Not part of
# setup.sh or CI: only this script needs torch.
#
#   scripts/make_real_fixtures.sh                    # all fixtures -> test/models/real/
#   scripts/make_real_fixtures.sh --only llama       # one family
#   scripts/make_real_fixtures.sh --census /tmp/exports --census-md /tmp/exports/CENSUS.md \
#       --zcc build/bin/zcc                          # the op census of every family
#
# The pins are the versions the committed fixtures were made with
# (TESTED_VERSIONS in the .py, which warns about any other version). transformers
# stays below 4.58 because optimum-onnx 0.1.0 requires transformers<4.58.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${ZPLAN_FIXTURES_VENV:-.venv-fixtures}
python=${PYTHON:-python3}
pins=(torch==2.15.0 transformers==4.57.6 optimum==2.1.0 optimum-onnx==0.1.0
      onnxscript==0.7.2 onnx==1.23.2 onnxruntime==1.32.0 numpy==2.4.6)
have_pins() {
  "$venv/bin/python" - "${pins[@]}" <<'PY' 2>/dev/null
import importlib.metadata as md, sys
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    if md.version(name).split("+")[0] != version:
        sys.exit(1)
PY
}
if [ ! -x "$venv/bin/python" ] || ! have_pins; then
  echo "make_real_fixtures: installing ${pins[*]} into $venv" >&2
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q "${pins[@]}"
  have_pins || { echo "make_real_fixtures: $venv does not hold ${pins[*]}" >&2; exit 1; }
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec "$venv/bin/python" scripts/make_real_fixtures.py "$@"

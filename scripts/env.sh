# Source this file: sets up (or reuses) chromaflow's toolchain outside the clone and puts it on PATH.
#   CHROMAFLOW_CACHE          cache root (default ~/.cache/chromaflow)
#   CHROMAFLOW_REQUIREMENTS   requirements file of the venv (default: this clone's requirements.txt; the
#                             concurrency test in tests/common/test_env_setup.py points it at a one-package file)
#   CHROMAFLOW_SKIP_TOOLS=1   do not install Nextflow (that test only)
#
# * System packages: scripts/install-system-deps --runtime runs first (the main job's only; scripts/install-test-deps
#   adds the tests'); it does nothing (and uses no network) when everything is present, installs what is missing
#   when run as root, and otherwise prints the one apt line to run.
# * The virtualenv holds the pinned dependencies only (installed by scripts/create-venv, with uv), keyed by a hash of
#   requirements.txt (and of scripts/create-venv and scripts/build-moods, which build it), so it is built
#   once and shared by every clone/worktree on the machine. Creation is serialised with flock(1) and
#   committed by a marker written last (.complete): two shells (two CI jobs, two users of one node) that
#   source this at once never build into each other's venv, and a killed build is detected and redone.
# * chromaflow itself is NOT installed into the shared venv: this clone's src/ goes on PYTHONPATH and its
#   bin/ on PATH (bin/chromaflow runs the package next to it), so each clone runs its own code.
_cf_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CHROMAFLOW_CACHE="${CHROMAFLOW_CACHE:-$HOME/.cache/chromaflow}"
"$_cf_root/scripts/install-system-deps" --runtime >&2 || { echo "chromaflow: system set-up failed (see above)" >&2; return 1 2>/dev/null || exit 1; }
_cf_req="${CHROMAFLOW_REQUIREMENTS:-$_cf_root/requirements.txt}"
[ -r "$_cf_req" ] || { echo "chromaflow: requirements file $_cf_req not readable" >&2; return 1 2>/dev/null || exit 1; }
# keyed by the pins and by how the venv is built (a venv with a CPU-specific MOODS, or without bytecode, is not reused)
_cf_hash="$(cat "$_cf_req" "$_cf_root/scripts/create-venv" "$_cf_root/scripts/build-moods" | sha256sum | cut -c1-16)"
export CHROMAFLOW_VENV="$CHROMAFLOW_CACHE/venv-$_cf_hash"
if [ ! -e "$CHROMAFLOW_VENV/.complete" ]; then
    mkdir -p "$CHROMAFLOW_CACHE"
    (
        flock 9
        if [ ! -e "$CHROMAFLOW_VENV/.complete" ]; then   # re-check: another shell may have finished it
            echo "chromaflow: creating virtualenv $CHROMAFLOW_VENV (first run only; torch is several GB)" >&2
            # Nextflow's jars (Maven Central) download meanwhile: a first run waits for the longer of the two, not
            # their sum (in this subshell, so an interactive shell prints no job messages)
            if [ "${CHROMAFLOW_SKIP_TOOLS:-0}" != 1 ]; then
                ( flock 8; "$_cf_root/scripts/install-nextflow" >&2 ) 8>"$CHROMAFLOW_CACHE/.tools.lock" &
                _cf_nxf=$!
            fi
            rm -rf "$CHROMAFLOW_VENV"
            "$_cf_root/scripts/create-venv" "$CHROMAFLOW_VENV" "$_cf_req" &&
            touch "$CHROMAFLOW_VENV/.complete"
            [ -z "${_cf_nxf:-}" ] || wait "$_cf_nxf" || true   # a failure shows again below, in the foreground
        fi
    ) 9>"$CHROMAFLOW_CACHE/.venv-$_cf_hash.lock"
    [ -e "$CHROMAFLOW_VENV/.complete" ] || { echo "chromaflow: virtualenv set-up failed" >&2; return 1 2>/dev/null || exit 1; }
fi
case ":${PYTHONPATH:-}:" in *":$_cf_root/src:"*) ;; *) export PYTHONPATH="$_cf_root/src${PYTHONPATH:+:$PYTHONPATH}";; esac
# this clone's package byte-compiled (compileall only redoes changed files; ~0.3 s for all of it): where
# PYTHONDONTWRITEBYTECODE is set (this machine kind sets it) Python never caches what it compiles, so every command
# and pipeline task compiled the package's modules it imported, ~60 ms a process
"$CHROMAFLOW_VENV/bin/python" -m compileall -q "$_cf_root/src/chromaflow" >/dev/null 2>&1 || true
export PATH="$_cf_root/bin:$CHROMAFLOW_VENV/bin:$PATH"
# Nextflow from Maven Central (see scripts/install-nextflow), cached outside the repo; serialised, so concurrent
# first runs do not resolve into the same folders at once. The test tooling (hadolint, the Groovy parser) is
# scripts/install-test-deps' business: the main job never needs it.
if [ "${CHROMAFLOW_SKIP_TOOLS:-0}" != 1 ]; then
    (
        flock 9
        "$_cf_root/scripts/install-nextflow" >&2
    ) 9>"$CHROMAFLOW_CACHE/.tools.lock"
fi
export PATH="$CHROMAFLOW_CACHE/nextflow/bin:$PATH"
export NXF_OFFLINE="${NXF_OFFLINE:-true}"
unset _cf_root _cf_hash _cf_req

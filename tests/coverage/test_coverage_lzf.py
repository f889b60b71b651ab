"""The LZF encoder of add-coverage's chunks (``bigwig/_kernels.c``: ``lzf_encode``, ``cf_lzf_compress``) writes the
bytes of h5py's own ``lzf_compress`` (the liblzf h5py bundles and registers as HDF5's LZF filter), whose decisions it
repeats with a faster match search: compared here on inputs that reach every branch (literal runs of 32, matches of
3 to 264 bytes and the 8 KiB offset limit, input ends, output buffers that run out), then on the shuffled coverage
rows add-coverage writes."""

from __future__ import annotations

import ctypes
import importlib

import numpy as np
import pytest

from chromaflow.bigwig import _native

_FN = ctypes.CFUNCTYPE(ctypes.c_uint, ctypes.c_void_p, ctypes.c_uint, ctypes.c_void_p, ctypes.c_uint)


@pytest.fixture(scope="module")
def encoders():
    lib = _native.load()
    if lib is None:
        pytest.skip("no C compiler")
    h5z = importlib.import_module("h5py.h5z")
    try:
        ref = _FN(ctypes.cast(ctypes.CDLL(h5z.__file__).lzf_compress, ctypes.c_void_p).value)
    except AttributeError:
        pytest.skip("h5py's h5z extension exports no lzf_compress")
    return lib, ref


def _cases(rng: np.random.Generator) -> list[tuple[np.ndarray, int]]:
    """(input bytes, output capacity) pairs."""
    out = []
    sizes = [*range(41), 100, 263, 264, 265, 266, 267, 300, 1000, 8191, 8192, 8193, 8200, 20_000]
    for n in sizes:
        kinds = [
            np.zeros(n, np.uint8),
            rng.integers(0, 256, n, dtype=np.uint8),
            rng.integers(0, 3, n, dtype=np.uint8),
            np.repeat(rng.integers(0, 4, n), rng.integers(1, 40, n))[:n].astype(np.uint8),
            np.tile(rng.integers(0, 256, 5, dtype=np.uint8), n // 5 + 1)[:n],
            ((rng.random(n) < 0.02) * rng.integers(0, 256, n)).astype(np.uint8),
        ]
        if n > 8300:  # a repeat 8,190-8,194 bytes back: the offset limit
            block = rng.integers(0, 256, 8192 + 3, dtype=np.uint8)
            kinds.append(np.resize(block, n))
            kinds.append(np.resize(block[:-4], n))
        for b in kinds:
            for cap in {n, n // 2, n // 10 + 1, n + 10, max(n - 1, 0), max(n - 3, 0)}:
                out.append((b, cap))
    # shuffled int64 coverage rows (runs of read depth, a padded tail)
    for _ in range(60):
        L = 21_384
        row = np.repeat(rng.integers(0, 300, 600), rng.integers(1, 200, 600))[:L].astype(np.int64)
        row = np.pad(row, (0, L - len(row)), constant_values=-1)
        out.append((row.view(np.uint8).reshape(L, 8).T.ravel().copy(), L * 8))
    return out


def test_lzf_encoder_writes_h5py_bytes(encoders):
    lib, ref = encoders
    cases = _cases(np.random.default_rng(11))
    # and output buffers within 3 bytes of what each compressible input needs (the "output full" tests' edges)
    for b, cap in cases[::7]:
        out = np.zeros(len(b) + 64, np.uint8)
        k = lib.cf_lzf_compress(b.ctypes.data, len(b), out.ctypes.data, len(out))
        cases += [(b, k + d) for d in range(-3, 4) if k and k + d > 0]
    # liblzf leaves its hash table uninitialised, so an entry left by an earlier call can point into a later input
    # and change its bytes; every input here lies above all earlier ones in one buffer, where no such entry can pass
    # liblzf's "ref > start of input" test, so h5py's bytes depend on the input alone
    arena = np.zeros(sum(len(b) for b, _ in cases) + 1, np.uint8)
    pos, differ, full, shortened = 0, [], 0, 0
    for k, (b, cap) in enumerate(cases):
        n = len(b)
        arena[pos : pos + n] = b
        src = arena.ctypes.data + pos
        pos += n
        mine, theirs = np.zeros(cap + 1, np.uint8), np.zeros(cap + 1, np.uint8)
        a = lib.cf_lzf_compress(src, n, mine.ctypes.data, cap)
        h = ref(src, n, theirs.ctypes.data, cap)
        if a != h or mine[:a].tobytes() != theirs[:h].tobytes():
            differ.append((k, n, cap, a, h))
        full += n > 0 and h == 0
        shortened += 0 < h < n // 20
    assert not differ, f"{len(differ)} of {len(cases)} differ (case, bytes, capacity, ours, h5py's): {differ[:5]}"
    assert full > 100 and shortened > 100, (full, shortened)  # both ends reached: output full, long matches

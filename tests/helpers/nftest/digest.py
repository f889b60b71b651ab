#!/usr/bin/env python3
"""Content digests of chromaflow outputs for nf-test snapshots (tests/helpers/nftest/Digest.groovy calls this).

Files whose bytes carry a time stamp or a compression header (h5 attributes, gzip mtime) cannot be
snapshotted by their md5; these digests cover only their content:

  h5 FILE        every dataset: md5 of dtype + shape + values (C order); attributes (timestamps) left out
  bigwig FILE    md5 of the intervals (chrom, start, end, value) of every chromosome, and the chrom sizes
  npz FILE       every array: md5 of dtype + shape + values; 0-d string arrays (JSON meta) as their JSON text
  gz FILE        md5 of the decompressed bytes, and the line count
  ckpt FILE      every tensor of the state dict: md5 of dtype + shape + values; the hyperparameters

Output: one JSON object on stdout, keys sorted.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys

import numpy as np


def _md5_array(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a)
    h = hashlib.md5()
    h.update(f"{a.dtype.str}|{a.shape}|".encode())
    h.update(a.tobytes())
    return h.hexdigest()


def h5(path: str) -> dict:
    import h5py

    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, _md5_array(o[()])) if isinstance(o, h5py.Dataset) else None)
    return out


def bigwig(path: str) -> dict:
    import pyBigWig

    bw = pyBigWig.open(path)
    try:
        h = hashlib.md5()
        for chrom, size in sorted(bw.chroms().items()):
            for s, e, v in bw.intervals(chrom) or ():
                h.update(f"{chrom}\t{s}\t{e}\t{v!r}\n".encode())
        return {"chroms": dict(sorted(bw.chroms().items())), "intervals": h.hexdigest()}
    finally:
        bw.close()


def npz(path: str) -> dict:
    out = {}
    with np.load(path, allow_pickle=False) as z:
        for k in z.files:
            a = z[k]
            out[k] = json.loads(str(a)) if a.dtype.kind == "U" and a.ndim == 0 else _md5_array(a)
    return out


def gz(path: str) -> dict:
    data = gzip.decompress(open(path, "rb").read())
    return {"md5": hashlib.md5(data).hexdigest(), "lines": data.count(b"\n")}


def ckpt(path: str) -> dict:
    import torch

    c = torch.load(path, map_location="cpu", weights_only=True)
    sd = {k: _md5_array(v.detach().cpu().numpy()) for k, v in c["state_dict"].items()}
    hp = c.get("hyper_parameters", {})
    return {"state_dict": sd, "hyper_parameters": json.loads(json.dumps(hp, default=str))}


def main(argv: list[str]) -> int:
    kind, path = argv
    print(json.dumps({"h5": h5, "bigwig": bigwig, "npz": npz, "gz": gz, "ckpt": ckpt}[kind](path), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Content digests of chromaflow outputs for nf-test snapshots (tests/helpers/nftest/Digest.groovy calls this).

Files whose bytes carry a time stamp or a compression header (h5 attributes, gzip mtime) cannot be
snapshotted by their md5; these digests cover only their content:

  h5 FILE        every dataset: md5 of dtype + shape + values (C order); attributes (timestamps) left out
  bigwig FILE    md5 of the intervals (chrom, start, end, value) of every chromosome, and the chrom sizes
  npz FILE       every array: md5 of dtype + shape + values; 0-d string arrays (JSON meta) as their JSON text
  gz FILE        md5 of the decompressed bytes, and the line count
  ckpt FILE      every tensor of the state dict: md5 of dtype + shape + values; the hyperparameters

Output: one JSON object on stdout, keys sorted; with several files (``KIND FILE FILE ...``, Digest.groovy's ``all``:
one Python start instead of one a file) a JSON list of them, in the order given.

A checkpoint is read without torch where it can be (its import is ~4 CPU-s, most of a digest's cost): the zip's
pickle is unpickled with only the classes a tensor checkpoint holds (OrderedDict, tensors rebuilt from their typed
storages as numpy arrays of the same dtype, shape and strides); any other class, or a storage type without a numpy
dtype, falls back to ``torch.load(weights_only=True)``. Both give the same digest (``_md5_array`` of the same values).
"""

from __future__ import annotations

import collections
import gzip
import hashlib
import json
import pickle
import sys
import zipfile

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


#: torch's typed storages (the names a checkpoint's pickle refers to) -> numpy dtypes
_STORAGES = {
    "DoubleStorage": np.float64,
    "FloatStorage": np.float32,
    "HalfStorage": np.float16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class _NoNumpy(Exception):
    """The checkpoint holds something the torch-free reader does not rebuild: torch.load reads it."""


def _rebuild_tensor(storage, offset, size, stride, *_):
    flat = storage[offset:]
    if not size:
        return np.array(flat[0])
    strides = tuple(s * storage.itemsize for s in stride)
    return np.lib.stride_tricks.as_strided(flat, shape=tuple(size), strides=strides, writeable=False)


def _rebuild_parameter(data, *_):
    return data


class _TensorUnpickler(pickle.Unpickler):
    _GLOBALS = {
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    }

    def __init__(self, fh, archive: zipfile.ZipFile, prefix: str):
        super().__init__(fh)
        self.archive, self.prefix = archive, prefix

    def find_class(self, module, name):
        if module == "torch" and name in _STORAGES:
            return _STORAGES[name]
        if (module, name) in self._GLOBALS:
            return self._GLOBALS[(module, name)]
        raise _NoNumpy(f"{module}.{name}")

    def persistent_load(self, pid):
        typename, dtype, key, _location, numel = pid
        if typename != "storage" or not isinstance(dtype, type):
            raise _NoNumpy(str(pid))
        data = self.archive.read(f"{self.prefix}data/{key}")
        return np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<"), count=numel)


def _load_ckpt_numpy(path: str) -> dict:
    with zipfile.ZipFile(path) as z:
        pkl = next(n for n in z.namelist() if n.endswith("/data.pkl"))
        prefix = pkl[: -len("data.pkl")]
        order = z.read(f"{prefix}byteorder").decode().strip() if f"{prefix}byteorder" in z.namelist() else "little"
        if order != "little" or sys.byteorder != "little":
            raise _NoNumpy(f"byte order {order}")
        with z.open(pkl) as fh:
            return _TensorUnpickler(fh, z, prefix).load()


def ckpt(path: str) -> dict:
    try:
        c = _load_ckpt_numpy(path)
        sd = {k: _md5_array(v) for k, v in c["state_dict"].items()}
    except (_NoNumpy, KeyError, StopIteration, zipfile.BadZipFile):
        import torch

        c = torch.load(path, map_location="cpu", weights_only=True)
        sd = {k: _md5_array(v.detach().cpu().numpy()) for k, v in c["state_dict"].items()}
    hp = c.get("hyper_parameters", {})
    return {"state_dict": sd, "hyper_parameters": json.loads(json.dumps(hp, default=str))}


def main(argv: list[str]) -> int:
    kind, *paths = argv
    digest = {"h5": h5, "bigwig": bigwig, "npz": npz, "gz": gz, "ckpt": ckpt}[kind]
    if not paths:
        raise SystemExit(f"usage: digest.py {kind} FILE [FILE ...]")
    out = [digest(p) for p in paths]
    print(json.dumps(out[0] if len(paths) == 1 else out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

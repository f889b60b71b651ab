"""Re-tag wheels that hold no compiled code as ``py3-none-any`` (so another CPython can install them).

``pip wheel`` tags a wheel built by a ``setup.py`` with optional C extensions (SQLAlchemy 1.3 with
``DISABLE_SQLALCHEMY_CEXT=1``) for the building interpreter although it holds only Python files. This rewrites
the WHEEL file's tag and purelib flag and the RECORD hashes, and refuses a wheel that holds a shared library.

  python benchmarks/gpu/purelib_wheel.py built/*.whl --out DIR
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import sys
import zipfile
from pathlib import Path


def retag(src: Path, out_dir: Path) -> Path:
    name, version = src.name.split("-")[:2]
    dst = out_dir / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(src) as zin:
        files = {i.filename: zin.read(i) for i in zin.infolist() if not i.is_dir()}
    if any(f.endswith((".so", ".pyd")) for f in files):
        raise SystemExit(f"{src}: holds compiled code; it cannot be re-tagged as pure Python")
    info = next(f.rsplit("/", 1)[0] for f in files if f.endswith(".dist-info/WHEEL"))
    wheel = files[f"{info}/WHEEL"].decode().splitlines()
    wheel = [
        (
            "Root-Is-Purelib: true"
            if ln.startswith("Root-Is-Purelib:")
            else "Tag: py3-none-any"
            if ln.startswith("Tag:")
            else ln
        )
        for ln in wheel
    ]
    files[f"{info}/WHEEL"] = ("\n".join(dict.fromkeys(wheel)) + "\n").encode()
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for path, data in files.items():
        if path == f"{info}/RECORD":
            continue
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        writer.writerow([path, f"sha256={digest}", len(data)])
    writer.writerow([f"{info}/RECORD", "", ""])
    files[f"{info}/RECORD"] = record.getvalue().encode()
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for path, data in files.items():
            zout.writestr(path, data)
    return dst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wheels", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    for w in a.wheels:
        print(retag(w, a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""GPU utilisation and memory per device from NVML (``nvidia-ml-py``), sampled in a background thread.

Degrades gracefully: without the NVML library, without a GPU or on a CPU run, :meth:`NvmlSampler.result` says
``available: false`` with the reason, and nothing else changes.
"""

from __future__ import annotations

import threading
import time
from typing import Any


def _nvml_handle(pynvml, torch_index: int):
    """NVML handle of torch CUDA device ``torch_index`` (CUDA and NVML numbering differ under
    CUDA_VISIBLE_DEVICES): by UUID, else by PCI bus id, else by index."""
    import torch

    props = torch.cuda.get_device_properties(torch_index)
    uuid = str(getattr(props, "uuid", "") or "")
    if uuid:
        for cand in (uuid, uuid if uuid.startswith("GPU-") else f"GPU-{uuid}"):
            try:
                return pynvml.nvmlDeviceGetHandleByUUID(cand)
            except Exception:  # noqa: BLE001 - try the next identification
                pass
    try:
        # torch's stub (_C/__init__.pyi) lacks the pci_* properties the class has at runtime
        bus = f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"  # type: ignore[attr-defined]
        return pynvml.nvmlDeviceGetHandleByPciBusId(bus)
    except Exception:  # noqa: BLE001
        return pynvml.nvmlDeviceGetHandleByIndex(torch_index)


class NvmlSampler:
    """``with NvmlSampler([0]) as s: ...; s.result()`` -> per-device utilisation (%) and memory (bytes)."""

    def __init__(self, torch_devices: list[int] | None, interval_s: float = 0.2):
        self.torch_devices = list(torch_devices or [])
        self.interval = interval_s
        self.reason: str | None = None
        self.handles: list = []
        self.samples: dict[int, list[tuple[float, int, int]]] = {}
        self.names: dict[int, str] = {}
        self.total: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pynvml: Any = None  # the pynvml module once NVML is initialised

    def __enter__(self) -> "NvmlSampler":
        if not self.torch_devices:
            self.reason = "no CUDA device used (CPU run)"
            return self
        try:
            import pynvml

            pynvml.nvmlInit()
            self._pynvml = pynvml
            for d in self.torch_devices:
                h = _nvml_handle(pynvml, d)
                self.handles.append((d, h))
                name = pynvml.nvmlDeviceGetName(h)
                self.names[d] = name.decode() if isinstance(name, bytes) else str(name)
                self.total[d] = int(pynvml.nvmlDeviceGetMemoryInfo(h).total)
                self.samples[d] = []
        except Exception as exc:  # noqa: BLE001 - any NVML problem: metrics say why, prediction goes on
            self.reason = f"NVML unavailable: {type(exc).__name__}: {exc}"
            self.handles = []
            return self
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="predict-nvml", daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        t = time.perf_counter()
        for d, h in self.handles:
            try:
                util = self._pynvml.nvmlDeviceGetUtilizationRates(h).gpu
                used = self._pynvml.nvmlDeviceGetMemoryInfo(h).used
            except Exception:  # noqa: BLE001
                continue
            self.samples[d].append((t, int(util), int(used)))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._sample()
        if self._pynvml is not None:
            try:
                self._pynvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass

    def result(self) -> dict[str, Any]:
        """Per device: its samples' mean and max utilisation (%) and max memory used, its name and total memory (bytes);
        ``{"available": False, "reason": ...}`` when nothing was sampled."""
        if not self.handles:
            return {"available": False, "reason": self.reason or "no samples"}
        devices = []
        for d, _ in self.handles:
            s = self.samples[d]
            utils = [u for _, u, _ in s]
            devices.append(
                {
                    "cuda_index": d,
                    "name": self.names.get(d),
                    "samples": len(s),
                    "interval_s": self.interval,
                    "utilization_mean_pct": (sum(utils) / len(utils)) if utils else None,
                    "utilization_max_pct": max(utils) if utils else None,
                    "memory_used_max_bytes": max((m for _, _, m in s), default=None),
                    "memory_total_bytes": self.total.get(d),
                }
            )
        return {"available": True, "source": "nvml", "devices": devices}

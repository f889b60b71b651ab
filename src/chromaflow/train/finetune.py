"""Start a new training run from a checkpoint's weights (fine-tuning), possibly with other datasets.

The architecture comes from the checkpoint. Every tensor except the output layer is copied. The output layer
``out`` (Linear(4, D)) has one row per dataset: with ``head="keep"`` the rows of datasets the checkpoint knows are
copied (in the new order) and datasets it does not know keep their fresh, seeded initialisation; with
``head="reset"`` the whole layer stays freshly initialised.
"""

from __future__ import annotations

import torch

from ..utils.errors import ChromaflowError


def init_from(module, base, *, head: str = "keep") -> list[str]:
    """Copy ``base`` (a :class:`chromaflow.model.checkpoint.Checkpoint`) into ``module``; returns notes."""
    sd = module.state_dict()
    notes = []
    for k, v in base.state_dict.items():
        if k.startswith("out."):
            continue
        if k not in sd or tuple(sd[k].shape) != tuple(v.shape):
            raise ChromaflowError(f"{base.path}: {k} does not fit the model")  # cannot happen: same hparams
        sd[k] = v.clone()
    old = list(base.config.datasets)
    new = list(module.datasets)
    if head == "keep":
        kept = []
        for j, name in enumerate(new):
            if name in old:
                i = old.index(name)
                sd["out.weight"][j] = base.state_dict["out.weight"][i]
                sd["out.bias"][j] = base.state_dict["out.bias"][i]
                kept.append(name)
        fresh = [n for n in new if n not in old]
        notes.append(f"output layer: kept rows {', '.join(kept) or '-'}; new rows {', '.join(fresh) or '-'}")
    else:
        notes.append("output layer: reset (new rows for " + ", ".join(new) + ")")
    with torch.no_grad():
        module.load_state_dict(sd, strict=True)
    return notes

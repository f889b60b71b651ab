"""Training, fine-tuning and evaluation of Predmoter-compatible models (PyTorch Lightning).

* :mod:`.data`: Predmoter's targets, masks, chunk filter, blacklist and dataset filler (streaming or in-RAM
  compressed datasets, the epoch-seeded sampler; no Lightning import, so evaluation starts without it);
* :mod:`.datamodule`: the LightningDataModule that serves them to the Trainer;
* :mod:`.module`: the LightningModule (network from :mod:`chromaflow.model.network`, Poisson NLL on log-rates,
  Pearson metric, Adam), saving checkpoints real Predmoter loads;
* :mod:`.cli_train` (``chromaflow train``), :mod:`.cli_evaluate` (``chromaflow evaluate``, Predmoter's test mode).
"""

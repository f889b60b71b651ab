"""Training, fine-tuning and evaluation of Predmoter-compatible models (PyTorch Lightning).

* :mod:`.data`: Predmoter's targets, masks, chunk filter, blacklist and dataset filler as a LightningDataModule
  (streaming or in-RAM compressed);
* :mod:`.module`: the LightningModule (network from :mod:`chromaflow.predict.model`, Poisson NLL on log-rates,
  Pearson metric, Adam), saving checkpoints real Predmoter loads;
* :mod:`.cli_train` (``chromaflow train``), :mod:`.cli_evaluate` (``chromaflow evaluate``, Predmoter's test mode).
"""

"""Training, fine-tuning and evaluation of Predmoter-compatible models (PyTorch Lightning).

* :mod:`.data`: Predmoter's targets, masks, chunk filter, blacklist and dataset filler (streaming or in-RAM
  compressed datasets, the epoch-seeded sampler; no Lightning import, so evaluation starts without it);
* :mod:`.datamodule`: the LightningDataModule that serves them to the Trainer;
* :mod:`.module`: the LightningModule (network from :mod:`chromaflow.model.network`, Poisson NLL on log-rates,
  Pearson metric, Adam), saving checkpoints real Predmoter loads;
* :mod:`.core`: the training run (:class:`~.core.TrainOptions`, validated once, and :func:`~.core.run`), usable
  from Python; :mod:`.evaluate`: Predmoter's test mode (:class:`~.evaluate.EvaluateOptions`, :func:`~.evaluate.run`);
* :mod:`.cli_train` (``chromaflow train``), :mod:`.cli_evaluate` (``chromaflow evaluate``): the thin commands that
  parse the options and call those cores.
"""

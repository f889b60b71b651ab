"""The model every stage shares: Predmoter's network and its checkpoint format.

* :mod:`.hparams`: the hyperparameter table (Predmoter's 16 ``hyper_parameters`` keys), Predmoter's defaults, the
  architecture presets, the one declaration of the architecture options (``--model-type`` ... ``--dropout``) that
  ``train`` and ``make-test-model`` parse, and the hyperparameters of a new model;
* :mod:`.network`: :class:`~.network.ModelConfig` (checked ``hyper_parameters``) and
  :class:`~.network.PredmoterNet` (the ``cnn`` / ``hybrid`` / ``bi-hybrid`` network, Predmoter's state_dict keys);
* :mod:`.checkpoint`: safe loading of Predmoter's and our ``.ckpt`` files (no code from the pickle runs), the model
  built from one, and seeded test checkpoints;
* :mod:`.cli_testmodel`: ``chromaflow make-test-model``.

Read by ``predict``, ``variant-effect``, ``train`` / ``evaluate`` and ``make-test-model``; it imports none of them.
"""

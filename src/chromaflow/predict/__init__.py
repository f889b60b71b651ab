"""Predmoter-compatible prediction: model rebuild, safe checkpoint loading, streaming engine, sharding.

:mod:`.core` is the prediction run (:class:`~.core.PredictOptions`, validated once, and :func:`~.core.run`), usable
from Python; :mod:`.cli_predict` (``chromaflow predict``) is the thin command that parses the options and calls it.
"""

"""What every stage's command shares, one module a concern (scikit-learn's ``sklearn.utils`` is the model).

``errors`` (the one-line errors) is the module most of the package imports; the others are imported by commands
and the stages that need them: ``outputs`` (the output rule, atomic outputs, locks), ``signals`` (stop signals),
``progress`` (a bar on a terminal), ``metrics`` (the metrics JSON of a stage), ``inputs`` (opening an h5 input),
``sharding`` (I/N parts), ``cli_options`` (the options every command shares), ``versions`` (``chromaflow
versions``). Named ``utils``, not ``core``: each stage's package has a ``core`` module (its options and ``run``),
and this package is not one of them. Nothing here imports a stage.
"""

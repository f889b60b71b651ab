"""GENIE3 gene-regulatory-network inference (tree-ensemble feature importances).

Modules: :mod:`.expression` (expression matrix and regulators parsing), :mod:`.links` (link ranking, the
link-list and weight-matrix writers, their C kernel), :mod:`.parts` (chunk part files), :mod:`.core` (per-target
driver, seeding,
options), :mod:`.skengine` (scikit-learn baseline engine with unnormalised MDI), :mod:`.fast` (small C kernel
compiled at run time, loaded with ctypes), :mod:`.report` (summary JSON and plot), :mod:`.prior` /
:mod:`.prior_relabel` / :mod:`.prior_check` / :mod:`.prior_gate` (the ``--prior`` table and its three checks: the
relabelling test, the default; the correlation test; the prediction gate), :mod:`.network` (the core of
``genie3``: its options, validated, and the run), :mod:`.cli` / :mod:`.cli_merge` / :mod:`.cli_plan` (the three
subcommands), :mod:`.dream4` (scoring against a DREAM4 gold standard: the tests' and the benchmarks' scorer).
See docs/genie3.md.
"""

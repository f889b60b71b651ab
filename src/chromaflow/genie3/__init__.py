"""GENIE3 gene-regulatory-network inference (tree-ensemble feature importances).

Modules: :mod:`.io` (expression/regulator parsing, link-list and weight-matrix writers, chunk parts),
:mod:`.core` (per-target driver, seeding, options), :mod:`.skengine` (scikit-learn baseline engine with
unnormalised MDI), :mod:`.fast` (small C kernel compiled at run time, loaded with ctypes),
:mod:`.report` (summary JSON and plot), :mod:`.cli` / :mod:`.cli_merge` (the two subcommands).
See docs/genie3.md.
"""

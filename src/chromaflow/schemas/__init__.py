"""JSON schemas the package and the pipeline share: ``assembly.json`` (an assembly's id and species rule)."""

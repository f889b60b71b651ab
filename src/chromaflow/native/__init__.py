"""The package's C kernels: building them once per source and flags (:mod:`.build`) and compiling all of them ahead
of time for container images (:mod:`.prebuild`)."""

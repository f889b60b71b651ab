"""``chromaflow peaks``: narrowPeak calls on a predicted track, equal to MACS3 ``bdgpeakcall`` (docs/peaks.md)."""

"""Predmoter-compatible prediction: model rebuild, safe checkpoint loading, streaming engine, sharding."""

"""Benchmarks: each one a ratio against the raw operation it cannot beat (`make bench`)."""

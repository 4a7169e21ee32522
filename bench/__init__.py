"""Benchmarks (not part of ``make test``): ``python -m bench.run [--only NAME]``; see docs/benchmarks.md."""

"""Benchmarks that print ratios against reference implementations (python -m bench)."""

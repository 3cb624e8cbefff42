"""Test tools that tests and benchmarks share (a scripted streaming server)."""

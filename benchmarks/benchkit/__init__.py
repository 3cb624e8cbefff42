"""Code that several benchmark scripts share (the scripts themselves never import each other).

A script runs as ``PYTHONPATH=src python benchmarks/NAME.py``, so this folder, beside it, is on its
``sys.path`` and ``from benchkit.MODULE import ...`` works from any of them.
"""

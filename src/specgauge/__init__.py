"""specgauge: does speculative decoding pay off on your workload?"""

__version__ = "0.1.0"

"""Coverage of the paired bootstrap intervals on synthetic data with a known ratio.

    PYTHONPATH=src python benchmarks/ci_coverage.py [--draws 400]

Prints, per estimator and scheme, the share of draws whose 95% interval contains the true ratio
and the median interval width (paired vs within-arm on the same data).
"""

from __future__ import annotations

import argparse

import numpy as np

from specgauge.analysis.paired import ratio_of_statistic, ratio_of_sums

TRUE_RATIO = 1.5


def draw_requests(rng: np.random.Generator, n: int, paired: bool):
    prompt_effect = rng.lognormal(0.0, 0.4, n)
    base = 100 * prompt_effect * rng.lognormal(0, 0.1, n)
    spec_effect = prompt_effect if paired else rng.lognormal(0.0, 0.4, n)
    return base, TRUE_RATIO * 100 * spec_effect * rng.lognormal(0, 0.1, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=400)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(2026)
    for label, paired in (("ratio of means, paired requests", True), ("ratio of means, within arm", False)):
        hits, widths = 0, []
        for _ in range(args.draws):
            base, spec = draw_requests(rng, args.requests, paired)
            ci = ratio_of_statistic(base, spec, paired=paired, rng=rng, resamples=args.resamples).ci
            hits += ci.ci_low <= TRUE_RATIO <= ci.ci_high
            widths.append(ci.ci_high - ci.ci_low)
        print(f"{label:<40} coverage {hits / args.draws:.3f}  median width {np.median(widths):.3f}")
    hits, widths = 0, []
    for _ in range(args.draws):
        tokens = rng.integers(20, 200, args.requests).astype(float)
        base_s = tokens * 0.01 * rng.lognormal(0, 0.15, args.requests)
        spec_s = tokens * 0.01 / TRUE_RATIO * rng.lognormal(0, 0.15, args.requests)
        ci = ratio_of_sums(tokens, base_s, tokens, spec_s, paired=True, rng=rng, resamples=args.resamples).ci
        hits += ci.ci_low <= TRUE_RATIO <= ci.ci_high
        widths.append(ci.ci_high - ci.ci_low)
    print(f"{'throughput ratio of sums, paired':<40} coverage {hits / args.draws:.3f}  "
          f"median width {np.median(widths):.3f}")
    base, spec = draw_requests(rng, args.requests, True)
    paired_ci = ratio_of_statistic(base, spec, paired=True, rng=rng, resamples=args.resamples).ci
    unpaired_ci = ratio_of_statistic(base, spec, paired=False, rng=rng, resamples=args.resamples).ci
    print(f"same paired data: paired width {paired_ci.ci_high - paired_ci.ci_low:.3f}, "
          f"within-arm width {unpaired_ci.ci_high - unpaired_ci.ci_low:.3f}")


if __name__ == "__main__":
    main()

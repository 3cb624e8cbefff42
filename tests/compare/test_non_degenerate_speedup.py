"""The single-stream speedup over the outputs that do not loop: pairs whose baseline or speculative
output repeats itself are left out (and counted), because looping text is easy to draft."""

import numpy as np

from specgauge.analysis.health import is_degenerate
from specgauge.analysis.results import Crossover, RatioCI, SingleStreamDomain
from specgauge.analysis.verdict import verdict_lines
from specgauge.client.records import RequestRecord, TokenCountSource
from specgauge.compare.collect import non_degenerate_speedup

MS = 1_000_000
PROSE = ("The quick brown fox jumps over the lazy dog while a small bird sings in the old oak tree near "
         "the river, and children walk home from school talking about their day and the games")
LOOP = "return x\n" * 30


def record(index: int, seconds: float, text: str, tokens: int = 40) -> RequestRecord:
    return RequestRecord(request_index=index, prompt_index=index, t_send_ns=0,
                         chunk_times_ns=[1 * MS, int(seconds * 1e9)],
                         chunk_tokens=[1, tokens - 1], t_end_ns=int(seconds * 1e9), output_text=text,
                         token_count_source=TokenCountSource.SERVER)


def test_looping_pairs_are_left_out_and_counted():
    assert is_degenerate(LOOP) and not is_degenerate(PROSE)
    # four plain pairs at 1.2x, two looping pairs at 4x: all pairs would read far above 1.2x
    pairs = [(record(i, 1.2, PROSE), record(i, 1.0, PROSE)) for i in range(4)]
    pairs += [(record(4, 2.0, LOOP), record(4, 0.5, LOOP)), (record(5, 2.0, PROSE), record(5, 0.5, LOOP))]
    ratio, left_out = non_degenerate_speedup(pairs, np.random.default_rng(0), 200)
    assert left_out == 2 and ratio.pairs == 4
    assert abs(ratio.ratio - 1.2) < 1e-9 and ratio.ci_low <= 1.2 <= ratio.ci_high


def test_only_looping_pairs_give_no_figure():
    pairs = [(record(0, 2.0, LOOP), record(0, 0.5, LOOP))]
    assert non_degenerate_speedup(pairs, np.random.default_rng(0), 50) == (RatioCI(), 1)


def test_the_verdict_gives_the_figure_beside_the_all_outputs_one():
    coding = SingleStreamDomain(domain="coding", baseline_tok_s=10.0, speculative_tok_s=25.0, speedup=2.5, ci_low=2.1,
                                ci_high=2.9, accept_length=3.2, pairs=8, degenerate_pairs=3,
                                non_degenerate=RatioCI(ratio=1.8, ci_low=1.5, ci_high=2.2, method="paired_requests",
                                                       pairs=5))
    lines = verdict_lines("EAGLE-3", [coding], [], Crossover(kind="insufficient"))
    assert "speeds up single-stream coding 2.50x [2.10, 2.90]" in lines[0]
    assert ("Over the outputs that do not repeat themselves (looping text is easy to draft): "
            "coding 1.80x [1.50, 2.20] (3 of 8 pairs left out).") in lines

"""The speculation controller: disable-above switching and the adaptive cost model's choice of k
from measured step times and running acceptance (pure Python, scripted machine timings)."""

import math
import statistics
from collections import deque

from specgauge.engine.speculative.config import SpeculativeConfig
from specgauge.engine.speculative.control import SpeculationController
from specgauge.engine.speculative.cost_model import StepTimes, bucket_of
from specgauge.engine.speculative.step_report import StepReport


def decode_report(k, figures):
    """The report of a steady decode step with ``k`` drafts: per request (proposed, accepted)."""
    return StepReport(k=k, decoding=len(figures), pure_decode=True,
                      verdicts={f"r{i}": figure for i, figure in enumerate(figures)})


def drive(controller, batch, step_time, accepted_of, steps=300):
    """Run ``steps`` decode steps: the controller picks k, the scripted machine answers."""
    chosen = []
    for _ in range(steps):
        k = controller.choose(batch)
        figures = [(k, accepted_of(k)) for _ in range(batch)] if k else [(0, 0)] * batch
        controller.observe(decode_report(k, figures), step_time(batch, k))
        chosen.append(k)
    return chosen


def test_disable_above_switches_by_running_requests():
    controller = SpeculationController.build(4, tree=False, disable_above=8, adaptive=False)
    assert [controller.choose(n) for n in (1, 8, 9, 64, 8, 2)] == [4, 4, 0, 0, 4, 4]
    assert controller.mode == "speculative"
    controller.choose(9)
    assert controller.mode == "plain" and controller.current_k == 0


def test_adaptive_speculates_at_batch_1_and_stops_when_verify_is_expensive():
    # a verify of k drafts costs 1 + 0.15 k at batch 1 but grows ~linearly with B*(k+1) at batch 64
    def step_time(batch, k):
        return 0.008 * (1 + 0.15 * k) if batch == 1 else 0.0006 * batch * (k + 1)

    high_acceptance = lambda k: k if k < 3 else 3  # noqa: E731  (3 of the first drafts accepted)
    single = SpeculationController.build(4, tree=False, disable_above=None, adaptive=True)
    picks = drive(single, 1, step_time, high_acceptance)
    assert max(set(picks[-100:]), key=picks[-100:].count) >= 3
    busy = SpeculationController.build(4, tree=False, disable_above=None, adaptive=True)
    picks = drive(busy, 64, step_time, high_acceptance)
    assert max(set(picks[-100:]), key=picks[-100:].count) == 0
    assert 0 in picks and 4 in picks  # every candidate was measured
    assert busy.costs.expected_tokens(0) == 1.0 and 3.0 < busy.costs.expected_tokens(4) < 4.1


def test_adaptive_turns_off_when_nothing_is_accepted():
    controller = SpeculationController.build(3, tree=False, disable_above=None, adaptive=True)
    picks = drive(controller, 1, lambda b, k: 0.008 * (1 + 0.3 * k), lambda k: 0)
    assert picks[-50:].count(0) >= 45  # re-exploration now and then, otherwise off


def test_tree_candidates_are_off_or_the_whole_tree():
    spec = SpeculativeConfig(algorithm="EAGLE3", num_steps=3, eagle_topk=4, num_draft_tokens=8)
    controller = SpeculationController.build(spec.max_drafts, spec.is_tree, None, True)
    assert controller.candidates == (0, 7)
    assert spec.lookahead == 8  # the draft head's scratch nodes: (steps - 1) * topk
    assert [bucket_of(n) for n in (1, 2, 3, 5, 64, 65)] == [1, 2, 4, 8, 64, 128]


def test_a_new_batch_size_is_predicted_from_a_measured_one_not_swept():
    def step_time(batch, k):
        return 0.004 * (1 + 0.1 * k) * (1 + 0.05 * batch)

    controller = SpeculationController.build(4, tree=False, disable_above=None, adaptive=True)
    drive(controller, 1, step_time, lambda k: k, steps=60)  # every draft accepted: k = 4 pays
    early = drive(controller, 2, step_time, lambda k: k, steps=6)
    assert set(early) <= {0, 4}  # plain steps for the baseline, then the predicted best — no sweep
    assert controller.costs.predicted_time(2, 3) is not None and early[-1] == 4


def test_expected_tokens_of_k_come_from_what_steps_with_k_drafts_gave_pooled_over_batch_sizes():
    """Chains cut short (min-draft-prob): the position model alone would overestimate k's yield;
    the measured one is used once seen often enough, at every batch size (acceptance is the
    drafter's and the text's: a bucket's own first few request-steps are too few to go by)."""
    controller = SpeculationController.build(4, tree=False, disable_above=None, adaptive=False)
    assert controller.choose(2) == 4  # the steps below ran with 4 drafts
    # per step: a chain cut after its first draft, which was accepted, and one whose head was
    # unsure at the first draft: none proposed
    for _ in range(8):
        controller.observe(decode_report(4, [(1, 1), (0, 0)]), 0.01)
    assert controller.costs.expected_tokens(4) > 2.0  # too few request-steps: the position model
    for _ in range(10):  # (the counts decay slowly: 20 request-steps count as ~19.8)
        controller.observe(decode_report(4, [(1, 1), (0, 0)]), 0.01)
    assert abs(controller.costs.expected_tokens(4) - 1.5) < 0.01  # 1 + half a draft per request-step
    controller.choose(64)  # a busier batch: its steps add to the same pool
    for _ in range(40):
        controller.observe(decode_report(4, [(1, 1)]), 0.01)
    assert 1.7 < controller.costs.expected_tokens(4) < 1.9
    assert controller.costs.expected_tokens(0) == 1.0


def test_steps_with_a_catch_up_backlog_or_a_prefill_do_not_teach_the_cost_model():
    assert StepReport(k=4, decoding=3, pure_decode=True, catch_up=3 * 5).steady
    assert not StepReport(k=4, decoding=3, pure_decode=True, catch_up=3 * 5 + 1).steady
    assert not StepReport(k=4, decoding=3, pure_decode=False).steady
    assert not StepReport(k=0, decoding=0, pure_decode=True).steady


def test_a_step_report_teaches_the_yield_of_requests_that_could_draft_and_the_time_of_steady_steps():
    controller = SpeculationController.build(4, tree=False, disable_above=None, adaptive=False)
    assert controller.choose(2) == 4
    skipped = frozenset({"b"})  # its backlog after an off period was not caught up: a cost of switching on
    controller.observe(StepReport(k=4, decoding=2, verdicts={"a": (4, 2), "b": (0, 0)}, ineligible=skipped), 0.02)
    assert controller.costs.yields[4] == [2.0, 1.0] and controller.costs.cells[(2, 4)].count == 1
    controller.choose(2)
    controller.observe(StepReport(k=4, decoding=2, pure_decode=False, verdicts={"a": (4, 4), "b": (4, 4)}), 0.5)
    assert controller.costs.yields[4][1] > 2.9  # both requests' yields count ...
    assert controller.costs.cells[(2, 4)].count == 1  # ... but beside a prefill chunk the step's time does not


def test_probes_hold_three_steps_and_a_clear_loser_is_re_probed_ever_less_often():
    import itertools

    def step_time(batch, k):
        return 0.008 * (1 + 0.2 * k) if batch == 1 else 0.0006 * batch * (k + 1)

    one = lambda k: min(k, 1)  # noqa: E731  (the first draft accepted: spec ~1.1x plain at batch 1)
    single = SpeculationController.build(4, tree=False, disable_above=None, adaptive=True, self_cutting=True)
    assert single.candidates == (0, 4)
    picks = drive(single, 1, step_time, one, steps=400)
    assert picks[-100:].count(4) > 80  # speculation is the choice ...
    runs = [len(list(group)) for k, group in itertools.groupby(picks[50:]) if k == 0]
    assert runs and all(n == 3 for n in runs)  # ... and plain is re-measured 3 steps at a time
    busy = SpeculationController.build(4, tree=False, disable_above=None, adaptive=True, self_cutting=True)
    picks = drive(busy, 64, step_time, one, steps=4000)
    # 2.5x a plain step's time per token: measured in alternation with plain steps until 8 pairs
    # of neighbours are in, then probed 3 steps at a time, each interval twice the last, up to 768
    assert len(busy.costs.pairs[64]) >= 8 and picks[300:].count(4) <= 3 * 7
    starts = [i for i, k in enumerate(picks) if i > 20 and k == 4 and picks[i - 1] == 0]
    assert starts and all(picks[i:i + 3] == [4, 4, 4] for i in starts)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert gaps == sorted(gaps) and gaps[-1] >= 16 * 48


def _verify_heavy(batch, k):
    """Scripted machine: a draft costs 20% of a step at batch 1; at batch >= 4 a verify's cost
    grows with B * (1 + k), so speculation loses there by far."""
    return 0.008 * (1 + 0.2 * k) if batch == 1 else 0.0006 * batch * (k + 1)


def test_a_batch_larger_than_one_where_speculation_lost_is_not_speculated_at_all():
    controller = SpeculationController.build(4, tree=False, disable_above=None, adaptive=True, self_cutting=True)
    drive(controller, 8, _verify_heavy, lambda k: min(k, 1), steps=200)
    assert controller.costs.measured(8, 4)  # nothing below 8: speculation was measured there ...
    picks = drive(controller, 32, _verify_heavy, lambda k: min(k, 1), steps=300)
    assert set(picks) == {0}  # ... and at 32 its prediction from 8 (2.5x the time, 1.25x the tokens) is believed


def test_a_batch_smaller_than_one_where_speculation_lost_measures_it():
    controller = SpeculationController.build(4, tree=False, disable_above=None, adaptive=True, self_cutting=True)
    drive(controller, 64, _verify_heavy, lambda k: min(k, 1), steps=200)
    picks = drive(controller, 1, _verify_heavy, lambda k: k, steps=100)  # every draft accepted at batch 1
    assert picks[-50:].count(4) >= 45  # a larger batch's loss says nothing about a smaller one


def test_a_probe_that_confirms_the_choice_doubles_the_interval_to_the_next():
    import itertools

    from specgauge.engine.speculative.control import MAX_REFRESH, REFRESH

    controller = SpeculationController.build(4, tree=False, disable_above=None, adaptive=True, self_cutting=True)
    picks = drive(controller, 1, _verify_heavy, lambda k: min(k, 1), steps=4000)  # spec ~1.1x: plain within 15%
    starts, at = [], 0
    for k, group in itertools.groupby(picks):
        if k == 0 and at > 10:
            starts.append(at)
        at += len(list(group))
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert len(gaps) >= 4 and gaps == sorted(gaps)  # plain re-measured ever less often ...
    assert gaps[0] < 4 * REFRESH and MAX_REFRESH <= gaps[-1] <= MAX_REFRESH + 4  # ... up to the cap


def test_a_draining_batch_does_not_skew_the_time_of_a_full_one():
    def plain_step(batch):
        return 0.003 + 0.0005 * batch  # a fixed cost and one per request

    controller = SpeculationController.build(4, tree=False, disable_above=None, adaptive=True, self_cutting=True)
    for _ in range(8):
        controller.observe(decode_report(0, [(0, 0)] * 16), plain_step(16))
    for _ in range(8):
        controller.observe(decode_report(0, [(0, 0)] * 9), plain_step(9))  # the batch drains: 9 left, still bucket 16
    # scaled in proportion to 16 these steps read 0.0133 s; the estimate at 16 is taken from steps of 16
    assert abs(controller.costs.predicted_time(16, 0) - plain_step(16)) < 1e-9
    assert abs(controller.costs.predicted_time(9, 0) - plain_step(9)) < 1e-9


def test_off_or_on_is_judged_on_neighbouring_steps_so_the_machine_drifting_does_not_decide():
    import itertools
    import math

    clock = itertools.count()

    def drifting(batch, k):  # the full draft costs 3x a plain step; the machine's speed swings 2.6x
        return 0.01 * (3.0 if k else 1.0) * (1.8 + 0.8 * math.sin(next(clock) / 25))

    controller = SpeculationController.build(4, tree=False, disable_above=None, adaptive=True, self_cutting=True)
    assert controller.paired
    picks = drive(controller, 16, drifting, lambda k: 1, steps=1500)  # 2 tokens a step: 0.67x of plain
    assert abs(statistics.median(controller.costs.pairs[16]) - 3.0) < 0.05  # each pair shares its moment's speed
    assert picks[300:].count(4) <= 4 * 3  # plain, but for a few probes


def test_a_near_tie_goes_to_plain_and_a_clear_gain_to_the_draft():
    def picks_at(time_ratio):  # every chain gets 1 draft accepted: 2 tokens a step
        controller = SpeculationController.build(4, tree=False, disable_above=None, adaptive=True, self_cutting=True)
        picks = drive(controller, 8, lambda b, k: 0.01 * (time_ratio if k else 1.0), lambda k: 1, steps=400)
        return picks[100:]

    assert picks_at(1.95).count(4) <= 4 * 3  # 1.03x of plain on the model: plain, but for probes
    assert picks_at(1.80).count(4) >= 280  # 1.11x: the draft


def test_the_paired_view_shows_each_measured_bucket_and_the_choice_made_there():
    controller = SpeculationController.build(4, tree=False, disable_above=None, adaptive=True, self_cutting=True)
    picks = drive(controller, 8, lambda b, k: 0.01 * (1.95 if k else 1.0), lambda k: 1, steps=400)
    [(bucket, ratio, tokens, pairs, choice)] = controller.paired_view()
    assert (bucket, choice) == (8, 0) and pairs >= 8 and abs(ratio - 1.95) < 1e-9 and abs(tokens - 2.0) < 1e-9
    assert picks[-1] == choice  # a near-tie (1.03x on the model): the view and the controller agree on plain


def test_a_noisy_near_tie_is_measured_until_its_pairs_settle_it_and_a_clear_call_is_not():
    import random

    from specgauge.engine.speculative.cost_model import PAIRS_KEEP

    def picks_at(time_ratio, seed=3):  # every chain gets 1 draft accepted: 2 tokens a step
        noise = random.Random(seed)
        controller = SpeculationController.build(4, tree=False, disable_above=None, adaptive=True, self_cutting=True)
        picks = drive(controller, 1, lambda b, k: 0.01 * (time_ratio if k else 1.0) * noise.lognormvariate(0, 0.3),
                      lambda k: 1, steps=600)
        return controller, picks

    near, picks = picks_at(1.80)  # 1.11x on the model, 6% over the 5% line, each step +-30%
    alternating = picks.index(4)  # two plain steps, two draft steps, ... the second of each paired
    assert picks[alternating:alternating + 8] == [4, 4, 0, 0, 4, 4, 0, 0]
    settled_at = next(i for i in range(alternating, len(picks)) if picks[i:i + 12] in ([4] * 12, [0] * 12))
    assert settled_at - alternating >= 2 * 2 * 8  # not decided on the first 8 pairs ...
    assert near.settled(1) and 8 < len(near.costs.pairs[1]) <= PAIRS_KEEP  # ... but on the pairs it took to settle it
    clear, picks = picks_at(1.25)  # 1.6x: a few pairs are enough
    assert clear.settled(1) and picks[60:].count(4) >= 500


def test_time_ratios_are_fitted_non_decreasing_in_the_batch_size():
    import itertools

    from specgauge.engine.speculative.cost_model import monotone_ratios

    fitted = monotone_ratios({1: deque([2.6] * 8), 2: deque([2.0] * 24), 4: deque([2.2] * 8), 8: deque([3.0] * 8)})
    assert abs(fitted[1] - fitted[2]) < 1e-12 and 2.0 < fitted[1] < 2.6  # out of line: pooled, by weight
    assert fitted[1] < fitted[4] and abs(fitted[4] - 2.2) < 1e-9 and abs(fitted[8] - 3.0) < 1e-9  # in line: as measured
    assert abs(fitted[2] - math.exp((8 * math.log(2.6) + 24 * math.log(2.0)) / 32)) < 1e-12

    # 2.5 tokens a verify; 4 streams read the draft 2.1x a plain step on many pairs (on), a single
    # stream 2.45x on its first few (off on its own): the fit pools them and the single stream drafts
    accepted = itertools.cycle([1, 2])
    controller = SpeculationController.build(4, tree=False, disable_above=None, adaptive=True, self_cutting=True)
    drive(controller, 4, lambda b, k: 0.01 * (2.1 if k else 1.0), lambda k: next(accepted), steps=200)
    picks = drive(controller, 1, lambda b, k: 0.01 * (2.45 if k else 1.0), lambda k: next(accepted), steps=200)
    assert picks[-100:].count(4) >= 90
    assert 2.1 < controller.costs.ratio(1, 4) == controller.costs.ratio(4, 4) < 2.45  # one pooled figure


def test_a_larger_batch_is_predicted_with_the_ratio_growing_as_it_grew_below():
    controller = SpeculationController.build(4, tree=False, disable_above=None, adaptive=True, self_cutting=True)
    drive(controller, 4, lambda b, k: 0.01 * (2.0 if k else 1.0), lambda k: 2, steps=100)
    assert controller.costs.ratio_from_below(8, 4) == 2.0  # one bucket below: its ratio, no growth known
    drive(controller, 8, lambda b, k: 0.01 * (2.4 if k else 1.0), lambda k: 2, steps=100)
    assert abs(controller.costs.ratio_from_below(16, 4) - 2.88) < 1e-9  # 1.2x per doubling, as from 4 to 8
    assert abs(controller.costs.ratio_from_below(64, 4) - 2.4 * 1.2 ** 3) < 1e-9
    picks = drive(controller, 16, lambda b, k: 0.01 * (2.5 if k else 1.0), lambda k: 2, steps=100)
    assert set(picks) == {0}  # 3 tokens for 2.88x: a predicted loser, not measured


def test_a_ratio_that_falls_with_the_batch_is_not_extrapolated_downwards():
    controller = SpeculationController.build(4, tree=False, disable_above=None, adaptive=True, self_cutting=True)
    controller.costs.pairs = {1: deque([2.2] * 8), 2: deque([2.0] * 64)}
    for bucket in (1, 2):
        controller.costs.cells[(bucket, 0)] = StepTimes()
    assert abs(controller.costs.ratio_from_below(8, 4) - controller.costs.ratio(2, 4)) < 1e-12


def test_the_monotone_fit_is_scipys_weighted_isotonic_regression_of_the_log_medians():
    import random

    from scipy.optimize import isotonic_regression

    from specgauge.engine.speculative.cost_model import monotone_ratios

    rng = random.Random(7)
    for _ in range(20):
        pairs = {1 << i: deque(rng.lognormvariate(0.7 + 0.05 * i, 0.3) for _ in range(rng.randint(8, 64)))
                 for i in range(rng.randint(1, 8))}
        buckets = sorted(pairs)
        logs = [statistics.median(math.log(p) for p in pairs[b]) for b in buckets]
        expected = isotonic_regression(logs, weights=[len(pairs[b]) for b in buckets]).x
        fitted = monotone_ratios(pairs)
        assert all(abs(math.log(fitted[b]) - x) < 1e-9 for b, x in zip(buckets, expected))

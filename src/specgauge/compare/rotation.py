"""The order the arms of a comparison run in, rotated per point (or per round): a balanced Latin
square (Williams' design), the ABBA idea for N arms.

Row ``r`` of the square is the order of turn ``r``; the square's rows are used in turn, cycling.
Over one full cycle every arm stands in every position equally often, and (for an even number of
arms) every ordered pair of neighbours occurs exactly once, so a slow drift of the machine and a
carry-over from one arm to the next fall on every arm alike. An odd number of arms needs the
square and its mirror (2N rows) for the neighbour balance: each ordered pair then occurs twice.
For two arms the rows are (0, 1), (1, 0): A B, B A, A B, ... as the two-arm comparison always ran.
"""

from __future__ import annotations


def balanced_latin_square(n: int) -> tuple[tuple[int, ...], ...]:
    """The rows of a balanced Latin square over arms ``0..n-1`` (n rows for even n, 2n for odd n)."""
    if n < 1:
        raise ValueError("a Latin square needs at least one arm")
    first, low, high = [0], 1, n - 1   # 0, 1, n-1, 2, n-2, ...: every difference mod n once
    while len(first) < n:
        first.append(low)
        low += 1
        if len(first) < n:
            first.append(high)
            high -= 1
    rows = [tuple((arm + shift) % n for arm in first) for shift in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    return tuple(rows)


def order_at(turn: int, arms: tuple[str, ...]) -> tuple[str, ...]:
    """The arms in the order of ``turn`` (a point's or a round's number, counted over the comparison)."""
    square = balanced_latin_square(len(arms))
    return tuple(arms[i] for i in square[turn % len(square)])

"""Terminal progress of a comparison: one live display for every run of both arms.

A comparison opens many bench runs (per arm, stage and round), two at a time under ABBA;
``RichProgress`` starts and stops its display per run, which would redraw the bars over and over.
"""

from __future__ import annotations

from specgauge.report.terminal import RichProgress


class ComparisonProgress(RichProgress):
    """``RichProgress`` whose display lives from the first run to :meth:`close`."""

    _live = False

    def run_started(self, run_id: int, num_points: int, *, resumed: bool) -> None:
        if not self._live:
            self._progress.start()
            self._live = True

    def run_finished(self, run_id: int, status: str) -> None:
        """Nothing: a run that fails raises, and the comparison says what happened."""

    def close(self) -> None:
        """Stop the display (idempotent)."""
        if self._live:
            self._progress.stop()
            self._live = False

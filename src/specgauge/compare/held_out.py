"""The demo's third single-stream suite: prompts held out from the drafter's own training.

``train draft`` regenerates the target's answers to corpus prompts in two splits,
``regenerated/train/<source>/`` (what the head learned from) and ``regenerated/validation/<source>/``
(prompts of the same sources kept out of training, which it validated on). The SmolLM2 drafter's
are kept in the repository, xz-compressed (``training-data/smollm2-135m/``). This module unpacks the
validation split and builds a suite from it the way ``specgauge suite from-training-data`` does,
weighted as the train split's prompts are (its ``meta.json`` sample counts): the drafter's training
mix, on prompts it never trained on — the suite a user of that drafter should benchmark with.
"""

from __future__ import annotations

import json
import lzma
import shutil
from pathlib import Path

from specgauge.shipped_models import ShippedModel

HELD_OUT_DOMAIN = "held-out"   # the single-stream stage's name in the verdict


def training_data_dir(model: ShippedModel) -> Path | None:
    """Where ``model``'s drafter's regenerated training data is kept in this checkout (None: not kept)."""
    if model.training_data is None or not (model.training_data / "validation").is_dir():
        return None
    return model.training_data


def training_mix(data_dir: Path) -> dict[str, float]:
    """The train split's prompts per source (``train/<source>/meta.json`` ``num_samples``), sources
    with none left out."""
    mix = {}
    for meta_path in sorted((data_dir / "train").glob("*/meta.json")):
        count = json.loads(meta_path.read_text()).get("num_samples", 0)
        if count:
            mix[meta_path.parent.name] = float(count)
    return mix


def unpack_validation(data_dir: Path, into: Path, sources: list[str]) -> Path:
    """The validation split's ``sources`` decompressed under ``into`` (one folder per source, as
    ``suite from-training-data`` reads them); returns ``into``."""
    for source in sources:
        folder = data_dir / "validation" / source
        target = into / source
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / "meta.json", target / "meta.json")
        for packed in sorted(folder.glob("*.jsonl.xz")):
            with lzma.open(packed, "rb") as source_file, open(target / packed.name[:-3], "wb") as out:
                shutil.copyfileobj(source_file, out)
    return into


def held_out_suite(model: ShippedModel, output_dir: Path, size: int, max_tokens: int) -> tuple[Path | None, str]:
    """Write a suite of ``size`` held-out prompts of ``model``'s drafter, in its training mix, each
    asking ``max_tokens``, under ``output_dir/suites``; returns its path (None when this checkout
    keeps no training data for the drafter) and a one-line note saying what it holds."""
    from specgauge.suites.model import write_suite_jsonl
    from specgauge.suites.training_data import BuildOptions, build_suite_from_training_data

    data_dir = training_data_dir(model)
    if data_dir is None:
        return None, f"{model.name}: no training data of its drafter in this checkout, no held-out suite"
    mix = training_mix(data_dir)
    present = [s for s in mix if (data_dir / "validation" / s / "meta.json").is_file()]
    unpacked = unpack_validation(data_dir, output_dir / "held-out-data", present)
    suite, reports = build_suite_from_training_data(
        unpacked, model.tokenizer_path,
        BuildOptions(size=size, name=HELD_OUT_DOMAIN, weights={s: mix[s] for s in present}, seed=0,
                     max_tokens=max_tokens))
    path = output_dir / "suites" / f"{HELD_OUT_DOMAIN}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_suite_jsonl(suite, path)
    drawn = ", ".join(f"{r.name} {r.sampled}" for r in reports if r.sampled)
    return path, (f"{HELD_OUT_DOMAIN}: {len(suite.requests)} prompts of the drafter's validation split (held out "
                  f"from its training), in its training mix: {drawn}")


def _answer(low: float | None, high: float | None) -> str:
    """What a speedup's interval says: ``pays off`` (all above 1), ``costs`` (all below) or ``unclear``."""
    if low is not None and low > 1.0:
        return "pays off"
    if high is not None and high < 1.0:
        return "costs"
    return "unclear"


def _figure(row) -> str:
    accept = f" at {row.accept_length:.2f} tokens per verify" if row.accept_length is not None else ""
    return f"{row.speedup:.2f}x [{row.ci_low:.2f}, {row.ci_high:.2f}]{accept}"


def representative_verdict(single_stream, label: str) -> str | None:
    """One verdict line: whether the drafter's held-out training mix changes the single-stream
    answer that the generic suites give — the answer (pays off / costs / unclear, from each 95%
    interval) and, when the answers agree, whether the intervals are apart. ``single_stream``: the
    comparison's :class:`SingleStreamDomain` rows; None without a held-out row and a generic one."""
    rows = {row.domain: row for row in single_stream if row.speedup is not None and row.ci_low is not None}
    held = rows.pop(HELD_OUT_DOMAIN, None)
    if held is None or not rows:
        return None
    generic = ", ".join(f"{name} {_figure(row)}" for name, row in sorted(rows.items()))
    line = (f"Representative prompts: {label} on the drafter's held-out training mix {_figure(held)}; "
            f"generic: {generic}. ")
    held_answer = _answer(held.ci_low, held.ci_high)
    changed = [name for name, row in sorted(rows.items()) if _answer(row.ci_low, row.ci_high) != held_answer]
    if changed:
        return line + (f"They change the answer: single stream {held_answer} on the held-out mix, against "
                       + "; ".join(f"{_answer(rows[n].ci_low, rows[n].ci_high)} on {n}" for n in changed) + ".")
    above = [n for n, row in sorted(rows.items()) if held.ci_low > row.ci_high]
    below = [n for n, row in sorted(rows.items()) if held.ci_high < row.ci_low]
    if above or below:
        parts = ([f"above {', '.join(above)}"] if above else []) + ([f"below {', '.join(below)}"] if below else [])
        return line + (f"Same answer ({held_answer}), but the held-out speedup lies {' and '.join(parts)} beyond "
                       f"the intervals: the generic suites misstate how much it pays.")
    return line + (f"Same answer ({held_answer}) and the intervals overlap: at this size, representative prompts "
                   f"do not change the answer.")

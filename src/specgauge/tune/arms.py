"""The arms of a tune: one server configuration per candidate depth (and, to verify, the schedule).

An arm is the embedded engine (``specgauge serve ARGS``), a launch command with ``{port}`` (a
template's ``{k}`` already filled in), or a URL already serving that depth. Launching reuses
compare's process handling (``compare.arms.LaunchedServer``) and the engine's
(``engine.launch.EngineProcess``); every started process is stopped on the way out.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from dataclasses import dataclass
from typing import Callable, Iterator, Literal

from specgauge.compare.arms import ArmSpec, LaunchedServer
from specgauge.errors import UserError
from specgauge.tune.choice import TunedSchedule

ArmKind = Literal["engine", "command", "url"]
SCHEDULE_ARM = "schedule"
SCHEDULE_PLACEHOLDER = "{schedule}"
# vLLM's speculative config as a launch template writes the depth as "num_speculative_tokens": {k}
_VLLM_DEPTH = re.compile(r'"num_speculative_tokens"\s*:\s*\{k\}')


@dataclass(frozen=True)
class TuneArm:
    """One configuration: ``label`` (``k=3``, ``schedule``), its fixed ``depth`` (None for the
    schedule), how it runs (``kind``) and the serve arguments / command / URL (``value``)."""

    label: str
    depth: int | None
    kind: ArmKind
    value: str

    @property
    def launched(self) -> bool:
        return self.kind != "url"

    def describe(self) -> str:
        return f"specgauge serve {self.value}".strip() if self.kind == "engine" else self.value


def depth_label(depth: int) -> str:
    return f"k={depth}"


def engine_arm(depth: int, base_args: str, algorithm: str) -> TuneArm:
    """The embedded engine at a fixed depth (0: no speculation)."""
    flags = "--speculative-algorithm NONE" if depth == 0 else \
        f"--speculative-algorithm {algorithm} --speculative-num-steps {depth}"
    return TuneArm(depth_label(depth), depth, "engine", f"{base_args} {flags}".strip())


def engine_schedule_arm(schedule: TunedSchedule, base_args: str, algorithm: str) -> TuneArm:
    """The embedded engine running ``schedule`` (``--speculative-schedule``)."""
    text = json.dumps(schedule.as_json_list(), separators=(",", ":"))
    flags = (f"--speculative-algorithm {algorithm} --speculative-num-steps {schedule.max_depth} "
             f"--speculative-schedule {shlex.quote(text)}")
    return TuneArm(SCHEDULE_ARM, None, "engine", f"{base_args} {flags}".strip())


def template_arm(depth: int, template: str, template_off: str | None) -> TuneArm:
    """A launch command for ``depth``: ``template`` with ``{k}`` filled in (``template_off`` for 0
    when given: vLLM takes no ``--speculative-config`` with 0 tokens)."""
    command = template_off if depth == 0 and template_off else template
    if "{port}" not in command:
        raise UserError(f"launch template {command!r}: must contain {{port}} (the port the server should listen on)")
    try:
        shlex.split(command)
    except ValueError as exc:
        raise UserError(f"launch template {command!r}: cannot parse it ({exc})") from None
    return TuneArm(depth_label(depth), depth, "command", command.replace("{k}", str(depth)))


def vllm_schedule_template(template: str) -> str | None:
    """The schedule's launch command derived from a vLLM template, or None when ``template`` has no
    ``"num_speculative_tokens": {k}``: the schedule goes beside it as
    ``"num_speculative_tokens_per_batch_size": {schedule}`` (the field of vLLM's SpeculativeConfig,
    vllm/config/speculative.py; its entries checked by vllm/v1/spec_decode/dynamic/utils.py
    ``validate_and_normalize_dynamic_sd_schedule``), ``{k}`` then being the schedule's largest K,
    which vLLM requires as ``num_speculative_tokens`` (> 0, the clamp of every K)."""
    match = _VLLM_DEPTH.search(template)
    if match is None:
        return None
    return (template[:match.end()] + ', "num_speculative_tokens_per_batch_size": ' + SCHEDULE_PLACEHOLDER
            + template[match.end():])


def check_schedule_template(template: str) -> None:
    """A schedule launch command needs ``{port}`` and ``{schedule}`` and must parse as a shell line."""
    for placeholder, what in (("{port}", "the port the server should listen on"),
                              (SCHEDULE_PLACEHOLDER, "the schedule's JSON list")):
        if placeholder not in template:
            raise UserError(f"--launch-template-schedule {template!r}: must contain {placeholder} ({what})")
    try:
        shlex.split(template)
    except ValueError as exc:
        raise UserError(f"--launch-template-schedule {template!r}: cannot parse it ({exc})") from None


def template_schedule_arm(schedule: TunedSchedule, template: str) -> TuneArm:
    """The launch command running ``schedule``: ``{schedule}`` → its JSON list (compact: no spaces,
    one shell word), ``{k}`` → its largest K."""
    text = json.dumps(schedule.as_json_list(), separators=(",", ":"))
    command = template.replace(SCHEDULE_PLACEHOLDER, text).replace("{k}", str(schedule.max_depth))
    return TuneArm(SCHEDULE_ARM, None, "command", command)


def url_arm(depth: int, url: str) -> TuneArm:
    """A server already running ``depth``."""
    if not url.startswith(("http://", "https://")):
        raise UserError(f"--url {depth}={url}: must be a URL starting with http:// or https://")
    return TuneArm(depth_label(depth), depth, "url", url.rstrip("/"))


def all_up_at_once(arms: list[TuneArm]) -> bool:
    """Whether every arm can run beside the others (URLs, embedded engines); a launch command may
    need the whole GPU, so command arms run one at a time."""
    return all(arm.kind != "command" for arm in arms)


@contextlib.contextmanager
def arms_up(arms: list[TuneArm], *, start_timeout_s: float,
            announce: Callable[[str], None] | None = None) -> Iterator[dict[str, str]]:
    """Start every launched arm (URLs pass through); yields label → URL; stops them all on exit."""
    with contextlib.ExitStack() as stack:
        urls: dict[str, str] = {}
        for arm in arms:
            if not arm.launched:
                urls[arm.label] = arm.value
                continue
            if announce:
                announce(f"starting {arm.label}: {arm.describe()}")
            if arm.kind == "engine":
                from specgauge.engine.serving.launch import EngineProcess

                handle = stack.enter_context(EngineProcess(shlex.split(arm.value), start_timeout=start_timeout_s))
            else:
                handle = stack.enter_context(LaunchedServer(ArmSpec(arm.label, "command", arm.value),  # type: ignore[arg-type]
                                                            start_timeout_s=start_timeout_s))
            urls[arm.label] = handle.url
        yield urls

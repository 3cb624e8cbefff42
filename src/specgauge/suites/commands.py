"""CLI commands of this part (``specgauge suite ...``). Heavy imports stay inside the command bodies."""

from __future__ import annotations

import json
import statistics

import click

from specgauge.tokenizer_option import TokenizerPath


def register(app: click.Group) -> None:
    """Add this part's commands to the root group."""
    app.add_command(suite)


@click.group()
def suite() -> None:
    """Prompt suites: list, show, import, build from training data, check, diff."""


@suite.command("list")
@click.option("--search-dir", "search_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Extra directory of NAME@VERSION.jsonl suites (repeatable).")
def list_command(search_dirs: tuple[str, ...]) -> None:
    """Built-in (and search-directory) suites: versions, sizes, hashes, domains."""
    from specgauge.suites.registry import builtin_suites, load_suite

    rows = []
    for name, versions in builtin_suites(search_dirs).items():
        for version in versions:
            loaded = load_suite(f"{name}@{version}", search_dirs)
            rows.append((loaded.ref, str(len(loaded.requests)), loaded.content_hash[:12], ",".join(loaded.domains())))
    header = ("suite", "requests", "hash", "domains")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths)) + "  " + row[3])


@suite.command("show")
@click.argument("ref")
@click.option("--first", default=3, show_default=True, help="How many prompts to print.")
def show_command(ref: str, first: int) -> None:
    """Header, domain counts, prompt lengths and the first prompts of NAME[@VERSION] or FILE."""
    from collections import Counter

    from specgauge.suites.registry import load_suite

    loaded = load_suite(ref)
    click.echo(f"{loaded.ref}  hash {loaded.content_hash}")
    if loaded.description:
        click.echo(loaded.description)
    click.echo(f"{len(loaded.requests)} requests")
    domains = Counter(r.domain for r in loaded.requests)
    click.echo("domains: " + ", ".join(f"{d} {n}" for d, n in sorted(domains.items())))
    sources = Counter(r.source for r in loaded.requests)
    if len(sources) > 1 or loaded.source_mix:
        click.echo("sources: " + ", ".join(f"{s} {n}" for s, n in sorted(sources.items())))
    lengths = sorted(len(r.text()) for r in loaded.requests)
    max_tokens = sorted(r.max_tokens for r in loaded.requests)
    click.echo(f"prompt length (chars): min {lengths[0]}, median {int(statistics.median(lengths))}, "
               f"p90 {lengths[int(0.9 * (len(lengths) - 1))]}, max {lengths[-1]}")
    click.echo(f"max_tokens: min {max_tokens[0]}, median {int(statistics.median(max_tokens))}, max {max_tokens[-1]}")
    for index, request in enumerate(loaded.requests[:first]):
        text = " ".join(request.text().split())
        shown = text[:160] + ("…" if len(text) > 160 else "")
        click.echo(f"[{index}] ({request.domain}, {request.max_tokens} tokens) {shown}")


@suite.command("import")
@click.argument("file", type=click.Path())
@click.option("--name", required=True, help="Suite name.")
@click.option("--version", "version", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--domain", default=None, help="Domain for every request (default: from the file, else 'general').")
@click.option("--format", "fmt", default="auto", show_default=True,
              type=click.Choice(["auto", "jsonl", "sharegpt", "mtbench", "specbench", "speedbench", "parquet",
                                 "arrow", "datasets", "csv"]))
@click.option("--max-tokens", default=256, show_default=True, type=click.IntRange(min=1),
              help="max_tokens for records that do not set one.")
@click.option("--output", default=None, type=click.Path(dir_okay=False), help="Default: NAME@VERSION.jsonl here.")
def import_command(file: str, name: str, version: int, domain: str | None, fmt: str, max_tokens: int,
                   output: str | None) -> None:
    """Import a local prompt file (JSONL, ShareGPT, MT-bench, Spec-Bench, SPEED-Bench, parquet, arrow, datasets dir,
    CSV); an entry with several turns becomes a multi-turn session."""
    from specgauge.output_paths import check_output_file, check_suite_name
    from specgauge.suites.importers import import_suite
    from specgauge.suites.model import write_suite_jsonl

    check_suite_name(name)
    target = output or f"{name}@{version}.jsonl"
    check_output_file(target, "--output")
    imported = import_suite(file, name, fmt=fmt, domain=domain, max_tokens=max_tokens, version=version)
    write_suite_jsonl(imported, target)
    click.echo(f"wrote {target}: {imported.ref}, {len(imported.requests)} requests, hash {imported.content_hash[:12]}")


@suite.command("from-training-data")
@click.argument("data_dir", type=click.Path())
@click.option("--tokenizer", "tokenizer_path", required=True, type=click.Path(),
              help="tokenizer.json, or a directory holding one.")
@click.option("--size", required=True, type=int, help="Number of prompts.")
@click.option("--output", required=True, type=click.Path(dir_okay=False), help="Suite JSONL to write.")
@click.option("--weights", default=None, help="Source mix, e.g. code=0.6,agent=0.4 (default: the mix on disk).")
@click.option("--holdout", default=None, type=float, help="Only samples in this hashed hold-out fraction.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--max-tokens", default=None, type=int, help="Fixed max_tokens (default: response length, clamped).")
@click.option("--name", default=None, help="Suite name (default: the output file's stem).")
@click.option("--version", "version", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--domain-map", default=None, help="Override domains, e.g. A1_deepswekimi=agentic,B1_x=chat.")
@click.option("--allow-fewer", is_flag=True, help="Write a smaller suite when a source runs out of samples.")
def from_training_data_command(data_dir: str, tokenizer_path: str, size: int, output: str, weights: str | None,
                               holdout: float | None, seed: int, max_tokens: int | None, name: str | None,
                               version: int, domain_map: str | None, allow_fewer: bool) -> None:
    """Build a suite from a drafter's training data (one subdirectory per source)."""
    from pathlib import Path

    from specgauge.suites.model import write_suite_jsonl
    from specgauge.suites.training_data import (BuildOptions, build_suite_from_training_data, parse_domain_map,
                                                parse_weights)

    from specgauge.output_paths import check_output_file, check_suite_name

    check_output_file(output, "--output")
    stem = Path(output).stem.partition("@")[0]
    if name is not None:
        check_suite_name(name)
    options = BuildOptions(size=size, name=name or stem, version=version, weights=parse_weights(weights),
                           holdout=holdout, seed=seed, max_tokens=max_tokens, domain_map=parse_domain_map(domain_map),
                           allow_fewer=allow_fewer)
    built, reports = build_suite_from_training_data(data_dir, tokenizer_path, options)
    write_suite_jsonl(built, output)
    for report in reports:
        click.echo(f"  {report.name:<24} {report.domain:<14} found {report.found:>8}  target {report.target:>5}  "
                   f"sampled {report.sampled:>5}  read {report.read:>6}  duplicates {report.duplicates}"
                   + (f"  outside hold-out {report.outside_holdout}" if holdout else ""))
    click.echo(f"wrote {output}: {built.ref}, {len(built.requests)} requests, hash {built.content_hash[:12]}")


@suite.command("check")
@click.argument("suite_ref")
@click.option("--against", required=True, help="Training-data directory, or another suite (name or file).")
@click.option("--tokenizer", "tokenizer_path", default=None, type=TokenizerPath(),
              help="Count tokens with this tokenizer, a file or a shipped model's name (default: words).")
@click.option("--samples-per-source", default=200, show_default=True, type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--fail-on-warning", is_flag=True, help="Exit 1 when the suite is off the training distribution.")
def check_command(suite_ref: str, against: str, tokenizer_path: str | None, samples_per_source: int, as_json: bool,
                  fail_on_warning: bool) -> None:
    """How well SUITE represents the training data (or another suite): coverage, divergence, nearest source."""
    from specgauge.suites.check import check_against

    report = check_against(suite_ref, against, tokenizer_path, per_source=samples_per_source)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        click.echo(f"{report.suite_ref} against {report.against} ({report.unit}-level)")
        click.echo(f"Jensen-Shannon divergence: unigram {report.jsd_unigram:.3f}, bigram {report.jsd_bigram:.3f}")
        click.echo(f"  {'source':<24} {'domain':<14} {'data':>6} {'suite(tag)':>11} {'suite(nearest)':>15}")
        for s in report.sources:
            click.echo(f"  {s.name:<24} {s.domain:<14} {s.training_share:>6.1%} {s.suite_share_by_tag:>11.1%} "
                       f"{s.suite_share_by_nearest:>15.1%}")
        click.echo("suite prompts look like: " + ", ".join(f"{d} {v:.0%}" for d, v in report.suite_domain_mix.items()))
        mix = sorted(report.training_domain_mix.items(), key=lambda kv: -kv[1])
        click.echo("training data domains:   " + ", ".join(f"{d} {v:.0%}" for d, v in mix))
        click.echo(f"warning: {report.warning}" if report.warning else
                   "ok: the suite matches the training distribution")
    if report.warning and fail_on_warning:
        raise SystemExit(1)


@suite.command("diff")
@click.argument("old")
@click.argument("new")
def diff_command(old: str, new: str) -> None:
    """What changed between two suites (names, NAME@VERSION or files), by position and by content."""
    from specgauge.suites.continuity import diff_suites
    from specgauge.suites.registry import load_suite

    diff = diff_suites(load_suite(old), load_suite(new))
    click.echo(diff.summary())
    if not diff.same:
        click.echo(f"positions changed: {list(diff.changed_positions)[:50]}")
        if diff.added_positions or diff.removed_positions:
            click.echo(f"positions added: {len(diff.added_positions)}, removed: {len(diff.removed_positions)}")

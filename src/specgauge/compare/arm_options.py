"""How ``compare`` is told its two arms: ``--baseline``/``--speculative`` (a URL), ``--NAME-cmd`` (a
launch command), ``--NAME-engine`` (the embedded engine's ``specgauge serve`` arguments), or both at
once from ``--engine`` and its knobs (:mod:`specgauge.compare.launch_profiles`)."""

from __future__ import annotations

import click

ARM_NAMES = ("baseline", "speculative")
PROFILE_KNOBS = ("method", "draft_model", "num_speculative_tokens", "eagle_topk", "server_args")


def arm_options(function):
    """``--NAME URL``, ``--NAME-cmd CMD`` and ``--NAME-engine ARGS`` for both arms."""
    for name in reversed(ARM_NAMES):
        function = click.option(f"--{name}-engine", metavar="ARGS",
                                help=f"{name} arm: the embedded engine, 'specgauge serve ARGS'")(function)
        function = click.option(f"--{name}-cmd", metavar="CMD",
                                help=f"{name} arm: a launch command with {{port}}, started and stopped")(function)
        function = click.option(f"--{name}", metavar="URL", help=f"{name} arm: a running server")(function)
    return click.option("--speculative-arm-config", metavar="JSON", callback=_arm_config,
                        help="a URL speculative arm declares what it runs, in vLLM's --speculative-config form "
                             "(method, model, num_speculative_tokens, num_speculative_tokens_per_batch_size): "
                             "the advice is written for it and its drafted depth is checked")(function)


def _arm_config(ctx, param, value):
    """``--speculative-arm-config JSON`` → a dict (one line on bad JSON or a non-object)."""
    if value is None:
        return None
    import json

    try:
        config = json.loads(value)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not JSON ({exc.msg} at character {exc.pos})", ctx=ctx, param=param) from None
    if not isinstance(config, dict):
        raise click.BadParameter("must be a JSON object, e.g. {\"method\": \"eagle3\", \"num_speculative_tokens\": 3}",
                                 ctx=ctx, param=param)
    return config


def profile_options(function):
    """``--engine`` and its knobs: both arms' command lines built by :mod:`specgauge.compare.launch_profiles`."""
    from specgauge.compare.launch_profiles import DEFAULT_NUM_SPECULATIVE_TOKENS, ENGINES

    for option in reversed((
        click.option("--engine", type=click.Choice(ENGINES),
                     help="build both arms: ENGINE serving --model without speculation, and with --method "
                          "(the commands are printed; copy them into --baseline-cmd/--speculative-cmd to edit)"),
        click.option("--method", "--speculative-algorithm", "method", metavar="METHOD",
                     help="with --engine: eagle3, eagle, ngram, draft_model, mtp (the engine's own name is written)"),
        click.option("--draft-model", metavar="PATH", help="with --engine: the drafter (EAGLE-3 head, draft model)"),
        click.option("--num-speculative-tokens", type=click.IntRange(min=1),
                     help=f"with --engine: draft tokens per verify step (default {DEFAULT_NUM_SPECULATIVE_TOKENS}; "
                          f"SGLang's --speculative-num-steps)"),
        click.option("--eagle-topk", type=click.IntRange(min=1),
                     help="with --engine sglang|specgauge: draft-tree branching (default 1: a chain)"),
        click.option("--server-args", metavar="ARGS",
                     help="with --engine: more server arguments for both arms, e.g. \"--max-num-seqs 64\""),
    )):
        function = option(function)
    return function


def arm_from(options: dict, name: str, *, required: bool = True):
    """The one arm given by ``--NAME``, ``--NAME-cmd`` or ``--NAME-engine`` (None when not given and
    not ``required``)."""
    from specgauge.compare.plan import ArmConfig

    given = [(kind, value) for kind, value in (("url", options[name]), ("command", options[f"{name}_cmd"]),
                                               ("engine", options[f"{name}_engine"])) if value is not None]
    if len(given) > 1:
        raise click.UsageError(f"give only one of --{name}, --{name}-cmd, --{name}-engine")
    if not given:
        if required:
            raise click.UsageError(f"missing the {name} arm: --{name} URL, --{name}-cmd \"CMD {{port}}\" "
                                   f"or --{name}-engine \"ARGS\"")
        return None
    kind, value = given[0]
    config = ArmConfig(name=name, kind=kind, value=value)
    config.spec()   # validates: URL scheme, {port} in a command, shell quoting
    return config


def profile_arms(options: dict):
    """Both arms built from ``--engine`` (None without it); printed so the user can copy and edit them."""
    from specgauge.compare.launch_profiles import DEFAULT_NUM_SPECULATIVE_TOKENS, LaunchProfile, build_arm_commands
    from specgauge.compare.plan import ArmConfig

    if options["engine"] is None:
        given = [name for name in PROFILE_KNOBS if options[name] is not None]
        if given:
            raise click.UsageError(f"--{given[0].replace('_', '-')} builds an arm with --engine; give --engine too")
        return None
    raw = [f"--{name}{suffix}" for name in ARM_NAMES for suffix in ("", "-cmd", "-engine")
           if options[name + suffix.replace("-", "_")] is not None]
    if raw:
        raise click.UsageError(f"give either --engine or the arms themselves, not both ({raw[0]})")
    if not options["method"]:
        raise click.UsageError("--engine needs --method (eagle3, eagle, ngram, draft_model, mtp)")
    commands = build_arm_commands(LaunchProfile(
        engine=options["engine"], model=options["model"], method=options["method"],
        draft_model=options["draft_model"],
        num_speculative_tokens=options["num_speculative_tokens"] or DEFAULT_NUM_SPECULATIVE_TOKENS,
        eagle_topk=options["eagle_topk"] or 1, server_args=options["server_args"] or ""))
    click.echo(f"baseline arm:    {commands.baseline}\nspeculative arm: {commands.speculative}\n"
               f"(to edit them: specgauge compare {commands.as_options()} ...)", err=True)
    return (ArmConfig(name="baseline", kind=commands.kind, value=commands.baseline),
            ArmConfig(name="speculative", kind=commands.kind, value=commands.speculative))

"""How ``compare`` is told its two arms: ``--baseline``/``--speculative`` (a URL), ``--NAME-cmd`` (a
launch command), ``--NAME-engine`` (the embedded engine's ``specgauge serve`` arguments), or both at
once from ``--engine`` and its knobs (:mod:`specgauge.compare.launch_profiles`)."""

from __future__ import annotations

import shlex

import click

ARM_NAMES = ("baseline", "speculative")
PROFILE_KNOBS = ("method", "methods", "draft_model", "num_speculative_tokens", "eagle_topk", "server_args")


def arm_options(function):
    """``--NAME URL``, ``--NAME-cmd CMD`` and ``--NAME-engine ARGS`` for both arms; the speculative
    ones may be repeated (several speculative arms against one baseline, labelled by ``--arm-label``)."""
    for name in reversed(ARM_NAMES):
        several = name == "speculative"
        again = " (repeat it for several speculative arms)" if several else ""
        function = click.option(f"--{name}-engine", metavar="ARGS", multiple=several,
                                help=f"{name} arm: the embedded engine, 'specgauge serve ARGS'{again}")(function)
        function = click.option(f"--{name}-cmd", metavar="CMD", multiple=several,
                                help=f"{name} arm: a launch command with {{port}}, started and stopped"
                                     f"{again}")(function)
        function = click.option(f"--{name}", metavar="URL", multiple=several,
                                help=f"{name} arm: a running server{again}")(function)
    function = click.option("--arm-label", "arm_labels", metavar="LABEL", multiple=True,
                            help="with several speculative arms: each one's label, in the order the arms are given "
                                 "(URLs, then commands, then engines; default: each arm's method)")(function)
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
        click.option("--methods", metavar="M,M,...",
                     help="with --engine: one speculative arm per method against one baseline, e.g. eagle3,ngram "
                          "(each arm labelled by its method)"),
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
                                               ("engine", options[f"{name}_engine"]))
             for value in (value if isinstance(value, tuple) else (value,)) if value is not None]
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
           if options[name + suffix.replace("-", "_")] not in (None, ())]
    if raw:
        raise click.UsageError(f"give either --engine or the arms themselves, not both ({raw[0]})")
    if options["method"] and options["methods"]:
        raise click.UsageError("give either --method or --methods, not both")
    if not options["method"] and not options["methods"]:
        raise click.UsageError("--engine needs --method (eagle3, eagle, ngram, draft_model, mtp), "
                               "or --methods for several")
    methods = [m.strip() for m in (options["methods"] or options["method"]).split(",")]
    if not all(methods) or len({m.lower() for m in methods}) != len(methods):
        raise click.UsageError(f"--methods {options['methods']!r}: give distinct methods separated by commas, "
                               f"e.g. eagle3,ngram")
    if options["methods"] and options["arm_labels"]:
        raise click.UsageError("--methods labels each arm by its method: leave out --arm-label")
    built = [build_arm_commands(LaunchProfile(
        engine=options["engine"], model=options["model"], method=method, draft_model=options["draft_model"],
        num_speculative_tokens=options["num_speculative_tokens"] or DEFAULT_NUM_SPECULATIVE_TOKENS,
        eagle_topk=options["eagle_topk"] or 1, server_args=options["server_args"] or "")) for method in methods]
    commands = built[0]
    if len(built) == 1:
        click.echo(f"baseline arm:    {commands.baseline}\nspeculative arm: {commands.speculative}\n"
                   f"(to edit them: specgauge compare {commands.as_options()} ...)", err=True)
    else:
        flag = "cmd" if commands.kind == "command" else "engine"
        click.echo(f"baseline arm:    {commands.baseline}\n"
                   + "".join(f"{m} arm: {c.speculative}\n" for m, c in zip(methods, built))
                   + f"(to edit them: specgauge compare --baseline-{flag} {shlex.quote(commands.baseline)} "
                   + " ".join(f"--speculative-{flag} {shlex.quote(c.speculative)} --arm-label {m.lower()}"
                              for m, c in zip(methods, built)) + " ...)", err=True)
    return (ArmConfig(name="baseline", kind=commands.kind, value=commands.baseline),
            *(ArmConfig(name="speculative", kind=c.kind, value=c.speculative) for c in built)), \
        tuple(m.lower() for m in methods)


def speculative_arms(options: dict) -> list:
    """Every speculative arm given as ``--speculative``/``--speculative-cmd``/``--speculative-engine``
    (repeatable): URLs first, then commands, then engines, each in the order given."""
    from specgauge.compare.plan import ArmConfig

    arms = [ArmConfig(name="speculative", kind=kind, value=value)
            for kind, key in (("url", "speculative"), ("command", "speculative_cmd"), ("engine", "speculative_engine"))
            for value in options[key]]
    if not arms:
        raise click.UsageError("missing the speculative arm: --speculative URL, --speculative-cmd \"CMD {port}\" "
                               "or --speculative-engine \"ARGS\"")
    for arm in arms:
        arm.spec()   # validates: URL scheme, {port} in a command, shell quoting
    return arms


def arm_labels(arms: list, given: tuple[str, ...]) -> tuple[str, ...]:
    """Each speculative arm's label: ``--arm-label`` in order, else its method (from its command or
    engine arguments), else ``armN``; a clash is a usage error naming it."""
    from specgauge.compare.speculation_setup import speculation_setup

    if given and len(given) != len(arms):
        raise click.UsageError(f"--arm-label: {len(given)} label(s) for {len(arms)} speculative arms; give one per arm")
    labels = list(given)
    if not labels:
        for number, arm in enumerate(arms, start=1):
            method = speculation_setup(arm.kind, arm.value, None)[0].method
            labels.append(method.lower() if method else f"arm{number}")
    if len(set(labels)) != len(labels) or not all(label.strip() for label in labels):
        raise click.UsageError(f"the speculative arms' labels must be unique and non-empty (got "
                               f"{', '.join(labels)}); name each with --arm-label")
    return tuple(labels)

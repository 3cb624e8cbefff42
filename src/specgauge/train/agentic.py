"""Deterministic agentic / tool-use transcripts: a task, tool calls as JSON, their JSON results
(computed from real standard-library files, signatures and docstrings, or from a seeded
simulation for business tools), the next step, and a final answer."""

from __future__ import annotations

import ast
import json
import random
from dataclasses import dataclass
from typing import Callable

from specgauge.train.stdlib_material import SourceFile, docstrings_of, function_signatures

TOOL_SPECS: dict[str, dict] = {
    "read_file": {"description": "Read lines of a file.", "parameters": {"path": "string", "start_line": "integer", "end_line": "integer"}},
    "count_lines": {"description": "Count the lines of a file.", "parameters": {"path": "string"}},
    "list_directory": {"description": "List the entries of a directory.", "parameters": {"path": "string"}},
    "search_code": {"description": "Find lines matching a pattern in a file.", "parameters": {"pattern": "string", "path": "string"}},
    "get_signature": {"description": "Signature of a Python function.", "parameters": {"module": "string", "name": "string"}},
    "get_docstring": {"description": "Docstring of a Python object.", "parameters": {"module": "string", "name": "string"}},
    "run_python": {"description": "Evaluate a Python expression and return its value.", "parameters": {"expression": "string"}},
    "get_weather": {"description": "Current weather for a city.", "parameters": {"city": "string", "unit": "celsius|fahrenheit"}},
    "convert_currency": {"description": "Convert an amount between currencies.", "parameters": {"amount": "number", "from": "string", "to": "string"}},
    "query_database": {"description": "Run a read-only SQL query.", "parameters": {"sql": "string"}},
    "create_ticket": {"description": "Open an issue ticket.", "parameters": {"title": "string", "priority": "low|medium|high", "labels": "array"}},
}

CITIES = ["Lisbon", "Oslo", "Nairobi", "Osaka", "Lima", "Toronto", "Cairo", "Hanoi", "Zurich", "Perth", "Denver", "Seoul"]
CURRENCIES = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 151.3, "CHF": 0.88, "CAD": 1.36, "INR": 83.2, "BRL": 5.05}
CUSTOMERS = ["acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka"]
MONTHS = ["2024-01", "2024-02", "2024-03", "2024-04", "2024-05", "2024-06"]


@dataclass(frozen=True)
class Material:
    """The real material transcripts are built from."""

    files: list[SourceFile]
    functions: list[tuple[SourceFile, str, str, int]]  # (file, name, signature, line)
    documented: list[tuple[str, str, str]]  # (module, qualname, docstring)

    @classmethod
    def from_files(cls, files: list[SourceFile]) -> "Material":
        functions = [(f, name, sig, line) for f in files for name, sig, line in function_signatures(f)]
        documented = [
            (d.module, d.qualname, d.text) for f in files for d in docstrings_of(f) if d.kind == "function" and len(d.text) > 40
        ]
        return cls(files, functions, documented)


def _call(reason: str, name: str, arguments: dict) -> str:
    return f"{reason}\n" + json.dumps({"name": name, "arguments": arguments})


def _first_sentence(text: str) -> str:
    para = " ".join(text.strip().split("\n\n")[0].split())
    return para.split(". ")[0].rstrip(".") + "."


def _signature_task(rng: random.Random, m: Material) -> list[dict]:
    src, name, sig, _ = rng.choice(m.functions)
    params = [a.arg for a in ast.parse(f"def f{sig.split(' -> ')[0]}: pass").body[0].args.args]
    task = rng.choice(["What arguments does `{q}` take?", "I need to call `{q}`. What is its signature?", "Show me how to call {q}."])
    q = f"{src.module}.{name}"
    listed = ", ".join(f"`{p}`" for p in params) if params else "no positional parameters"
    return [
        {"role": "user", "content": task.format(q=q)},
        {"role": "assistant", "content": _call("I'll look up the signature.", "get_signature", {"module": src.module, "name": name})},
        {"role": "tool", "content": json.dumps({"module": src.module, "name": name, "signature": f"{name}{sig}"})},
        {"role": "assistant", "content": f"`{q}{sig}` takes {listed}."},
    ]


def _count_and_read_task(rng: random.Random, m: Material) -> list[dict]:
    src = rng.choice(m.files)
    lines = src.text.split("\n")
    path = f"Lib/{src.relpath}"
    end = rng.randint(4, 12)
    head = lines[:end]
    defs = [ln for ln in lines if ln.startswith(("def ", "class "))]
    first_def = defs[0].rstrip(":") if defs else "no top-level function or class"
    return [
        {"role": "user", "content": f"How long is {path}, and how does it start?"},
        {"role": "assistant", "content": _call("First I'll count the lines.", "count_lines", {"path": path})},
        {"role": "tool", "content": json.dumps({"path": path, "lines": len(lines)})},
        {"role": "assistant", "content": _call(f"It has {len(lines)} lines. Now I'll read the beginning.", "read_file", {"path": path, "start_line": 1, "end_line": end})},
        {"role": "tool", "content": json.dumps({"path": path, "content": "\n".join(head)})},
        {"role": "assistant", "content": f"{path} has {len(lines)} lines. Its first definition is `{first_def}`, and it opens with:\n" + "\n".join(head[:4])},
    ]


def _find_definition_task(rng: random.Random, m: Material) -> list[dict]:
    src, name, sig, line = rng.choice(m.functions)
    path = f"Lib/{src.relpath}"
    lines = src.text.split("\n")
    matches = [{"line": i + 1, "text": t} for i, t in enumerate(lines) if f"def {name}(" in t][:5]
    body = lines[line - 1 : line + 5]
    return [
        {"role": "user", "content": f"Where is `{name}` defined in {src.module}, and what does its body start with?"},
        {"role": "assistant", "content": _call(f"I'll search {path} for the definition.", "search_code", {"pattern": f"def {name}(", "path": path})},
        {"role": "tool", "content": json.dumps({"matches": matches})},
        {"role": "assistant", "content": _call(f"Found it on line {line}. Reading the body.", "read_file", {"path": path, "start_line": line, "end_line": line + 5})},
        {"role": "tool", "content": json.dumps({"path": path, "content": "\n".join(body)})},
        {"role": "assistant", "content": f"`{name}` is defined on line {line} of {path} as `def {name}{sig}`. Its body begins:\n" + "\n".join(body[1:4])},
    ]


def _list_package_task(rng: random.Random, m: Material) -> list[dict]:
    packages = sorted({f.relpath.split("/")[0] for f in m.files if "/" in f.relpath})
    package = rng.choice(packages)
    entries = sorted({f.relpath.split("/")[1] for f in m.files if f.relpath.startswith(package + "/")})
    modules = [e.removesuffix(".py") for e in entries if e.endswith(".py") and e != "__init__.py"]
    shown = ", ".join(f"`{package}.{x}`" for x in modules[:12]) or "no submodules"
    return [
        {"role": "user", "content": f"Which modules does the `{package}` package contain?"},
        {"role": "assistant", "content": _call("Let me list the package directory.", "list_directory", {"path": f"Lib/{package}"})},
        {"role": "tool", "content": json.dumps({"path": f"Lib/{package}", "entries": entries})},
        {"role": "assistant", "content": f"`{package}` has {len(modules)} submodules: {shown}."},
    ]


def _docstring_task(rng: random.Random, m: Material) -> list[dict]:
    module, qualname, text = rng.choice(m.documented)
    return [
        {"role": "user", "content": f"Briefly, what does `{module}.{qualname}` do?"},
        {"role": "assistant", "content": _call("I'll read its docstring.", "get_docstring", {"module": module, "name": qualname})},
        {"role": "tool", "content": json.dumps({"name": f"{module}.{qualname}", "docstring": text[:600]})},
        {"role": "assistant", "content": f"`{module}.{qualname}`: {_first_sentence(text)}"},
    ]


def _compute_task(rng: random.Random, m: Material) -> list[dict]:
    a, b = rng.randint(2, 400), rng.randint(2, 90)
    words = rng.sample(sorted({f.module.split(".")[-1] for f in m.files}), 4)
    expression = rng.choice([
        f"sum(range({a}, {a + b}))",
        f"{a} * {b} + {a % 7}",
        f"sorted({words!r}, key=len)",
        f"'-'.join({words!r}).upper()",
        f"[n ** 2 for n in range({b % 9 + 2})]",
        f"round({a} / {b}, 3)",
        f"len(set({words!r} + {words[:2]!r}))",
    ])
    value = eval(expression, {"__builtins__": {"sum": sum, "range": range, "sorted": sorted, "len": len, "set": set, "round": round}})  # noqa: S307 — our own expression
    return [
        {"role": "user", "content": f"Compute `{expression}` for me."},
        {"role": "assistant", "content": _call("I'll evaluate it in Python.", "run_python", {"expression": expression})},
        {"role": "tool", "content": json.dumps({"result": repr(value)})},
        {"role": "assistant", "content": f"`{expression}` evaluates to `{value!r}`."},
    ]


def _weather_task(rng: random.Random, m: Material) -> list[dict]:
    first, second = rng.sample(CITIES, 2)
    unit = rng.choice(["celsius", "fahrenheit"])
    temps = {c: rng.randint(-5, 35) if unit == "celsius" else rng.randint(23, 95) for c in (first, second)}
    skies = {c: rng.choice(["clear", "cloudy", "rain", "snow", "fog", "windy"]) for c in (first, second)}
    warmer = first if temps[first] >= temps[second] else second
    sym = "°C" if unit == "celsius" else "°F"
    messages = [{"role": "user", "content": f"Is it warmer in {first} or {second} right now? Use {unit}."}]
    for index, city in enumerate((first, second)):
        reason = f"I'll check {city} first." if index == 0 else f"{first} is {temps[first]}{sym}. Now {city}."
        messages.append({"role": "assistant", "content": _call(reason, "get_weather", {"city": city, "unit": unit})})
        messages.append({"role": "tool", "content": json.dumps({"city": city, "temperature": temps[city], "unit": unit, "sky": skies[city]})})
    messages.append({"role": "assistant", "content": f"{warmer} is warmer: {first} is {temps[first]}{sym} ({skies[first]}), {second} is {temps[second]}{sym} ({skies[second]})."})
    return messages


def _currency_task(rng: random.Random, m: Material) -> list[dict]:
    source, target = rng.sample(sorted(CURRENCIES), 2)
    amount = rng.choice([12.5, 40, 99.99, 250, 1200, 5000, 75.25])
    converted = round(amount / CURRENCIES[source] * CURRENCIES[target], 2)
    return [
        {"role": "user", "content": f"How much is {amount} {source} in {target}?"},
        {"role": "assistant", "content": _call("I'll convert it.", "convert_currency", {"amount": amount, "from": source, "to": target})},
        {"role": "tool", "content": json.dumps({"amount": amount, "from": source, "to": target, "result": converted, "rate": round(CURRENCIES[target] / CURRENCIES[source], 5)})},
        {"role": "assistant", "content": f"{amount} {source} is about {converted} {target}."},
    ]


def _database_task(rng: random.Random, m: Material) -> list[dict]:
    customer, month = rng.choice(CUSTOMERS), rng.choice(MONTHS)
    rows = [{"order_id": rng.randint(1000, 9999), "total": round(rng.uniform(5, 900), 2)} for _ in range(rng.randint(0, 5))]
    total = round(sum(r["total"] for r in rows), 2)
    sql = f"SELECT order_id, total FROM orders WHERE customer = '{customer}' AND month = '{month}'"
    messages = [
        {"role": "user", "content": f"How many orders did {customer} place in {month}, and what did they spend?"},
        {"role": "assistant", "content": _call("I'll query the orders table.", "query_database", {"sql": sql})},
        {"role": "tool", "content": json.dumps({"rows": rows, "row_count": len(rows)})},
    ]
    if rows and total > 1000:
        title = f"Review large spend by {customer} in {month}"
        messages.append({"role": "assistant", "content": _call(f"{len(rows)} orders totalling {total}; that is above 1000, so I'll open a review ticket.", "create_ticket", {"title": title, "priority": "medium", "labels": ["billing", customer]})})
        messages.append({"role": "tool", "content": json.dumps({"ticket_id": rng.randint(100, 999), "status": "open"})})
    answer = f"{customer} placed {len(rows)} orders in {month}, spending {total} in total." if rows else f"{customer} placed no orders in {month}."
    messages.append({"role": "assistant", "content": answer})
    return messages


SCENARIOS: tuple[Callable[[random.Random, Material], list[dict]], ...] = (
    _signature_task, _count_and_read_task, _find_definition_task, _list_package_task, _docstring_task,
    _compute_task, _weather_task, _currency_task, _database_task,
)
SCENARIO_TOOLS = {
    _signature_task: ["get_signature"], _count_and_read_task: ["count_lines", "read_file"],
    _find_definition_task: ["search_code", "read_file"], _list_package_task: ["list_directory"],
    _docstring_task: ["get_docstring"], _compute_task: ["run_python"], _weather_task: ["get_weather"],
    _currency_task: ["convert_currency"], _database_task: ["query_database", "create_ticket"],
}


def system_prompt(rng: random.Random, needed: list[str]) -> str:
    """A system turn listing the tools the agent may call (the needed ones plus a few others)."""
    others = rng.sample(sorted(set(TOOL_SPECS) - set(needed)), 2)
    names = sorted(needed + others)
    tools = [{"name": n, **TOOL_SPECS[n]} for n in names]
    return (
        "You are a careful agent. Call one tool at a time by answering with a short reason and a JSON "
        '{"name": ..., "arguments": ...} object; answer plainly once you know.\nTools:\n' + json.dumps(tools)
    )


def synthesize(material: Material, count: int, seed: int) -> list[tuple[str, list[dict]]]:
    """``count`` transcripts as (sample id, messages), the same for the same material and seed."""
    rng = random.Random(seed)
    out = []
    for index in range(count):
        scenario = SCENARIOS[index % len(SCENARIOS)]
        body = scenario(rng, material)
        messages = [{"role": "system", "content": system_prompt(rng, SCENARIO_TOOLS[scenario])}, *body]
        out.append((f"agentic-{index:06d}", messages))
    return out

"""``agentic@2``: agent transcripts of realistic length, like SWE-agent, OpenHands and tool-calling sessions.

Each scenario is a system prompt with tool specs, a task, and the steps an agent took; the observations
are real material — standard-library source read with ``read_file`` (40–150 lines), ``grep -n`` hits,
pytest failures whose frames point at those lines, ``git diff`` of the edits, JSON tool results. A
request is the transcript cut after 0, 1, 2, ... steps: the model writes the next action. Observations
travel as user messages (``OBSERVATION:``), as in ``agentic@1``, so every OpenAI-compatible server
accepts them. Built deterministically (see :mod:`.transcript_material`; the one simulated table uses a
fixed seed).
"""

from __future__ import annotations

import json
import random
import statistics

from specgauge.suites.builtin_source.helpers import next_action_requests
from specgauge.suites.builtin_source.transcript_material import (RepoFile, action, excerpt, git_diff, grep,
                                                                   observation, pytest_failure, view)
from specgauge.suites.model import SuiteRequest

NAME = "agentic"
VERSION = 2
MAX_TOKENS = 256
DESCRIPTION = ("Agent transcripts of realistic length (SWE-agent / OpenHands / tool-calling style): a system prompt "
               "with tool specs, a task, earlier steps whose observations are real material (Python standard-library "
               "source read 40-150 lines at a time, grep hits, pytest failures, git diffs, JSON tool results); the "
               "model writes the next action. Prompts from about 300 to 3,800 tokens (median over 1,000) in the "
               "shipped tokenizer. Intended max_tokens: 256.")

SWE_TOOLS = [
    {"name": "bash", "description": "Run a shell command in the repository root (no network). Returns the combined "
     "stdout and stderr and the exit code. Long outputs are truncated to the last 200 lines.",
     "parameters": {"type": "object", "properties": {"command": {"type": "string"},
                                                     "timeout": {"type": "integer", "default": 120}},
                    "required": ["command"]}},
    {"name": "read_file", "description": "Show lines of a file with their numbers (at most 150 lines per call).",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "start": {"type": "integer"},
                                                     "end": {"type": "integer"}}, "required": ["path"]}},
    {"name": "grep", "description": "Search files for an extended regular expression; prints path:line:text.",
     "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
                    "required": ["pattern"]}},
    {"name": "edit_file", "description": "Replace one exact, unique snippet of a file; returns the diff.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "old": {"type": "string"},
                                                     "new": {"type": "string"}},
                    "required": ["path", "old", "new"]}},
    {"name": "submit", "description": "Finish: the working tree is the answer. Give a one-paragraph summary.",
     "parameters": {"type": "object", "properties": {"summary": {"type": "string"}}, "required": ["summary"]}},
]
DATA_TOOLS = [
    {"name": "sql_query", "description": "Run a read-only SQL query on the analytics warehouse (PostgreSQL 15). "
     "Returns columns and at most 200 rows.",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
    {"name": "describe_table", "description": "Columns, types and row count of a table.",
     "parameters": {"type": "object", "properties": {"table": {"type": "string"}}, "required": ["table"]}},
    {"name": "send_report", "description": "Email a short report with an optional CSV attachment.",
     "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"},
                                                     "body": {"type": "string"}, "csv": {"type": "string"}},
                    "required": ["to", "subject", "body"]}},
]

RULES = ("Work step by step. Each reply is one THOUGHT line (your reasoning, brief) followed by one ACTION line "
         'holding a JSON object {"tool": NAME, "arguments": {...}}. After each action you receive an OBSERVATION '
         "with the tool's output. Call exactly one tool per reply. Do not ask the user questions; if something is "
         "unclear, investigate. Keep edits minimal and in the style of the surrounding code.")


def _system(role: str, tools: list[dict], extra: str) -> str:
    spec = "\n".join(json.dumps(tool) for tool in tools)
    return f"You are {role}.\n\n{extra}\n\nTOOLS (one JSON spec a line):\n{spec}\n\n{RULES}"


SWE = _system("an autonomous software engineering agent working in a checked-out git repository", SWE_TOOLS,
              "The repository is at /repo and its tests run with `python -m pytest`. You solve the issue the user "
              "gives you by reading code, reproducing the problem, editing files and re-running the tests. When the "
              "tests pass and the change is complete, call `submit`.")
DOCS_TOOLS = [
    {"name": "get_source", "description": "Source of a Python standard-library function, class or method "
     "(CPython 3.11).", "parameters": {"module": "string", "name": "string (qualified, e.g. Fraction.limit_denominator)"}},
    {"name": "get_docs", "description": "The documentation entry of a standard-library object.",
     "parameters": {"module": "string", "name": "string"}},
    {"name": "run_python", "description": "Evaluate one Python expression in a sandbox where the standard library "
     "is importable; returns its repr or the exception.", "parameters": {"expression": "string"}},
]
DOCS = ("You are a Python tutor helping a learner understand the standard library. Ground every claim in the "
        "source or in a run: call one tool per reply as JSON {\"tool\": NAME, \"arguments\": {...}}, and answer "
        "in plain text, with a short example, once you know enough.\nTools:\n"
        + "\n".join(json.dumps(tool) for tool in DOCS_TOOLS))
DATA = _system("a data analyst agent for an online shop", DATA_TOOLS,
               "You answer questions from the operations team using the warehouse. Check table layouts before "
               "writing queries, state the numbers you found, and send a report when asked.")


def _module(header: str, *parts: str) -> str:
    return header.rstrip("\n") + "\n\n\n" + "\n\n".join(p.rstrip("\n") + "\n" for p in parts)


def _around(file: RepoFile, snippet: str, before: int, after: int) -> tuple[int, int]:
    line = file.line_of(snippet)
    return max(1, line - before), min(len(file.lines), line + after)


def _read(file: RepoFile, thought: str, start: int, end: int) -> tuple[str, str]:
    return action(thought, "read_file", path=file.path, start=start, end=end), observation(view(file, start, end))


def _grep(thought: str, pattern: str, files: list[RepoFile], path: str) -> tuple[str, str]:
    return action(thought, "grep", pattern=pattern, path=path), observation(grep(pattern, files))


def _bash(thought: str, command: str, output: str, exit_code: int) -> tuple[str, str]:
    return action(thought, "bash", command=command), observation(f"{output}\n[exit code: {exit_code}]")


def _edit(thought: str, file: RepoFile, old: str, new: str) -> tuple[tuple[str, str], RepoFile]:
    after = file.replace(old, new)
    step = (action(thought, "edit_file", path=file.path, old=old, new=new),
            observation("File updated.\n" + git_diff(file, after)))
    return step, after


def textwrap_scenario() -> tuple[str, str, list[tuple[str, str]]]:
    wrap = RepoFile("docfmt/wrap.py", _module(
        '"""Text wrapping for docfmt (vendored from CPython\'s textwrap, trimmed)."""\n\nimport re\n',
        excerpt("textwrap.py", "TextWrapper", "a99b025286c98119")))
    test = ("def test_bullet_with_max_lines_fits_without_placeholder():\n"
            "    w = TextWrapper(width=10, max_lines=2, initial_indent='- ', subsequent_indent='      ')\n"
            ">   assert w.wrap('short') == ['- short']")
    check = "            if len(indent) + len(self.placeholder.lstrip()) > self.width:"
    steps = [
        _bash("Reproduce the failure first.", "python -m pytest tests/test_wrap.py -x -q", pytest_failure(
            "python -m pytest tests/test_wrap.py -x -q", "tests/test_wrap.py",
            "test_bullet_with_max_lines_fits_without_placeholder", test,
            [(wrap, "wrap", "return self._wrap_chunks(chunks)"),
             (wrap, "_wrap_chunks", "raise ValueError(\"placeholder too large for max width\")")],
            "ValueError: placeholder too large for max width", 14), 1),
        _grep("Find every place the placeholder is used.", r"def |placeholder", [wrap], "docfmt/wrap.py"),
        _read(wrap, "Read the start of _wrap_chunks, where the check raises.", *_around(wrap, "def _wrap_chunks", 0, 56)),
        _read(wrap, "Read the branch that actually appends the placeholder.", *_around(wrap, "if cur_line:", 0, 39)),
    ]
    edit, _ = _edit("The placeholder is only needed when lines are dropped; defer the error to that branch.", wrap,
                    check + '\n                raise ValueError("placeholder too large for max width")',
                    check + "\n                placeholder_too_large = True  # raised only if a line is dropped")
    steps.append(edit)
    return SWE, ("Issue #212: `TextWrapper(width=10, max_lines=2, initial_indent='- ', subsequent_indent='      ')"
                 ".wrap('short')` raises `ValueError: placeholder too large for max width`, although 'short' fits on "
                 "one line and no placeholder is needed. Raise only when the placeholder would actually be used."), steps


def graphlib_scenario() -> tuple[str, str, list[tuple[str, str]]]:
    graph = RepoFile("pipeline/graph.py", _module(
        '"""Task graph of the pipeline runner (vendored from CPython\'s graphlib)."""\n\n'
        "from types import GenericAlias\n\n_NODE_OUT = -1\n_NODE_DONE = -2\n",
        excerpt("graphlib.py", "_NodeInfo", "942f6c18fba1cd62"), excerpt("graphlib.py", "CycleError", "5d577040e94901d6"),
        excerpt("graphlib.py", "TopologicalSorter", "7e0eb64e04bf04dd")))
    runner = RepoFile("pipeline/runner.py", "\n".join([
        '"""Run pipeline tasks in dependency order on a thread pool."""', "", "import concurrent.futures as cf",
        "", "from pipeline.graph import TopologicalSorter", "", "", "def run(tasks, deps, workers=4):",
        "    sorter = TopologicalSorter(deps)", "    sorter.prepare()",
        "    with cf.ThreadPoolExecutor(workers) as pool:", "        pending = {}", "        while sorter.is_active():",
        "            for name in sorter.get_ready():", "                pending[pool.submit(tasks[name])] = name",
        "            finished, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)",
        "            for future in finished:", "                name = pending.pop(future)",
        "                sorter.done(name)", "                future.result()", ""]))
    test = ("def test_failed_task_stops_the_run():\n"
            "    tasks = {'a': ok, 'b': boom, 'c': ok}\n"
            ">   with pytest.raises(TaskFailed):\n"
            "        run(tasks, {'b': {'a'}, 'c': {'b'}})")
    steps = [
        _bash("Run the runner tests to see the failure.", "python -m pytest tests/test_runner.py -x -q", pytest_failure(
            "python -m pytest tests/test_runner.py -x -q", "tests/test_runner.py", "test_failed_task_stops_the_run", test,
            [(runner, "run", "future.result()")], "RuntimeError: boom",
            6), 1),
        _read(runner, "Look at how the runner drives the sorter.", 1, 21),
        _grep("Which sorter methods raise, and where?", r"def |raise ", [graph], "pipeline/graph.py"),
        _read(graph, "Read get_ready and done.", *_around(graph, "def get_ready", 0, 90)),
    ]
    edit, _ = _edit("Check the task's result before marking it done, so successors are never released.", runner,
                    "                sorter.done(name)\n                future.result()",
                    "                future.result()  # raises: the successors are never released\n"
                    "                sorter.done(name)")
    steps.append(edit)
    return SWE, ("When a task of the pipeline fails, the runner still starts the tasks that depend on it. A failed "
                 "task must stop the run before any of its successors start (tests/test_runner.py::"
                 "test_failed_task_stops_the_run shows it)."), steps


def json_scenario() -> tuple[str, str, list[tuple[str, str]]]:
    decoder = RepoFile("fastjson/decoder.py", _module(
        '"""Pure-Python fallback decoder of fastjson (vendored from CPython\'s json.decoder)."""\n\n'
        "import re\n\nfrom fastjson.errors import JSONDecodeError\nfrom fastjson.scanner import WHITESPACE, "
        "WHITESPACE_STR, BACKSLASH, STRINGCHUNK, _decode_uXXXX\n",
        excerpt("json/decoder.py", "py_scanstring", "0097ce1dbaac4282"), excerpt("json/decoder.py", "JSONObject", "1dbdfaed9734c999")))
    test = ("def test_trailing_comma_points_at_the_comma():\n"
            "    with pytest.raises(JSONDecodeError) as info:\n"
            "        loads('{\"a\": 1,}')\n"
            ">   assert (info.value.msg, info.value.colno) == ('Trailing comma', 8)")
    steps = [
        _bash("Reproduce with the failing test.", "python -m pytest tests/test_errors.py -x -q -k trailing", pytest_failure(
            "python -m pytest tests/test_errors.py -x -q -k trailing", "tests/test_errors.py",
            "test_trailing_comma_points_at_the_comma", test, [],
            "AssertionError: assert ('Expecting property name enclosed in double quotes', 9) == ('Trailing comma', 8)",
            0), 1),
        _grep("Find where that message is raised.", r"raise JSONDecodeError|Expecting property name", [decoder],
              "fastjson/decoder.py"),
        _read(decoder, "Read JSONObject.", *_around(decoder, "def JSONObject", 0, 79)),
        _bash("Check what the scanner sees after the comma.", "python -c \"from fastjson.decoder import JSONObject; "
              "import fastjson.scanner as s; print(JSONObject(('{\\\"a\\\": 1,}', 1), True, s.make_scanner(), None, "
              "None))\"", "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"
              f"  File \"/repo/fastjson/decoder.py\", line {decoder.line_of('Expecting property name enclosed')}, in "
              "JSONObject\nfastjson.errors.JSONDecodeError: Expecting property name enclosed in double quotes: "
              "line 1 column 9 (char 8)", 1),
    ]
    delimiter = "            raise JSONDecodeError(\"Expecting ',' delimiter\", s, end - 1)\n"
    edit, _ = _edit("Remember where the comma is, so a trailing comma can be reported at it.", decoder,
                    delimiter + "        end = _w(s, end).end()",
                    delimiter + "        comma_idx = end - 1\n        end = _w(s, end).end()")
    steps.append(edit)
    return SWE, ("Error messages for a trailing comma in an object are confusing: `loads('{\"a\": 1,}')` says "
                 "'Expecting property name enclosed in double quotes' at column 9. Report 'Trailing comma' at the "
                 "comma's column instead; keep other messages unchanged."), steps


def tomllib_scenario() -> tuple[str, str, list[tuple[str, str]]]:
    parser = RepoFile("cfgload/_parser.py", _module(
        '"""TOML parser of cfgload (vendored from CPython\'s tomllib)."""\n\n'
        "from cfgload._re import RE_DATETIME, RE_LOCALTIME, RE_NUMBER, match_to_datetime, match_to_localtime, "
        "match_to_number\nfrom cfgload._types import Flags, Output, Pos, suffixed_err\n",
        excerpt("tomllib/_parser.py", "key_value_rule", "b187cd341f39f2a9"), excerpt("tomllib/_parser.py", "parse_one_line_basic_str", "29f49dba656fd41f"),
        excerpt("tomllib/_parser.py", "parse_basic_str", "e748ce33581eaf3c"),
        excerpt("tomllib/_parser.py", "parse_value", "ac1d5aa74489c492")))
    unterminated = parser.line_of('raise suffixed_err(src, pos, "Unterminated string") from None')
    settings = {"service": {"name": "billing", "port": 8443, "started": "1979-05-27T07:32:00Z"},
                "retry": {"attempts": 5, "backoff_s": [0.5, 1, 2, 4]}, "features": ["invoices", "refunds", "dunning"]}
    steps = [
        _bash("Reproduce with the user's file.", "python -m cfgload examples/billing.toml",
              "Traceback (most recent call last):\n  File \"/repo/cfgload/__main__.py\", line 9, in <module>\n"
              "    print(json.dumps(load(path), default=str))\n"
              f"  File \"/repo/cfgload/_parser.py\", line {parser.line_of('return parse_one_line_basic_str(src, pos)')}"
              ", in parse_value\n    return parse_one_line_basic_str(src, pos)\n"
              f"  File \"/repo/cfgload/_parser.py\", line {unterminated}"
              ", in parse_basic_str\ncfgload.TOMLDecodeError: Unterminated string (at line 7, column 30)", 1),
        _bash("Look at the input around line 7.", "cat -n examples/billing.toml | sed -n 1,12p",
              "     1\t[service]\n     2\tname = \"billing\"\n     3\tport = 8443\n     4\tstarted = 1979-05-27T07:32:00Z\n"
              "     5\t\n     6\t[retry]\n     7\tnote = \"backoff doubles: \\\"0.5 1 2 4\\\"\n     8\tattempts = 5\n"
              "     9\tbackoff_s = [0.5, 1, 2, 4]\n    10\t\n    11\tfeatures = [\"invoices\", \"refunds\", \"dunning\"]", 0),
        _read(parser, "Read how basic strings are parsed.", *_around(parser, "def parse_basic_str", 0, 45)),
        _read(parser, "And the value dispatcher that calls it.", *_around(parser, "def parse_value", 0, 66)),
        (action("The file itself is wrong (the escaped quote closes nothing); confirm the rest parses once line 7 is "
                "fixed.", "bash", command="sed -i '7s/$/\"/' examples/billing.toml && python -m cfgload examples/billing.toml"),
         observation(json.dumps(settings, indent=1) + "\n[exit code: 0]")),
    ]
    return SWE, ("`python -m cfgload examples/billing.toml` fails with 'Unterminated string (at line 7, column 30)'. "
                 "Find out whether the parser or the file is wrong; fix whichever it is and add a regression test "
                 "if the parser was at fault."), steps


def heapq_scenario() -> tuple[str, str, list[tuple[str, str]]]:
    merge = RepoFile("logjoin/merge.py", _module(
        '"""Merge sorted log streams (vendored from CPython\'s heapq)."""\n\n'
        "from heapq import heapify, heappop, heapreplace, _heapify_max, _heappop_max, _heapreplace_max\n",
        excerpt("heapq.py", "merge", "b873b20b7a61274f"), excerpt("heapq.py", "nsmallest", "e655099cbf8e5188")))
    cli = RepoFile("logjoin/cli.py", "\n".join([
        "import sys", "", "from logjoin.merge import merge, nsmallest", "from logjoin.parse import read_records", "",
        "", "def main(paths, newest_first=False, top=None):",
        "    streams = [read_records(p, reverse=newest_first) for p in paths]",
        "    merged = merge(*streams, key=lambda r: r.timestamp, reverse=newest_first)",
        "    if top:", "        merged = nsmallest(top, merged, key=lambda r: r.timestamp)",
        "    for record in merged:", "        sys.stdout.write(record.line)", ""]))
    test = ("def test_newest_first_top_three(tmp_path):\n"
            "    paths = write_logs(tmp_path, [[1, 4, 9], [2, 3, 10]])\n"
            ">   assert timestamps(main(paths, newest_first=True, top=3)) == [10, 9, 4]")
    steps = [
        _bash("Run the test from the report.", "python -m pytest tests/test_cli.py -x -q", pytest_failure(
            "python -m pytest tests/test_cli.py -x -q", "tests/test_cli.py", "test_newest_first_top_three", test, [],
            "AssertionError: assert [1, 2, 3] == [10, 9, 4]", 9), 1),
        _grep("Where do merge and nsmallest get used?", r"merge\(|nsmallest\(|reverse", [cli, merge], "logjoin/"),
        _read(cli, "Read the CLI entry point.", 1, 14),
        _read(merge, "Read merge to confirm it handles reverse itself.", *_around(merge, "def merge", 0, 52)),
        _read(merge, "And nsmallest, which is what --top uses.", *_around(merge, "def nsmallest", 0, 46)),
    ]
    edit, _ = _edit("--top with newest_first must take the largest timestamps.", cli,
                    "        merged = nsmallest(top, merged, key=lambda r: r.timestamp)",
                    "        pick = nlargest if newest_first else nsmallest\n"
                    "        merged = pick(top, merged, key=lambda r: r.timestamp)")
    steps.append(edit)
    return SWE, ("`logjoin --newest-first --top 3 a.log b.log` prints the three OLDEST records instead of the three "
                 "newest. Without --top the order is right. Fix it and keep the existing tests green."), steps


def lru_scenario() -> tuple[str, str, list[tuple[str, str]]]:
    lru = RepoFile("memo/lru.py", _module(
        '"""LRU cache with statistics (vendored from CPython\'s functools)."""\n\n'
        "from collections import namedtuple\nfrom _thread import RLock\n\n"
        '_CacheInfo = namedtuple("CacheInfo", ["hits", "misses", "maxsize", "currsize"])\n',
        excerpt("functools.py", "_HashedSeq", "456cbf6a883be756"), excerpt("functools.py", "_make_key", "030d329d27a97822"),
        excerpt("functools.py", "_lru_cache_wrapper", "ff3bb580fe9a6253")))
    info = {"hits": 41, "misses": 59, "maxsize": 64, "currsize": 59, "expected_currsize": 64,
            "evictions_seen_by_metrics": 0, "process": "worker-3", "sample_keys": ["('sku-1042',)", "('sku-0007',)",
                                                                                  "('sku-1042', <class 'str'>)"]}
    steps = [
        _grep("Find the cache implementation and its statistics.", r"def |currsize|full =|cache_len", [lru], "memo/"),
        _read(lru, "Read the bounded-cache branch of the wrapper.", *_around(lru, "else:", 0, 72)),
        (action("Compare with what the metrics endpoint reports.", "bash",
                command="curl -s localhost:9102/debug/cache/price_lookup | python -m json.tool"),
         observation(json.dumps(info, indent=1) + "\n[exit code: 0]")),
        _read(lru, "Read how keys are built; typed keys may duplicate entries.", *_around(lru, "class _HashedSeq", 0, 40)),
    ]
    return SWE, ("Our metrics say the `price_lookup` cache (maxsize=64, typed=True) never evicts and its currsize "
                 "stays below maxsize while the hit rate is only 41%. Find out whether the cache or the metrics are "
                 "wrong and fix the one that is."), steps


def warehouse_scenario() -> tuple[str, str, list[tuple[str, str]]]:
    rng = random.Random(2202)
    countries = ["DE", "FR", "ES", "IT", "PT", "NL", "BE", "AT", "PL", "SE", "DK", "IE"]
    weeks = [f"2025-W{w:02d}" for w in range(14, 22)]
    orders = [[c, w, rng.randint(180, 2400), round(rng.uniform(38, 96), 2)] for c in countries[:6] for w in weeks]
    returns = [[c, rng.randint(3, 160), round(rng.uniform(0.4, 9.5), 2)] for c in countries]
    steps = [
        (action("Check the orders table first.", "describe_table", table="orders"),
         observation({"table": "orders", "rows": 1873344, "columns": [
             {"name": "id", "type": "bigint"}, {"name": "placed_at", "type": "timestamptz"},
             {"name": "country", "type": "char(2)"}, {"name": "status", "type": "text",
                                                      "values": ["placed", "paid", "shipped", "returned", "cancelled"]},
             {"name": "total_eur", "type": "numeric(10,2)"}, {"name": "customer_id", "type": "bigint"}]})),
        (action("Weekly shipped orders and average basket for the top six countries.", "sql_query",
                query="SELECT country, to_char(placed_at, 'IYYY-\"W\"IW') AS week, count(*), round(avg(total_eur), 2) "
                      "FROM orders WHERE status IN ('shipped', 'returned') AND placed_at >= '2025-03-31' AND placed_at "
                      "< '2025-05-26' AND country IN ('DE','FR','ES','IT','PT','NL') GROUP BY 1, 2 ORDER BY 1, 2"),
         observation({"columns": ["country", "week", "count", "avg_total_eur"], "rows": orders})),
        (action("Returns per country over the same weeks.", "sql_query",
                query="SELECT country, count(*) FILTER (WHERE status = 'returned'), round(100.0 * count(*) FILTER "
                      "(WHERE status = 'returned') / count(*), 2) FROM orders WHERE placed_at >= '2025-03-31' AND "
                      "placed_at < '2025-05-26' GROUP BY 1 ORDER BY 3 DESC"),
         observation({"columns": ["country", "returned", "return_rate_pct"], "rows": returns})),
    ]
    return DATA, ("For the weekly ops review: shipped orders per week for our six biggest countries since the start of "
                  "April, the average basket, and which countries have an unusual return rate. Email the summary to "
                  "ops-review@example.com with the weekly table as CSV."), steps


def sniffer_scenario() -> tuple[str, str, list[tuple[str, str]]]:
    sniff = RepoFile("tabular/sniff.py", _module(
        '"""Dialect sniffing for tabular imports (vendored from CPython\'s csv.Sniffer)."""\n\n'
        "import re\nfrom collections import Counter\n\nfrom tabular.dialects import Dialect\n\n\n"
        "class Sniffer:\n    def __init__(self):\n        # in case there is more than one possible delimiter\n"
        "        self.preferred = [',', '\\t', ';', ' ', ':']\n",
        excerpt("csv.py", "Sniffer._guess_quote_and_delimiter", "919926a0c8395a6b"), excerpt("csv.py", "Sniffer._guess_delimiter", "8044d3982129e2f1")))
    sample = "id,created_at,amount\n1,2025-05-01 09:12:44,19.90\n2,2025-05-01 09:13:02,5.00\n3,2025-05-01 10:40:19,120.00"
    steps = [
        (action("Reproduce on the sample from the report.", "bash",
                command="python -c \"from tabular.sniff import Sniffer; d = Sniffer().sniff(open('samples/"
                        "payments.csv').read(4096)); print(repr(d.delimiter))\""),
         observation("':'\n[exit code: 0]")),
        (action("Look at the sample.", "bash", command="head -4 samples/payments.csv"),
         observation(sample + "\n[exit code: 0]")),
        _grep("Where is the delimiter chosen?", r"def |preferred|delims\[|consistency", [sniff], "tabular/sniff.py"),
        _read(sniff, "Read the frequency-based guess.", *_around(sniff, "def _guess_delimiter", 0, 64)),
        _read(sniff, "The rest of it: how ties between candidates are broken.", *_around(sniff, "# analyze another", 18, 23)),
    ]
    return SWE, ("`tabular import samples/payments.csv` splits rows on ':' instead of ','. The file has timestamps "
                 "with colons in every row. Make the sniffer prefer ',' in this case without breaking the other "
                 "dialect tests."), steps


def tutor_scenario() -> tuple[str, str, list[tuple[str, str]]]:
    quantiles = excerpt("statistics.py", "quantiles", "22d5915a83e8f9ab")
    limit = excerpt("fractions.py", "Fraction.limit_denominator", "59648b0c2888a6dc")
    steps = [
        (action("Read how quantiles computes its cut points.", "get_source", module="statistics", name="quantiles"),
         observation({"module": "statistics", "name": "quantiles", "source": quantiles})),
        (action("Compare both methods on a small sample.", "run_python",
                expression="[statistics.quantiles([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], n=4, method=m) "
                           "for m in ('exclusive', 'inclusive')]"),
         observation({"result": repr([statistics.quantiles(range(1, 11), n=4, method=m)
                                      for m in ("exclusive", "inclusive")])})),
        (action("They also asked about fractions; read limit_denominator.", "get_source", module="fractions",
                name="Fraction.limit_denominator"),
         observation({"module": "fractions", "name": "Fraction.limit_denominator", "source": limit})),
    ]
    return DOCS, ("Why does statistics.quantiles give different quartiles from my spreadsheet for 1..10? And how "
                  "does Fraction.limit_denominator pick 355/113 for pi?"), steps


def scenarios() -> list[tuple[str, str, list[tuple[str, str]]]]:
    """Every scenario: (system prompt, task, steps of (action, observation))."""
    return [textwrap_scenario(), graphlib_scenario(), json_scenario(), tomllib_scenario(), heapq_scenario(),
            lru_scenario(), warehouse_scenario(), sniffer_scenario(), tutor_scenario()]


def requests() -> list[SuiteRequest]:
    """Every scenario cut after 0, 1, 2, ... steps: the model writes the next action."""
    return next_action_requests(scenarios(), NAME, MAX_TOKENS)

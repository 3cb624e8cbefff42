"""The ``agentic`` suite: multi-turn tool-use and SWE-agent-style transcripts.

Each scenario is a task plus the actions an agent took and the JSON observations it got back. A
request is the transcript cut after some number of steps: the model must produce the next action.
Observations travel as user messages (``OBSERVATION: {...}``), as SWE-agent sends them, so every
OpenAI-compatible server accepts the transcripts.
"""

from __future__ import annotations

import json

from specgauge.suites.builtin_source.helpers import next_action_requests
from specgauge.suites.model import SuiteRequest

NAME = "agentic"
MAX_TOKENS = 256
DESCRIPTION = ("Agent transcripts written for specgauge: a system prompt with tool specs, a task, earlier tool "
               "calls with JSON observations; the model writes the next action. Transcripts grow from one turn "
               "to several kilobytes. Intended max_tokens: 256.")

SWE_TOOLS = [
    {"name": "bash", "description": "Run a shell command in the repository root; returns stdout, stderr, exit code.",
     "parameters": {"command": "string"}},
    {"name": "read_file", "description": "Read a file, optionally a line range.",
     "parameters": {"path": "string", "start": "integer?", "end": "integer?"}},
    {"name": "edit_file", "description": "Replace an exact snippet in a file with new text.",
     "parameters": {"path": "string", "old": "string", "new": "string"}},
    {"name": "search", "description": "Search the repository for a regular expression.",
     "parameters": {"pattern": "string", "glob": "string?"}},
    {"name": "submit", "description": "Finish the task with a short summary of the change.",
     "parameters": {"summary": "string"}},
]
ASSISTANT_TOOLS = [
    {"name": "get_weather", "description": "Current weather and 3-day forecast for a city.",
     "parameters": {"city": "string", "units": "metric|imperial"}},
    {"name": "search_flights", "description": "Flights between two airports on a date.",
     "parameters": {"origin": "IATA code", "destination": "IATA code", "date": "YYYY-MM-DD"}},
    {"name": "calendar_list", "description": "Events in the user's calendar between two dates.",
     "parameters": {"start": "YYYY-MM-DD", "end": "YYYY-MM-DD"}},
    {"name": "calendar_create", "description": "Create a calendar event.",
     "parameters": {"title": "string", "start": "ISO datetime", "end": "ISO datetime", "attendees": "list?"}},
    {"name": "send_email", "description": "Send an email.", "parameters": {"to": "string", "subject": "string",
                                                                             "body": "string"}},
    {"name": "sql_query", "description": "Run a read-only SQL query on the analytics database.",
     "parameters": {"query": "string"}},
]


def _system(tools: list[dict], role: str) -> str:
    spec = json.dumps(tools, indent=2)
    return (f"You are {role}. You can call these tools:\n{spec}\n\n"
            "Answer with a THOUGHT line, then one ACTION line holding a JSON object "
            '{"tool": NAME, "arguments": {...}}. You will receive an OBSERVATION with the result. '
            "Call one tool at a time; call `submit` (or reply to the user without an ACTION) when done.")


def _action(thought: str, tool: str, **arguments: object) -> str:
    return f"THOUGHT: {thought}\nACTION: " + json.dumps({"tool": tool, "arguments": arguments})


def _observation(payload: object) -> str:
    return "OBSERVATION: " + json.dumps(payload, indent=1)


SWE = _system(SWE_TOOLS, "a software engineering agent working in a git repository")
ASSISTANT = _system(ASSISTANT_TOOLS, "a personal assistant agent")

# (system, task, [(action, observation), ...])
SCENARIOS = [
    (SWE, "The test `tests/test_dates.py::test_parse_iso_week` fails on Python 3.12. Find the cause and fix it.", [
        (_action("Run the failing test to see the error.", "bash",
                 command="python -m pytest tests/test_dates.py::test_parse_iso_week -x -q"),
         _observation({"exit_code": 1, "stdout": "F\n___ test_parse_iso_week ___\n    assert parse_iso_week('2024-W01')"
                       " == date(2024, 1, 1)\nE   AssertionError: assert datetime.date(2023, 12, 25) == "
                       "datetime.date(2024, 1, 1)\n1 failed in 0.12s", "stderr": ""})),
        (_action("Find parse_iso_week.", "search", pattern="def parse_iso_week"),
         _observation({"matches": [{"path": "src/datekit/weeks.py", "line": 14,
                                    "text": "def parse_iso_week(text: str) -> date:"}]})),
        (_action("Read the implementation.", "read_file", path="src/datekit/weeks.py", start=1, end=40),
         _observation({"content": "from datetime import date, datetime\n\n\ndef parse_iso_week(text: str) -> date:\n"
                       "    \"\"\"'2024-W01' -> the Monday of that ISO week.\"\"\"\n"
                       "    return datetime.strptime(text + '-1', '%Y-W%W-%w').date()\n"})),
    ]),
    (SWE, "Add a `--json` flag to the `stats` CLI command that prints the statistics as JSON instead of a table.", [
        (_action("Locate the command.", "search", pattern="def stats", glob="*.py"),
         _observation({"matches": [{"path": "app/cli.py", "line": 88, "text": "def stats(ctx, since):"}]})),
        (_action("Read the command and its decorators.", "read_file", path="app/cli.py", start=80, end=110),
         _observation({"content": "@cli.command()\n@click.option('--since', default='7d')\n@click.pass_context\n"
                       "def stats(ctx, since):\n    rows = collect_stats(ctx.obj.db, parse_age(since))\n"
                       "    table = Table('metric', 'value')\n    for name, value in rows:\n"
                       "        table.add_row(name, f'{value:,}')\n    console.print(table)\n"})),
        (_action("Add the option and the JSON branch.", "edit_file", path="app/cli.py",
                 old="@click.option('--since', default='7d')\n@click.pass_context\ndef stats(ctx, since):",
                 new="@click.option('--since', default='7d')\n@click.option('--json', 'as_json', is_flag=True)\n"
                     "@click.pass_context\ndef stats(ctx, since, as_json):"),
         _observation({"ok": True, "diff_lines": 3})),
        (_action("Now print JSON when the flag is set.", "edit_file", path="app/cli.py",
                 old="    table = Table('metric', 'value')",
                 new="    if as_json:\n        click.echo(json.dumps(dict(rows)))\n        return\n"
                     "    table = Table('metric', 'value')"),
         _observation({"ok": True, "diff_lines": 4})),
    ]),
    (SWE, "Users report that uploading a file larger than 2 GB returns HTTP 500. Investigate.", [
        (_action("Search for the upload handler.", "search", pattern="def (upload|handle_upload)"),
         _observation({"matches": [{"path": "server/routes/files.py", "line": 41,
                                    "text": "async def upload(request):"}]})),
        (_action("Read it.", "read_file", path="server/routes/files.py", start=35, end=75),
         _observation({"content": "async def upload(request):\n    body = await request.body()\n"
                       "    if len(body) > settings.MAX_UPLOAD:\n        raise HTTPException(413)\n"
                       "    digest = hashlib.sha256(body).hexdigest()\n    await storage.put(digest, body)\n"
                       "    return {'id': digest, 'size': len(body)}\n"})),
        (_action("Check the logs for the 500.", "bash", command="grep -m 3 -A 4 'Traceback' logs/server.log"),
         _observation({"exit_code": 0, "stdout": "Traceback (most recent call last):\n  File \"server/routes/files.py\","
                       " line 42, in upload\n    body = await request.body()\nMemoryError", "stderr": ""})),
    ]),
    (SWE, "Bump the minimum supported Python to 3.10 and remove compatibility code for older versions.", [
        (_action("Find version checks.", "search", pattern="sys.version_info"),
         _observation({"matches": [{"path": "pkg/compat.py", "line": 3, "text": "if sys.version_info < (3, 9):"},
                                   {"path": "pkg/io.py", "line": 17, "text": "if sys.version_info >= (3, 8):"},
                                   {"path": "setup.cfg", "line": 12, "text": "python_requires = >=3.7"}]})),
        (_action("Read the compat module.", "read_file", path="pkg/compat.py"),
         _observation({"content": "import sys\n\nif sys.version_info < (3, 9):\n    from typing import Dict, List\n"
                       "    def removeprefix(s, p):\n        return s[len(p):] if s.startswith(p) else s\nelse:\n"
                       "    Dict, List = dict, list\n    def removeprefix(s, p):\n        return s.removeprefix(p)\n"})),
        (_action("See who imports compat.", "search", pattern="from pkg.compat import|import pkg.compat"),
         _observation({"matches": [{"path": "pkg/paths.py", "line": 2, "text": "from pkg.compat import removeprefix"},
                                   {"path": "pkg/models.py", "line": 5, "text": "from pkg.compat import Dict, List"}]})),
    ]),
    (SWE, "CI is red: `ruff check` reports errors after the last merge. Make it green without disabling rules.", [
        (_action("Run ruff.", "bash", command="ruff check . --output-format concise"),
         _observation({"exit_code": 1, "stdout": "app/api.py:12:1: F401 `os` imported but unused\n"
                       "app/api.py:88:5: E722 Do not use bare `except`\napp/jobs.py:40:9: B006 Do not use "
                       "mutable data structures for argument defaults\nFound 3 errors.", "stderr": ""})),
        (_action("Look at the bare except.", "read_file", path="app/api.py", start=80, end=95),
         _observation({"content": "    try:\n        payload = decode(token)\n    except:\n"
                       "        return None\n    return payload.get('sub')\n"})),
        (_action("Narrow the except clause.", "edit_file", path="app/api.py", old="    except:\n        return None",
                 new="    except (ValueError, DecodeError):\n        return None"),
         _observation({"ok": True, "diff_lines": 1})),
    ]),
    (SWE, "Write a migration that renames the column `users.fullname` to `users.display_name` without downtime.", [
        (_action("See existing migrations.", "bash", command="ls migrations | tail -5"),
         _observation({"exit_code": 0, "stdout": "0041_add_orders_index.py\n0042_user_locale.py\n"
                       "0043_drop_legacy_tokens.py\n0044_orders_status_check.py\n0045_user_avatar.py",
                       "stderr": ""})),
        (_action("Read the latest for style.", "read_file", path="migrations/0045_user_avatar.py"),
         _observation({"content": "from alembic import op\nimport sqlalchemy as sa\n\nrevision = '0045'\n"
                       "down_revision = '0044'\n\ndef upgrade():\n    op.add_column('users', sa.Column('avatar_url', "
                       "sa.Text(), nullable=True))\n\ndef downgrade():\n    op.drop_column('users', 'avatar_url')\n"})),
        (_action("Find code reading fullname.", "search", pattern="fullname"),
         _observation({"matches": [{"path": "app/models.py", "line": 22, "text": "    fullname = Column(Text)"},
                                   {"path": "app/api/users.py", "line": 51, "text": "'name': user.fullname,"},
                                   {"path": "app/emails.py", "line": 9, "text": "Hello {user.fullname},"}]})),
    ]),
    (ASSISTANT, "I'm flying from Lisbon to Berlin next Friday (2025-06-13). Find a morning flight and tell me the "
                "weather there for the weekend.", [
        (_action("Search flights on the date.", "search_flights", origin="LIS", destination="BER", date="2025-06-13"),
         _observation({"flights": [{"flight": "TP530", "departs": "07:05", "arrives": "11:15", "price_eur": 212},
                                   {"flight": "FR1234", "departs": "09:40", "arrives": "13:55", "price_eur": 89},
                                   {"flight": "EW8871", "departs": "15:20", "arrives": "19:30", "price_eur": 131}]})),
        (_action("Get the Berlin forecast.", "get_weather", city="Berlin", units="metric"),
         _observation({"city": "Berlin", "now": {"temp_c": 19, "sky": "cloudy"},
                       "forecast": [{"day": "Fri", "high": 23, "low": 13, "rain_pct": 10},
                                    {"day": "Sat", "high": 25, "low": 15, "rain_pct": 5},
                                    {"day": "Sun", "high": 21, "low": 14, "rain_pct": 60}]})),
        (_action("Check the calendar for conflicts that morning.", "calendar_list", start="2025-06-13",
                 end="2025-06-13"),
         _observation({"events": [{"title": "Dentist", "start": "2025-06-13T08:30", "end": "2025-06-13T09:00"}]})),
    ]),
    (ASSISTANT, "Set up a 30-minute call with ana@example.com and li@example.com sometime Tuesday afternoon and "
                "email them the invite.", [
        (_action("Look at Tuesday.", "calendar_list", start="2025-06-17", end="2025-06-17"),
         _observation({"events": [{"title": "Team sync", "start": "2025-06-17T13:00", "end": "2025-06-17T14:00"},
                                  {"title": "1:1 with Sam", "start": "2025-06-17T15:00", "end": "2025-06-17T15:30"}]})),
        (_action("14:00 to 14:30 is free; create the event.", "calendar_create", title="Call: Ana, Li",
                 start="2025-06-17T14:00", end="2025-06-17T14:30", attendees=["ana@example.com", "li@example.com"]),
         _observation({"ok": True, "event_id": "evt_83hd2", "link": "https://cal.example.com/evt_83hd2"})),
        (_action("Email the attendees.", "send_email", to="ana@example.com, li@example.com",
                 subject="Call on Tuesday 14:00",
                 body="Hi Ana, hi Li,\nI booked Tuesday 14:00-14:30: https://cal.example.com/evt_83hd2\nBest"),
         _observation({"ok": True, "message_id": "msg_99a1"})),
    ]),
    (ASSISTANT, "How many orders did we ship last month per country, and which country grew the most versus the "
                "month before?", [
        (_action("Query last month by country.", "sql_query",
                 query="SELECT country, count(*) FROM orders WHERE status = 'shipped' AND placed_at >= "
                       "date_trunc('month', now()) - interval '1 month' AND placed_at < date_trunc('month', now()) "
                       "GROUP BY country ORDER BY 2 DESC"),
         _observation({"columns": ["country", "count"], "rows": [["DE", 4120], ["FR", 2890], ["ES", 1733],
                                                                 ["IT", 1502], ["PT", 611]]})),
        (_action("Now the month before.", "sql_query",
                 query="SELECT country, count(*) FROM orders WHERE status = 'shipped' AND placed_at >= "
                       "date_trunc('month', now()) - interval '2 month' AND placed_at < date_trunc('month', now()) "
                       "- interval '1 month' GROUP BY country ORDER BY 2 DESC"),
         _observation({"columns": ["country", "count"], "rows": [["DE", 3980], ["FR", 2412], ["ES", 1801],
                                                                 ["IT", 1377], ["PT", 402]]})),
        (_action("Check whether PT had a promotion, since it grew a lot.", "sql_query",
                 query="SELECT name, starts_at, ends_at FROM promotions WHERE country = 'PT' AND "
                       "starts_at >= now() - interval '2 month'"),
         _observation({"columns": ["name", "starts_at", "ends_at"],
                       "rows": [["Summer launch", "2025-05-01", "2025-05-31"]]})),
    ]),
    (SWE, "The `export` job sometimes writes a truncated CSV. Reproduce and fix it.", [
        (_action("Find the job.", "search", pattern="class ExportJob"),
         _observation({"matches": [{"path": "jobs/export.py", "line": 10, "text": "class ExportJob(BaseJob):"}]})),
        (_action("Read it.", "read_file", path="jobs/export.py", start=10, end=45),
         _observation({"content": "class ExportJob(BaseJob):\n    def run(self, query, path):\n"
                       "        f = open(path, 'w')\n        writer = csv.writer(f)\n"
                       "        for row in self.db.stream(query):\n            writer.writerow(row)\n"
                       "        self.notify(path)\n"})),
        (_action("Confirm the notified consumer reads before the file is flushed.", "bash",
                 command="python scripts/repro_export.py --rows 200000"),
         _observation({"exit_code": 0, "stdout": "expected 200001 lines, consumer saw 196608", "stderr": ""})),
    ]),
    (SWE, "Add retry with jitter to the HTTP client used for webhooks; keep the public API unchanged.", [
        (_action("Find the client.", "search", pattern="class WebhookClient"),
         _observation({"matches": [{"path": "hooks/client.py", "line": 8, "text": "class WebhookClient:"}]})),
        (_action("Read it.", "read_file", path="hooks/client.py"),
         _observation({"content": "import httpx\n\nclass WebhookClient:\n    def __init__(self, timeout=5.0):\n"
                       "        self.http = httpx.Client(timeout=timeout)\n\n    def send(self, url, payload):\n"
                       "        response = self.http.post(url, json=payload)\n        response.raise_for_status()\n"
                       "        return response.status_code\n"})),
        (_action("Check how tests fake HTTP.", "search", pattern="WebhookClient", glob="tests/*.py"),
         _observation({"matches": [{"path": "tests/test_hooks.py", "line": 5,
                                    "text": "client = WebhookClient(); client.http = httpx.Client(transport=mock)"}]})),
    ]),
]


def requests() -> list[SuiteRequest]:
    """Every scenario cut after 0, 1, 2, ... steps: the model writes the next action."""
    return next_action_requests(SCENARIOS, NAME, MAX_TOKENS)

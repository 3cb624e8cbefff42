"""The ``coding`` suite: write, fix, refactor, explain and complete code, from one line to pasted files."""

from __future__ import annotations

from specgauge.suites.builtin_source.code_contexts import (CSV_REPORT_PY, ORDERS_SQL, RATE_LIMITER_PY, TODO_API_TS,
                                                            TOKENIZER_RS, WORKER_POOL_GO)
from specgauge.suites.builtin_source.helpers import ask
from specgauge.suites.model import SuiteRequest

NAME = "coding"
MAX_TOKENS = 512
DESCRIPTION = ("Coding requests written for specgauge: write, fix, refactor, explain and complete code in Python, "
               "TypeScript, Go, Rust, SQL and shell; from one-line questions to pasted multi-kilobyte files. "
               "Intended max_tokens: 512 (256 for short answers, 768 for whole-file rewrites).")

SHORT = [
    "Write a Python function that checks whether a string is a palindrome, ignoring case and punctuation.",
    "In Python, how do I read a large file line by line without loading it all into memory?",
    "Write a SQL query that returns the second highest salary from an employees table.",
    "What is the difference between a list and a tuple in Python? Give a short example of when to use each.",
    "Write a bash one-liner that finds the 10 largest files under the current directory.",
    "Write a Go function that reverses a slice of ints in place.",
    "How do I make an HTTP GET request with a 5 second timeout in Python using only the standard library?",
    "Write a TypeScript type guard that checks whether an unknown value is a non-empty array of strings.",
    "Explain what `git rebase -i HEAD~3` does and when you would use it.",
    "Write a Python generator that yields the prime numbers below n using the sieve of Eratosthenes.",
    "Write a regular expression that matches ISO 8601 dates like 2024-03-09 and explain each part.",
    "In Rust, what is the difference between `String` and `&str`?",
    "Write a Python decorator that retries a function up to 3 times with exponential backoff on exceptions.",
    "Convert this loop to a list comprehension: `result = []\nfor x in data:\n    if x % 3 == 0:\n        result.append(x * x)`",
    "Write a JavaScript debounce function and explain how it differs from throttle.",
    "Write a Dockerfile for a small Flask app that runs with gunicorn as a non-root user.",
    "How do I undo the last commit in git but keep the changes in my working tree?",
    "Write a C function that counts the set bits of a 32-bit unsigned integer.",
    "Write a pytest test for a function `slugify(title: str) -> str` that lower-cases, trims and joins words with dashes.",
    "Explain Big-O of inserting into a Python dict and why it is amortized.",
    "Write a Python dataclass `Money` with an amount in cents and a currency, supporting addition of equal currencies only.",
    "Implement binary search in Python returning the insertion point, like bisect_left, without using the bisect module.",
    "Write a SQL migration that adds a non-null `updated_at` column with a default to an existing `users` table in PostgreSQL.",
    "What does the `async` keyword do in Python, and why does calling an async function not run it?",
    "Write a Makefile with targets `build`, `test` and `clean` for a small C project with sources in src/.",
    "Write a Go HTTP handler that returns the current server time as JSON.",
    "Write a Python function that merges two sorted lists into one sorted list in linear time.",
    "Explain the difference between `==` and `is` in Python with an example where they disagree.",
    "Write a shell script that backs up a directory to a timestamped tar.gz and deletes backups older than 7 days.",
    "Write a TypeScript function `groupBy<T, K>(items: T[], key: (t: T) => K): Map<K, T[]>`.",
    "What is a race condition? Show a tiny Python threading example that has one and fix it.",
    "Write a Python function that flattens an arbitrarily nested list of lists.",
    "Write a Rust function that returns the word counts of a text as a HashMap<String, usize>.",
    "Write a GitHub Actions workflow that runs `pytest` on Python 3.11 and 3.12 for every pull request.",
    "Complete this function:\n\ndef chunked(iterable, size):\n    \"\"\"Yield lists of `size` items; the last list may be shorter.\"\"\"\n",
    "Complete the missing method:\n\nclass Stack:\n    def __init__(self):\n        self._items = []\n\n    def push(self, item):\n        self._items.append(item)\n\n    def pop(self):\n        # TODO: raise IndexError with a clear message when empty\n",
    "Fix the bug:\n\ndef add_item(item, items=[]):\n    items.append(item)\n    return items\n",
    "Why does this JavaScript print 3 three times, and how do I fix it?\n\nfor (var i = 0; i < 3; i++) {\n  setTimeout(() => console.log(i), 0);\n}",
    "Fix this SQL so that customers with no orders are also listed with a count of 0:\n\nSELECT c.name, count(*) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.name;",
    "This Python code is slow for 100k items. Why, and how would you speed it up?\n\nseen = []\nfor item in items:\n    if item not in seen:\n        seen.append(item)",
    "Refactor this into smaller functions with clear names:\n\ndef process(d):\n    r = []\n    for k in d:\n        if d[k] > 0 and not k.startswith('_'):\n            v = d[k] * 1.2\n            if v > 100:\n                v = 100\n            r.append((k.upper(), round(v, 2)))\n    r.sort(key=lambda t: -t[1])\n    return r",
    "Write a Python context manager that times the block it wraps and logs the duration in milliseconds.",
]

WITH_CONTEXT = [
    ("Explain how this rate limiter works, step by step, including what the OrderedDict is for.\n\n```python\n{code}```",
     RATE_LIMITER_PY, 512),
    ("This rate limiter evicts the wrong key when it is full. Find the bug and fix it.\n\n```python\n{code}```",
     RATE_LIMITER_PY, 256),
    ("Write pytest tests for TokenBucketLimiter using a fake clock: burst, refill, eviction and wait_time.\n\n"
     "```python\n{code}```", RATE_LIMITER_PY, 768),
    ("Add type hints to every function and method of this module, and make `middleware` preserve the handler's "
     "name with functools.wraps.\n\n```python\n{code}```", RATE_LIMITER_PY, 768),
    ("Review this script. List every bug and fragile spot you see (there are at least three), then give a fixed "
     "version.\n\n```python\n{code}```", CSV_REPORT_PY, 768),
    ("Rewrite this script to use pandas, keeping the same output.\n\n```python\n{code}```", CSV_REPORT_PY, 512),
    ("What happens if the CSV file is empty? Change the code so it prints a clear message instead of crashing.\n\n"
     "```python\n{code}```", CSV_REPORT_PY, 256),
    ("Explain this Go worker pool. Does Submit ever block? What happens if Submit is called after Close?\n\n"
     "```go\n{code}```", WORKER_POOL_GO, 512),
    ("Make this worker pool respect context cancellation: workers stop when ctx is done, and the retry sleep is "
     "interruptible.\n\n```go\n{code}```", WORKER_POOL_GO, 768),
    ("Submit returns ErrClosed in the comments of the design doc but never does. Implement it safely.\n\n"
     "```go\n{code}```", WORKER_POOL_GO, 512),
    ("Add an index strategy for this schema given that the monthly revenue query runs every minute. Explain each "
     "index.\n\n```sql\n{code}```", ORDERS_SQL, 512),
    ("Write a query on this schema that returns, for each customer, their first and most recent order dates and "
     "their lifetime revenue, including customers with no orders.\n\n```sql\n{code}```", ORDERS_SQL, 384),
    ("Is `orders.total_cents` redundant with `order_items`? Write a query that finds orders where they disagree.\n\n"
     "```sql\n{code}```", ORDERS_SQL, 384),
    ("Extend this tokenizer to support two-character operators `**` and `//` and write unit tests.\n\n"
     "```rust\n{code}```", TOKENIZER_RS, 768),
    ("The number branch accepts inputs like `1.2.3`. Explain what happens and fix it with a clearer error.\n\n"
     "```rust\n{code}```", TOKENIZER_RS, 384),
    ("Write a recursive-descent parser that consumes these tokens and evaluates arithmetic with precedence and "
     "parentheses.\n\n```rust\n{code}```", TOKENIZER_RS, 768),
    ("Find the bugs in this Express handler code (there is one that crashes the server) and fix them.\n\n"
     "```ts\n{code}```", TODO_API_TS, 512),
    ("Add input validation to POST and PATCH (title must be a non-empty string under 200 characters) and return "
     "400 with a JSON error otherwise.\n\n```ts\n{code}```", TODO_API_TS, 512),
    ("Write supertest tests for every route of this API.\n\n```ts\n{code}```", TODO_API_TS, 768),
    ("Convert this in-memory store to use a SQLite database via better-sqlite3, keeping the same routes.\n\n"
     "```ts\n{code}```", TODO_API_TS, 768),
]


def requests() -> list[SuiteRequest]:
    """Short tasks first, then tasks on pasted files."""
    short = [ask(text, NAME, 256 if len(text) < 120 else MAX_TOKENS) for text in SHORT]
    long = [ask(template.replace("{code}", code), NAME, max_tokens) for template, code, max_tokens in WITH_CONTEXT]
    return short + long

"""Source files pasted into coding prompts (written for this project; multi-kilobyte on purpose)."""

RATE_LIMITER_PY = '''\
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass


@dataclass
class Bucket:
    tokens: float
    updated: float


class TokenBucketLimiter:
    """Per-key token buckets with an LRU bound on the number of keys tracked."""

    def __init__(self, rate_per_s, burst, max_keys=10000, clock=time.monotonic):
        self.rate = rate_per_s
        self.burst = burst
        self.max_keys = max_keys
        self.clock = clock
        self.buckets = OrderedDict()
        self.lock = threading.Lock()

    def _refill(self, bucket, now):
        elapsed = now - bucket.updated
        bucket.tokens = min(self.burst, bucket.tokens + elapsed * self.rate)
        bucket.updated = now

    def allow(self, key, cost=1.0):
        now = self.clock()
        with self.lock:
            bucket = self.buckets.get(key)
            if bucket is None:
                bucket = Bucket(tokens=self.burst, updated=now)
                self.buckets[key] = bucket
                if len(self.buckets) > self.max_keys:
                    self.buckets.popitem(last=True)
            else:
                self.buckets.move_to_end(key)
            self._refill(bucket, now)
            if bucket.tokens >= cost:
                bucket.tokens -= cost
                return True
            return False

    def wait_time(self, key, cost=1.0):
        with self.lock:
            bucket = self.buckets.get(key)
            if bucket is None:
                return 0.0
            self._refill(bucket, self.clock())
            missing = cost - bucket.tokens
            return max(0.0, missing / self.rate)


def middleware(limiter, get_key):
    def wrap(handler):
        def inner(request):
            key = get_key(request)
            if not limiter.allow(key):
                retry = limiter.wait_time(key)
                return {"status": 429, "headers": {"Retry-After": str(int(retry) + 1)}, "body": "slow down"}
            return handler(request)
        return inner
    return wrap
'''

CSV_REPORT_PY = '''\
import csv
import sys
from datetime import datetime

def load(path):
    rows = []
    f = open(path)
    for row in csv.DictReader(f):
        row["amount"] = float(row["amount"])
        row["date"] = datetime.strptime(row["date"], "%Y-%m-%d")
        rows.append(row)
    return rows

def monthly_totals(rows):
    totals = {}
    for r in rows:
        key = (r["date"].year, r["date"].month)
        totals[key] = totals.get(key, 0) + r["amount"]
    return totals

def top_customers(rows, n=5):
    by_customer = {}
    for r in rows:
        by_customer[r["customer"]] = by_customer.get(r["customer"], 0) + r["amount"]
    ranked = sorted(by_customer.items(), key=lambda kv: kv[1])
    return ranked[:n]

def average_order(rows):
    return sum(r["amount"] for r in rows) / len(rows)

def main():
    rows = load(sys.argv[1])
    for (year, month), total in sorted(monthly_totals(rows).items()):
        print(f"{year}-{month}: {total:.2f}")
    print("top customers:")
    for name, total in top_customers(rows):
        print(f"  {name}: {total:.2f}")
    print(f"average order: {average_order(rows):.2f}")

if __name__ == "__main__":
    main()
'''

WORKER_POOL_GO = '''\
package jobs

import (
	"context"
	"errors"
	"sync"
	"time"
)

type Job struct {
	ID      string
	Payload []byte
	Retries int
}

type Result struct {
	JobID    string
	Err      error
	Duration time.Duration
}

type Handler func(ctx context.Context, job Job) error

type Pool struct {
	workers int
	handler Handler
	jobs    chan Job
	results chan Result
	wg      sync.WaitGroup
}

func NewPool(workers int, queue int, handler Handler) *Pool {
	return &Pool{
		workers: workers,
		handler: handler,
		jobs:    make(chan Job, queue),
		results: make(chan Result, queue),
	}
}

func (p *Pool) Start(ctx context.Context) {
	for i := 0; i < p.workers; i++ {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for job := range p.jobs {
				start := time.Now()
				err := p.handler(ctx, job)
				for attempt := 0; err != nil && attempt < job.Retries; attempt++ {
					time.Sleep(time.Duration(attempt*100) * time.Millisecond)
					err = p.handler(ctx, job)
				}
				p.results <- Result{JobID: job.ID, Err: err, Duration: time.Since(start)}
			}
		}()
	}
}

var ErrClosed = errors.New("pool closed")

func (p *Pool) Submit(job Job) error {
	p.jobs <- job
	return nil
}

func (p *Pool) Close() {
	close(p.jobs)
	p.wg.Wait()
	close(p.results)
}

func (p *Pool) Results() <-chan Result {
	return p.results
}
'''

ORDERS_SQL = '''\
CREATE TABLE customers (
    id          BIGSERIAL PRIMARY KEY,
    email       TEXT NOT NULL UNIQUE,
    country     TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE orders (
    id           BIGSERIAL PRIMARY KEY,
    customer_id  BIGINT NOT NULL REFERENCES customers(id),
    status       TEXT NOT NULL CHECK (status IN ('pending', 'paid', 'shipped', 'refunded')),
    total_cents  INTEGER NOT NULL,
    placed_at    TIMESTAMPTZ NOT NULL
);

CREATE TABLE order_items (
    order_id     BIGINT NOT NULL REFERENCES orders(id),
    sku          TEXT NOT NULL,
    quantity     INTEGER NOT NULL,
    price_cents  INTEGER NOT NULL
);

-- Monthly revenue per country for paid and shipped orders
SELECT c.country,
       date_trunc('month', o.placed_at) AS month,
       sum(o.total_cents) / 100.0 AS revenue
FROM orders o
JOIN customers c ON c.id = o.customer_id
WHERE o.status IN ('paid', 'shipped')
GROUP BY c.country, month
ORDER BY month, revenue DESC;
'''

TOKENIZER_RS = '''\
#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    Number(f64),
    Ident(String),
    Op(char),
    LParen,
    RParen,
}

pub fn tokenize(input: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = input.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            let value = text.parse::<f64>().map_err(|e| format!("bad number {}: {}", text, e))?;
            tokens.push(Token::Number(value));
        } else if c.is_alphabetic() {
            let start = i;
            while i < chars.len() && chars[i].is_alphanumeric() {
                i += 1;
            }
            tokens.push(Token::Ident(chars[start..i].iter().collect()));
        } else if "+-*/^".contains(c) {
            tokens.push(Token::Op(c));
            i += 1;
        } else if c == '(' {
            tokens.push(Token::LParen);
            i += 1;
        } else if c == ')' {
            tokens.push(Token::RParen);
            i += 1;
        } else {
            return Err(format!("unexpected character '{}' at {}", c, i));
        }
    }
    Ok(tokens)
}
'''

TODO_API_TS = '''\
import express, { Request, Response } from "express";

interface Todo {
  id: number;
  title: string;
  done: boolean;
  createdAt: Date;
}

const app = express();
app.use(express.json());

let todos: Todo[] = [];
let nextId = 1;

app.get("/todos", (req: Request, res: Response) => {
  const onlyOpen = req.query.open === "true";
  res.json(onlyOpen ? todos.filter((t) => !t.done) : todos);
});

app.post("/todos", (req: Request, res: Response) => {
  const title = req.body.title;
  const todo: Todo = { id: nextId++, title, done: false, createdAt: new Date() };
  todos.push(todo);
  res.status(201).json(todo);
});

app.patch("/todos/:id", (req: Request, res: Response) => {
  const todo = todos.find((t) => t.id == Number(req.params.id));
  if (!todo) {
    res.status(404).json({ error: "not found" });
  }
  todo.done = req.body.done ?? todo.done;
  todo.title = req.body.title ?? todo.title;
  res.json(todo);
});

app.delete("/todos/:id", (req: Request, res: Response) => {
  todos = todos.filter((t) => t.id !== Number(req.params.id));
  res.status(204).end();
});

app.listen(3000, () => console.log("listening on 3000"));
'''

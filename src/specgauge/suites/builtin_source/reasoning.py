"""The ``reasoning`` suite: arithmetic word problems, algebra, probability, proofs and logic puzzles."""

from __future__ import annotations

from specgauge.suites.builtin_source.helpers import ask
from specgauge.suites.model import SuiteRequest

NAME = "reasoning"
MAX_TOKENS = 512
DESCRIPTION = ("Math and logic problems written for specgauge, asked to be solved step by step: word problems, "
               "algebra, probability, number theory, short proofs, constraint puzzles, and problems over pasted "
               "data tables. Intended max_tokens: 512 (768 for proofs and long puzzles).")

PROBLEMS = [
    "What is 17% of 2,340? Show the calculation.",
    "A shirt costs $40 after a 20% discount. What was the original price?",
    "Solve for x: 3(x - 4) + 7 = 2x + 9.",
    "A car travels 150 km in 1 hour 40 minutes. What is its average speed in km/h?",
    "How many ways can 5 people sit in a row if two of them refuse to sit next to each other?",
    "Is 391 prime? Explain how you decide.",
    "The sum of three consecutive even numbers is 138. What are they?",
    "A tank fills in 6 hours with pipe A and in 9 hours with pipe B. How long with both open?",
    "What is the probability of getting at least one six in four rolls of a fair die?",
    "Find the greatest common divisor of 462 and 1071 using the Euclidean algorithm.",
    "If log2(x) + log2(x - 2) = 3, what is x?",
    "A rectangle's length is 3 cm more than twice its width and its perimeter is 42 cm. Find its area.",
    "Prove that the square root of 2 is irrational.",
    "Prove that the sum of the first n odd numbers is n².",
    "How many trailing zeros does 100! have? Explain why.",
    "A bat and a ball cost $1.10 together. The bat costs $1.00 more than the ball. How much is the ball?",
    "Two trains 300 km apart head toward each other at 70 km/h and 80 km/h. When and where do they meet?",
    "An investment grows 5% a year, compounded yearly. How many years until it doubles? Compare with the rule of 72.",
    "What is the expected number of coin flips until you see two heads in a row?",
    "Find all integer solutions of x² - y² = 45.",
    "In a class of 30, 18 play football, 12 play chess and 5 play both. How many play neither?",
    "Three boxes are labelled 'apples', 'oranges' and 'mixed', and every label is wrong. You may draw one fruit "
    "from one box. How do you relabel all boxes correctly?",
    "Alice is older than Bob. Carol is younger than Dan but older than Alice. Who is the second oldest?",
    "A says: 'B is a liar.' B says: 'C is a liar.' C says: 'A and B are both liars.' Each is a knight (always "
    "truthful) or a liar. Who is what?",
    "Every day a lily pad patch doubles in size. It covers the pond on day 48. On which day did it cover half?",
    "If all bloops are razzies and some razzies are lazzies, must some bloops be lazzies? Explain.",
    "You have 8 coins, one heavier than the rest, and a balance scale. What is the minimum number of weighings "
    "to find it, and how?",
    "A clock shows 3:15. What is the angle between the hour and minute hands?",
    "Differentiate f(x) = x³·ln(x) and find where f'(x) = 0 for x > 0.",
    "Compute the integral of x·e^x from 0 to 1.",
    "A 10% salt solution is mixed with a 30% solution to make 20 litres of 25%. How much of each?",
    "What is the remainder when 7^100 is divided by 5?",
    "Four people must cross a bridge at night with one torch; they take 1, 2, 5 and 10 minutes, at most two "
    "cross at once at the slower one's pace. What is the fastest total time? Show the schedule.",
    "A disease affects 1 in 1,000 people. A test is 99% sensitive and 98% specific. If someone tests positive, "
    "what is the chance they have the disease?",
    "Five houses in a row are painted red, green, blue, white and yellow. The green house is immediately left of "
    "the white one. The red house is in the middle. The blue house is at one end. The yellow house is not next to "
    "the blue one. Give every possible order, with your reasoning.",
    "Schedule these tasks on two machines to finish as early as possible; each task runs on one machine and "
    "tasks B and D need A to finish first. Durations: A 3h, B 2h, C 4h, D 5h, E 1h, F 2h. What is the shortest "
    "makespan and the schedule?",
]

TABLE = """\
| month | visitors | signups | paid |
|-------|----------|---------|------|
| Jan   | 12,400   | 620     | 93   |
| Feb   | 11,900   | 655     | 101  |
| Mar   | 15,300   | 720     | 108  |
| Apr   | 16,100   | 690     | 117  |
| May   | 18,800   | 941     | 160  |
| Jun   | 17,200   | 860     | 151  |
"""

WITH_DATA = [
    f"Using this table, compute the signup rate (signups/visitors) and the paid conversion (paid/signups) for "
    f"each month. Which month had the best paid conversion?\n\n{TABLE}",
    f"From this table, what was the month-over-month growth in paid users, and what is the average growth rate? "
    f"If it continues, how many paid users would July have?\n\n{TABLE}",
    f"Someone claims that more visitors always means more paid users. Does this table support the claim? "
    f"Argue with numbers.\n\n{TABLE}",
    "A store sells three bundles:\n- Bundle A: 2 pens and 3 notebooks for $13\n- Bundle B: 4 pens and 1 notebook "
    "for $11\n- Bundle C: 1 pen, 1 notebook and 1 ruler for $6.50\nWhat do a pen, a notebook and a ruler each cost, "
    "and would buying 6 pens and 4 notebooks be cheaper as bundles or separately at those prices?",
    "Here is a log of a queue: arrivals at minutes 0, 1, 1, 3, 4, 4, 4, 7, 9, 10; one server; each job takes "
    "exactly 2 minutes; jobs are served in arrival order. For each job give its start time, finish time and "
    "waiting time, then the average wait and the maximum queue length.",
    "A game: you roll two dice and win the product if it is even, else you pay $5. What is the expected value "
    "of one round? Should you play 100 rounds? Explain with variance too.",
]


def requests() -> list[SuiteRequest]:
    """Short problems, then problems over pasted data."""
    built = [ask(text + ("" if "step" in text else " Think step by step."), NAME,
                 768 if text.startswith("Prove") or len(text) > 250 else MAX_TOKENS) for text in PROBLEMS]
    return built + [ask(text, NAME, 768) for text in WITH_DATA]

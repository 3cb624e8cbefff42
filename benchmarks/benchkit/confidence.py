"""The buckets of the target's probability of its own greedy token, shared by the acceptance scripts."""

# Edges of the buckets of p (the last edge past 1.0 so that p = 1 falls in the top bucket).
EDGES = (0.0, 0.3, 0.5, 0.7, 0.9, 1.0001)

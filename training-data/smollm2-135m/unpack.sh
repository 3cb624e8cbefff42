#!/usr/bin/env bash
# Unpack the SmolLM2 head's regenerated responses into RUN/regenerated/, where `specgauge train
# draft --run-dir RUN` reuses every source whose meta.json matches its request and extends those it
# asks more prompts of (docs/eagle3.md, "Training"). Usage: training-data/smollm2-135m/unpack.sh RUN
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 RUN_DIR" >&2; exit 2; }
here="$(cd "$(dirname "$0")" && pwd)/regenerated"
for meta in "$here"/*/*/meta.json; do
  folder="$(dirname "$meta")"; rel="${folder#"$here"/}"
  mkdir -p "$1/regenerated/$rel"
  cp "$meta" "$1/regenerated/$rel/meta.json"
  xz -dc "$folder/shard-00000.jsonl.xz" > "$1/regenerated/$rel/shard-00000.jsonl"
  echo "$rel: $(wc -l < "$1/regenerated/$rel/shard-00000.jsonl") responses"
done

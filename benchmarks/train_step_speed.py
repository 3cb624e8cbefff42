"""Training throughput of target shapes on this CPU: fp32 against bf16 autocast, short and long windows.

    PYTHONPATH=src python benchmarks/train_step_speed.py
    PYTHONPATH=src python benchmarks/train_step_speed.py --cases shipped:512:16:fp32,wide14m:4096:2:fp32

Each case ``SHAPE:SEQ_LEN:BATCH:PRECISION`` runs one warm-up and ``--steps`` optimizer steps of
``specgauge train target``'s model, loss and AdamW on random tokens (2 threads) and prints the
median seconds per step and tokens per second. Shapes: ``shipped`` (hidden 320, 6 layers, 8 heads,
head_dim 40) and ``wide14m`` (hidden 384, 8 layers, 6 heads, head_dim 64). Cases run one after the
other: compare them within one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402

from specgauge.engine.models.llama import LlamaForCausalLM  # noqa: E402
from specgauge.train.target import ModelShape, TrainConfig, build_optimizer, lm_loss  # noqa: E402

SHAPES = {
    "shipped": ModelShape(hidden_size=320, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=4,
                          intermediate_size=864, max_position_embeddings=4096),
    "wide14m": ModelShape(hidden_size=384, num_hidden_layers=8, num_attention_heads=6, num_key_value_heads=2,
                          intermediate_size=1024, max_position_embeddings=4096),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="shipped:512:16:bf16,shipped:512:16:fp32,wide14m:512:16:fp32,"
                                           "wide14m:2048:4:fp32,wide14m:4096:2:fp32")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(2)
    for case in args.cases.split(","):
        shape_name, seq, batch, precision = case.split(":")
        seq, batch, bf16 = int(seq), int(batch), precision == "bf16"
        model = LlamaForCausalLM(SHAPES[shape_name].llama_config(4096))
        optimizer = build_optimizer(model, TrainConfig())
        tokens = torch.randint(0, 4096, (batch, seq + 1))
        times = []
        for _ in range(args.steps + 1):
            started = time.perf_counter()
            loss = lm_loss(model, tokens[:, :-1], tokens[:, 1:], None, bf16)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            times.append(time.perf_counter() - started)
        step = statistics.median(times[1:])
        print(f"{case}: {model.num_parameters() / 1e6:.1f}M parameters, {step:.2f} s/step, {batch * seq / step:.0f} tok/s",
              flush=True)


if __name__ == "__main__":
    main()

"""Every training-data format gives the same prompts: JSONL tokens/messages, npy, npz, parquet, arrow, datasets, pt."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from suite_fixtures import conversation, tokenize_conversation

from specgauge.suites.training_data import BuildOptions, build_suite_from_training_data

SOURCE = "code_stdlib"
COUNT = 12


def _samples(tokenizer) -> list[tuple[list[int], list[int]]]:
    return [tokenize_conversation(tokenizer, conversation(SOURCE, i)) for i in range(COUNT)]


def _write_jsonl(directory: Path, records: list[dict]) -> None:
    with (directory / "shard-00000.jsonl").open("w") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")


def _llama3(messages: list[dict]) -> str:
    body = "".join(f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n{m['content']}<|eot_id|>" for m in messages)
    return "<|begin_of_text|>" + body


def _chatml(messages: list[dict]) -> str:
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def write_format(fmt: str, directory: Path, tokenizer) -> None:
    """Write the COUNT synthetic samples of SOURCE into ``directory`` in format ``fmt``."""
    samples = _samples(tokenizer)
    ids_list = [np.array(ids, dtype=np.int32) for ids, _ in samples]
    masks = [np.array(mask, dtype=np.int8) for _, mask in samples]
    flat_ids, flat_mask = np.concatenate(ids_list), np.concatenate(masks)
    offsets = np.concatenate([[0], np.cumsum([len(i) for i in ids_list])]).astype(np.int64)
    if fmt == "jsonl-tokens":
        _write_jsonl(directory, [{"input_ids": i, "loss_mask": m} for i, m in samples])
    elif fmt == "jsonl-messages":
        _write_jsonl(directory, [{"messages": conversation(SOURCE, i)} for i in range(COUNT)])
    elif fmt == "jsonl-sharegpt":
        roles = {"user": "human", "assistant": "gpt", "system": "system", "tool": "tool"}
        _write_jsonl(directory, [{"conversations": [{"from": roles[m["role"]], "value": m["content"]}
                                                    for m in conversation(SOURCE, i)]} for i in range(COUNT)])
    elif fmt in {"jsonl-llama3", "jsonl-chatml"}:
        render = _llama3 if fmt == "jsonl-llama3" else _chatml
        _write_jsonl(directory, [{"input_ids": tokenizer.encode(render(conversation(SOURCE, i)),
                                                                add_special_tokens=False).ids} for i in range(COUNT)])
    elif fmt == "npy-object":
        array = np.empty(COUNT, dtype=object)
        array[:] = ids_list
        np.save(directory / "samples.npy", array, allow_pickle=True)
    elif fmt == "npy-padded":
        width = max(len(i) for i in ids_list)
        padded = np.full((COUNT, width), -1, dtype=np.int32)
        for row, ids in enumerate(ids_list):
            padded[row, :len(ids)] = ids
        np.save(directory / "samples.npy", padded)
    elif fmt == "npz-flat":
        np.savez(directory / "samples.npz", input_ids=flat_ids, offsets=offsets, loss_mask=flat_mask)
    elif fmt == "npz-object":
        ids_obj, mask_obj = np.empty(COUNT, dtype=object), np.empty(COUNT, dtype=object)
        ids_obj[:], mask_obj[:] = ids_list, masks
        np.savez_compressed(directory / "samples.npz", input_ids=ids_obj, loss_mask=mask_obj)
    elif fmt in {"parquet", "arrow-file", "datasets-dir"}:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table({"input_ids": [list(map(int, i)) for i in ids_list],
                          "loss_mask": [list(map(int, m)) for m in masks]})
        if fmt == "parquet":
            pq.write_table(table, directory / "part-0.parquet", row_group_size=5)
        elif fmt == "arrow-file":
            with pa.ipc.new_file(directory / "part-0.arrow", table.schema) as writer:
                for batch in table.to_batches(max_chunksize=5):
                    writer.write_batch(batch)
        else:  # what datasets' save_to_disk writes: an arrow stream plus two JSON files
            split = directory / "train"
            split.mkdir()
            with pa.ipc.new_stream(split / "data-00000-of-00001.arrow", table.schema) as writer:
                for batch in table.to_batches(max_chunksize=4):
                    writer.write_batch(batch)
            (split / "dataset_info.json").write_text("{}")
            (split / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
            (directory / "dataset_dict.json").write_text(json.dumps({"splits": ["train"]}))
    elif fmt in {"pt-list", "pt-flat"}:
        import torch

        if fmt == "pt-list":
            torch.save([torch.tensor(i, dtype=torch.int64) for i in ids_list], directory / "samples.pt")
        else:
            torch.save({"input_ids": torch.from_numpy(flat_ids.astype(np.int64)), "offsets": torch.from_numpy(offsets),
                        "loss_mask": torch.from_numpy(flat_mask)}, directory / "samples.pt")
    else:
        raise AssertionError(fmt)


FORMATS = ["jsonl-tokens", "jsonl-messages", "jsonl-sharegpt", "jsonl-llama3", "jsonl-chatml", "npy-object",
           "npy-padded", "npz-flat", "npz-object", "parquet", "arrow-file", "datasets-dir", "pt-list", "pt-flat"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_recovers_the_prompts(fmt, tmp_path, tokenizer, tokenizer_path):
    source_dir = tmp_path / "data" / SOURCE
    source_dir.mkdir(parents=True)
    write_format(fmt, source_dir, tokenizer)
    suite, reports = build_suite_from_training_data(tmp_path / "data", tokenizer_path, BuildOptions(size=COUNT))
    assert reports[0].found == COUNT
    got = sorted(json.dumps([m.model_dump() for m in r.messages]) for r in suite.requests)
    want = sorted(json.dumps(conversation(SOURCE, i)[:-1]) for i in range(COUNT))
    assert got == want
    for request in suite.requests:
        index = int(request.messages[0].content.split(":")[0].removeprefix("Please explain "))
        response = conversation(SOURCE, index)[-1]["content"]
        tokens = len(tokenizer.encode(response, add_special_tokens=False).ids)
        # a loss mask covers the reply and its end token; template markers give the reply alone
        assert request.max_tokens in {max(16, tokens), max(16, tokens + 1)}

"""What the speculative arm is, from its launch command, engine arguments or /server_info."""

from specgauge.compare.speculation_setup import speculation_setup


def test_a_vllm_launch_command_gives_its_own_config():
    command = ("vllm serve M --port {port} --max-num-seqs 64 --speculative-config "
               "'{\"method\": \"eagle3\", \"model\": \"D\", \"num_speculative_tokens\": 4}'")
    setup, config = speculation_setup("command", command, None)
    assert (setup.engine, setup.method, setup.draft_model, setup.num_speculative_tokens, setup.max_num_seqs) == \
        ("vllm", "eagle3", "D", 4, 64)
    assert config == {"method": "eagle3", "model": "D", "num_speculative_tokens": 4}


def test_an_sglang_launch_command():
    command = ("python -m sglang.launch_server --model-path M --port {port} --speculative-algorithm NGRAM "
               "--speculative-num-steps 5")
    setup, config = speculation_setup("command", command, None)
    assert (setup.engine, setup.method, setup.num_speculative_tokens, config) == ("sglang", "NGRAM", 5, None)


def test_a_url_arm_reads_server_info_else_stays_unknown():
    info = {"server_info": {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
                            "speculative_eagle_topk": 1, "speculative_draft_model_path": "/d",
                            "max_running_requests": 48}}
    setup, _ = speculation_setup("url", "http://127.0.0.1:1", info)
    assert (setup.engine, setup.method, setup.num_speculative_tokens, setup.max_num_seqs, setup.source) == \
        ("sglang", "EAGLE3", 3, 48, "server_info")
    unknown, _ = speculation_setup("url", "http://127.0.0.1:1", {"server_info": None})
    assert unknown.engine is None and unknown.method is None


def test_engine_arguments_are_filled_from_server_info():
    setup, _ = speculation_setup("engine", "--speculative-algorithm EAGLE3",
                                 {"server_info": {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 5}})
    assert (setup.engine, setup.method, setup.num_speculative_tokens) == ("specgauge", "EAGLE3", 5)

"""Workers as Ray actors: a real local Ray (``ray.init``) and a two-node cluster on this machine
(``ray.cluster_utils.Cluster``), against the scripted server on loopback. Every fixture shuts Ray
down. Ray is an optional extra of specgauge but part of the ``test`` extra: here it must be there."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from specgauge.load.bench import RunStopped, resume_benchmark, run_benchmark
from specgauge.load.bench_config import BenchConfig
from specgauge.load.workers.protocol import WorkerLost
from specgauge.load.workers.ray_backend import ACTOR_NAME_PREFIX
from specgauge.load.workers.split import Placement
from specgauge.report.progress import NullProgress
from specgauge.store import Store
from specgauge.testing.scripted_server import Script, ScriptedServer

# Every Ray address on loopback: with this off, Ray's default node IP is 127.0.0.1, not the machine's
# (ray/_private/services.py get_node_ip_address; read when ray is first imported).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
import ray  # noqa: E402

pytestmark = pytest.mark.slow   # starts Ray clusters (on one pytest-xdist worker: tests/conftest.py)


@pytest.fixture
def local_ray():
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture
def two_node_cluster():
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


class KillAnActor(NullProgress):
    """``ray.kill``s one worker actor once ``after`` records of the point were stored."""

    def __init__(self, after: int) -> None:
        self.after, self.seen, self.killed = after, 0, None

    def request_finished(self, record) -> None:
        self.seen += 1
        if self.seen == self.after and self.killed is None:
            self.killed = sorted(n for n in ray.util.list_named_actors() if n.startswith(ACTOR_NAME_PREFIX))[-1]
            ray.kill(ray.get_actor(self.killed))


async def test_ray_actors_store_the_plan_and_a_killed_actor_resumes(local_ray, tmp_path, plan_and_truth):
    with ScriptedServer(Script(ttft_s=0.02, chunk_delay_s=0.01, num_chunks=4)) as srv:
        config = BenchConfig(url=srv.url, api="openai-chat", concurrency=(4,), rates=(60.0,), num_requests=20, seed=4)
        with Store.open(tmp_path / "r.db") as store:
            summary = await run_benchmark(config, store, placement=Placement(workers=2, ray_address="auto"))
            assert plan_and_truth(store, summary.run_id, config, srv.truth) == 40
            assert all(len(p.aggregate.workers) == 2 for p in summary.points)

            killed = BenchConfig(url=srv.url, api="openai-chat", concurrency=(4,), num_requests=60, seed=2)
            progress = KillAnActor(after=5)
            with pytest.raises(RunStopped) as stopped:
                await run_benchmark(killed, store, progress, placement=Placement(workers=2, ray_address="auto"))
            assert isinstance(stopped.value.cause, WorkerLost) and stopped.value.exit_code == 5
            assert "worker 2/2 (pid" in str(stopped.value) and "died" in str(stopped.value)
            run_id = stopped.value.run_id
            (point,) = store.get_points(run_id)
            assert 5 <= len(store.measured_indices(point.id)) < 60
            resumed = await resume_benchmark(run_id, store, placement=Placement(workers=2, ray_address="auto"))
            assert resumed.status == "done"
            assert plan_and_truth(store, run_id, killed, srv.truth) == 60
    assert not [n for n in ray.util.list_named_actors() if n.startswith(ACTOR_NAME_PREFIX)]


async def test_two_nodes_one_actor_each(two_node_cluster, tmp_path, plan_and_truth):
    nodes = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
    assert len(nodes) == 2
    with ScriptedServer(Script(ttft_s=0.02, chunk_delay_s=0.01, num_chunks=4)) as srv:
        config = BenchConfig(url=srv.url, api="openai-chat", concurrency=(6,), num_requests=24, warmup=2)
        with Store.open(tmp_path / "r.db") as store:
            summary = await run_benchmark(config, store, placement=Placement(
                ray_address=two_node_cluster.address, workers_per_node=1))
            assert plan_and_truth(store, summary.run_id, config, srv.truth) == 24
    (point,) = summary.points
    assert [w["requests"] for w in point.aggregate.workers] == [12, 12]
    assert len({w["pid"] for w in point.aggregate.workers}) == 2


def test_the_cli_joins_a_running_cluster(two_node_cluster, tmp_path):
    with ScriptedServer(Script(num_chunks=3)) as srv:
        result = subprocess.run(
            [sys.executable, "-m", "specgauge", "bench", srv.url, "--concurrency", "4", "--num-requests", "12",
             "--ray-address", two_node_cluster.address, "--workers-per-node", "1", "--output-json", "-",
             "--db", str(tmp_path / "r.db")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    (point,) = json.loads(result.stdout)["points"]
    assert point["num_ok"] == 12 and len(point["workers"]) == 2


def test_an_address_nobody_listens_on_is_one_line(cli_here, tmp_path):
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with ScriptedServer(Script(num_chunks=3)) as srv:
        result = cli_here("bench", srv.url, "--ray-address", f"127.0.0.1:{port}", "--db", str(tmp_path / "r.db"))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}" in result.stderr

import os
import subprocess
import sys
from pathlib import Path

# Tests spawn `python -m specgauge`; make the source tree importable for them too.
SRC = str(Path(__file__).resolve().parents[1] / "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)
os.environ["PYTHONPATH"] = SRC + os.pathsep + os.environ.get("PYTHONPATH", "")


import pytest  # noqa: E402

from cli_testkit import run_cli  # noqa: E402


@pytest.fixture
def cli():
    """``python -m specgauge ARGS`` in a child process (:func:`cli_testkit.run_cli`)."""
    return run_cli


@pytest.fixture
def cli_here(capsys):
    """``specgauge.cli.main`` run in this process (no interpreter start-up per call), for the many
    misuse cases; returns a ``CompletedProcess`` like running ``python -m specgauge`` would."""
    from specgauge.cli import main

    def run(*args: str) -> subprocess.CompletedProcess:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), exit_info.value.code, out, err)

    return run


# Folders whose every test is slow (the embedded engine, training, the model set-up): `make test-fast`
# leaves them out. A slow test elsewhere carries @pytest.mark.slow (or a module's pytestmark).
SLOW_FOLDERS = ("engine", "train", "model_setup")
TESTS = Path(__file__).resolve().parent


# Tests that must run on one pytest-xdist worker (`make test` runs two, `-n 2`): the training tests share
# session-scoped fixtures that take many seconds to build (the tiny corpus, tokenizer and trained target),
# built once that way instead of once per worker; the Ray tests start Ray clusters, never two at once.
ONE_WORKER_PATHS = ("tests/train/", "tests/load/workers/test_ray_workers.py")


def pytest_collection_modifyitems(config, items):
    for item in items:
        folder = Path(str(item.fspath)).resolve().relative_to(TESTS).parts[0]
        if folder in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)


def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's scheduler, each test a unit of its own except the paths in ``ONE_WORKER_PATHS``,
    each of which is one unit (one worker runs all of it, in order). xdist's own ``--dist loadgroup``
    would do this by marks, but it renames ``item._nodeid``, which pytest 9.2 no longer reads."""
    from xdist.scheduler import LoadScopeScheduling

    class OneWorkerPaths(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return next((prefix for prefix in ONE_WORKER_PATHS if path.startswith(prefix)), nodeid)

    return OneWorkerPaths(config, log)

"""Studies that survive: ``dpjax study`` stopped by SIGINT or killed, then ``--resume``d, gives the
bytes of an uninterrupted run; ``--out`` is checked before any computing; outputs are swapped in whole."""

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

MECHANISMS = """
import time
import jax.numpy as jnp
from dpjax.additive import laplace_mechanism

def mean(key, x, epsilon, k=1):
    time.sleep(0.3)  # at trace time: once per compiled step, so the second study is slow enough to stop
    return laplace_mechanism(key, jnp.clip(x, 0, 1).mean() * k, epsilon, sensitivity=k / x.size)

def truth(x, epsilon, k=1):
    return jnp.clip(x, 0, 1).mean() * k
"""

CONFIG = """
trials = 16
jobs = 1
[studies.a_first]
mechanisms = { "Laplace" = "mech.py:mean" }
truth = "mech.py:truth"
datasets = { uniform = "uniform" }
grid = { epsilon = [0.5, 2.0] }
metrics = [ { metric = "abs_error", statistics = ["mean"], unit = "units" } ]

[studies.b_second]
mechanisms = { "scaled" = "mech.py:mean" }
truth = "mech.py:truth"
datasets = { uniform = "uniform" }
grid = { epsilon = [0.5, 2.0], k = [1, 2, 3, 4, 5] }
static = ["k"]
metrics = [ { metric = "abs_error", statistics = ["mean"], unit = "units" } ]
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """The config, its mechanism file and a compile cache shared by the runs, and the bytes of an
    uninterrupted run's outputs."""
    work = tmp_path_factory.mktemp("chaos")
    (work / "mech.py").write_text(MECHANISMS)
    (work / "two.toml").write_text(CONFIG)
    done = _study(work, "reference").wait(timeout=300)
    assert done == 0
    return work


def _study(work: Path, out: str, *flags: str, config: str = "two.toml") -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DPJAX_COMPILE_CACHE": str(work / "cache")}
    command = [sys.executable, "-m", "dpjax.cli", "study", "--config", config, "--out", out, *flags]
    return subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def _wait_for(process: subprocess.Popen, text: str) -> list[str]:
    lines = []
    for line in process.stdout:
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"{text!r} never printed:\n{''.join(lines)}")


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def test_sigint_then_sigkill_keep_every_finished_step_and_resume_gives_the_same_bytes(workdir):
    process = _study(workdir, "stopped")
    _wait_for(process, "[3/6] b_second")  # a_first is finished, b_second has one step done
    sent = time.perf_counter()
    process.send_signal(signal.SIGINT)
    rest = process.stdout.read()
    assert process.wait(timeout=10) == 130, rest
    assert time.perf_counter() - sent < 10 and "Traceback" not in rest
    stopped, reference = workdir / "stopped", workdir / "reference"
    payload = json.loads((stopped / "results.json").read_text())
    assert payload["record"]["status"] == "interrupted"
    assert payload["record"]["unfinished_studies"] == ["b_second"]
    figure = Path("figures", "a_first.png")
    assert (stopped / figure).read_bytes() == (reference / figure).read_bytes()
    assert not (stopped / "figures" / "b_second.png").exists()
    reference_csv = (reference / "results.csv").read_text().splitlines()
    stopped_csv = (stopped / "results.csv").read_text().splitlines()
    assert stopped_csv == reference_csv[:len(stopped_csv)]  # the finished steps, in order
    assert {r.split(",")[0] for r in stopped_csv[1:]} == {"a_first", "b_second"}

    # SIGKILL of the resumed run at a random point: the interrupted run's outputs stay whole
    before = _files(stopped)
    rng = random.Random(3)
    process = _study(workdir, "stopped", "--resume")
    _wait_for(process, f"[{rng.randint(4, 6)}/6]")  # after a new step at least
    time.sleep(rng.uniform(0, 0.5))
    process.kill()
    process.wait(timeout=30)
    assert _files(stopped) == before

    resumed = _study(workdir, "stopped", "--resume")  # from the killed run's checkpoint
    log = resumed.stdout.read()
    assert resumed.wait(timeout=300) == 0, log
    assert "a_first: Laplace on uniform (from the checkpoint)" in log
    assert "b_second: scaled on uniform (k=2) (from the checkpoint)" in log
    assert (stopped / "results.csv").read_bytes() == (reference / "results.csv").read_bytes()
    assert _files(stopped / "figures") == _files(reference / "figures")
    assert json.loads((stopped / "results.json").read_text())["record"]["status"] == "complete"
    assert not (stopped / ".checkpoint").exists() and not (workdir / ".stopped.partial").exists()


WORKER_SIGNAL = """
import signal, threading, time
import jax.numpy as jnp
from dpjax.additive import laplace_mechanism

def mean(key, x, epsilon, k=1):
    if k == 2:  # at trace time, in the study's worker thread: the kernel hands it the SIGINT
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        time.sleep(1.0)  # this step is still running when the main thread handles the signal
    return laplace_mechanism(key, jnp.clip(x, 0, 1).mean() * k, epsilon, sensitivity=k / x.size)

def truth(x, epsilon, k=1):
    return jnp.clip(x, 0, 1).mean() * k
"""


def test_a_sigint_delivered_to_a_worker_thread_stops_the_study_at_the_next_step(tmp_path):
    """Python runs a signal handler only in the main thread; the kernel may deliver the signal to
    any thread. The main thread must wake while the studies run in worker threads, or the stop
    waits for every study to finish."""
    (tmp_path / "mech.py").write_text(WORKER_SIGNAL)
    study = CONFIG.split("[studies.b_second]")[1].replace("[1, 2, 3, 4, 5]", "[1, 2, 3, 4]")
    (tmp_path / "one.toml").write_text("trials = 16\njobs = 1\n[studies.worker]" + study)
    process = _study(tmp_path, "out", config="one.toml")
    log = process.stdout.read()
    assert process.wait(timeout=120) == 130, log
    record = json.loads((tmp_path / "out" / "results.json").read_text())["record"]
    assert record["status"] == "interrupted" and record["unfinished_studies"] == ["worker"], log
    studies = {r.split(",")[0] for r in (tmp_path / "out" / "results.csv").read_text().splitlines()[1:]}
    assert studies == {"worker"} and "k=3" not in log and "k=4" not in log, log


def test_out_is_checked_before_computing(tmp_path, capsys):
    from dpjax._src.tools.cli import main

    (tmp_path / "file").write_text("x")
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "notes.txt").write_text("keep me")
    for argv, message in (
        (["--out", str(tmp_path / "file")], "is a file, not a directory"),
        (["--out", str(tmp_path / "theirs")], "already holds files; pass --overwrite"),
        (["--out", str(tmp_path / "theirs"), "--overwrite"], "no dpjax study run wrote"),
        (["--resume"], "need --out DIR"),
    ):
        assert main(["study", "--study", "clipped_mean", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and "[1/" not in err  # refused before any step ran
    assert (tmp_path / "theirs" / "notes.txt").read_text() == "keep me"
    assert not list(tmp_path.glob(".*"))  # no staging directory


def test_run_dir_swaps_whole_runs_and_atomic_files_never_show_a_part(tmp_path):
    from dpjax._src.atomic import atomic_path, write_text
    from dpjax._src.tools.outdir import OutputError, RunDir

    out, own = tmp_path / "out", ("results.json", "figures")
    first = RunDir(out, own_files=own).prepare()
    for name in ("results.json", "figures/a.png", "figures/b.png", "old.png"):
        write_text(first.staging / name, "first")
    first.commit(complete=True, files=["results.json", "figures/a.png", "figures/b.png", "old.png"])
    write_text(out / "nested" / "results.json", "another run's")  # e.g. a run with --out out/nested
    second = RunDir(out, overwrite=True, own_files=own).prepare()
    write_text(second.staging / "results.json", "second")
    write_text(second.staging / "figures/a.png", "second")
    assert _files(out)["figures/b.png"] == b"first"  # untouched until the commit
    second.commit(complete=True, files=["results.json", "figures/a.png"])
    # no stale figure nor file of the previous run; the nested run is kept
    assert set(_files(out)) == {"results.json", "figures/a.png", ".dpjax-output", "nested/results.json"}
    assert (out / "results.json").read_text() == "second"
    assert (out / "nested" / "results.json").read_text() == "another run's"
    with pytest.raises(OutputError, match="no dpjax bench run wrote"):  # another command's output
        RunDir(out, overwrite=True, own_files=own, command="dpjax bench").check()
    with pytest.raises(RuntimeError), atomic_path(out / "results.json") as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed while writing")
    assert (out / "results.json").read_text() == "second" and len(list(out.iterdir())) == 4
    assert oct((out / "results.json").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_run_study_checkpoint_resumes_bit_identically(tmp_path):
    import jax.numpy as jnp
    import numpy as np

    from dpjax._src.additive import laplace_mechanism
    from dpjax.studies import Study, metrics, run_study

    def mean(key, x, epsilon):
        return laplace_mechanism(key, x.mean(), epsilon, sensitivity=1 / x.size)

    def stopped(key, x, epsilon):
        raise KeyboardInterrupt  # Ctrl-C during the second mechanism

    data = {"u": np.random.default_rng(1).uniform(size=50)}

    def study(second):
        return Study("ckpt", mechanisms={"first": mean, "second": second}, datasets=data,
                     grid={"epsilon": [0.5, 2.0]}, truth=lambda x, epsilon: x.mean(),
                     metrics=[metrics.abs_error(("mean",))])

    plain = run_study(study(lambda key, x, epsilon: mean(key, x, epsilon) + 0 * jnp.ones(())), trials=64)
    with pytest.raises(KeyboardInterrupt):
        run_study(study(stopped), trials=64, checkpoint=tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == 1
    resumed = run_study(study(lambda key, x, epsilon: mean(key, x, epsilon) + 0 * jnp.ones(())), trials=64,
                        checkpoint=tmp_path)
    assert resumed.table.to_csv() == plain.table.to_csv()
    assert [s.get("from_checkpoint", False) for s in resumed.record["steps"]] == [True, False]


def test_a_failing_mechanism_is_located_and_the_others_are_kept():
    import numpy as np

    from dpjax._src.additive import laplace_mechanism
    from dpjax.studies import Study, metrics, run_study

    def good(key, x, epsilon):
        return laplace_mechanism(key, x.mean(), epsilon, sensitivity=1 / x.size)

    def broken(key, x, epsilon):
        raise RuntimeError("boom")  # the line reported

    line = broken.__code__.co_firstlineno + 1
    study = Study("mixed", mechanisms={"good": good, "broken": broken}, datasets={"u": np.ones(10)},
                  truth=lambda x, epsilon: x.mean(), metrics=[metrics.abs_error(("mean",))])
    with pytest.raises(RuntimeError, match="boom"):
        run_study(study, trials=8)
    result = run_study(study, trials=8, on_error="record")
    assert set(result.table["mechanism"]) == {"good"}
    (failure,) = result.record["failures"]
    assert failure["mechanism"] == "broken" and failure["error"] == "RuntimeError: boom"
    assert failure["where"] == f"{__file__}:{line}"


def test_cli_reports_a_failing_config_mechanism_with_file_and_line_and_loads_each_file_once(tmp_path, capsys):
    from dpjax._src.tools.cli import main

    (tmp_path / "mine.py").write_text(textwrap.dedent(f"""
        import jax.numpy as jnp
        from dpjax.additive import laplace_mechanism
        open({str(tmp_path / 'loads.txt')!r}, "a").write("loaded\\n")

        def good(key, x, epsilon):
            return laplace_mechanism(key, x.mean(), epsilon, sensitivity=1 / x.size)

        def broken(key, x, epsilon):
            raise ValueError("no such thing")

        def truth(x, epsilon):
            return x.mean()
    """))
    (tmp_path / "s.toml").write_text(textwrap.dedent("""
        trials = 8
        [studies.mixed]
        mechanisms = { good = "mine.py:good", broken = "mine.py:broken" }
        truth = "mine.py:truth"
        datasets = { uniform = "uniform" }
        metrics = [ { metric = "abs_error", statistics = ["mean"], unit = "units" } ]
    """))
    assert main(["study", "--config", str(tmp_path / "s.toml"), "--list"]) == 0
    assert (tmp_path / "loads.txt").read_text() == "loaded\n"  # three references, one execution
    capsys.readouterr()
    out = tmp_path / "out"
    assert main(["study", "--config", str(tmp_path / "s.toml"), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"mixed: broken on uniform: ValueError: no such thing (at {tmp_path / 'mine.py'}:10)" in err
    record = json.loads((out / "results.json").read_text())["record"]
    assert record["failures"][0]["where"] == f"{tmp_path / 'mine.py'}:10"
    assert {r["mechanism"] for r in json.loads((out / "results.json").read_text())["rows"]} == {"good"}

"""The ``dpjax`` commands against an attacker and a careless user (round 2): signals at any moment,
checkpoints that are data and are checked before they are reused, ``--out`` values that cannot be
used, names that would leave ``--out``, results that are not results, bad training files, and the
README's main command run twice."""

import gc
import json
import os
import pickle
import shlex
import signal
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpjax._src.tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
STUDY = ["study", "--study", "clipped_mean", "--dataset", "uniform", "--trials", "2", "--epsilon", "1"]


def _swallowed_signal(signum):
    """Sends ``signum`` to this process from inside a garbage-collector callback, where Python swallows
    what the handler raises ("Exception ignored in ..."), as it does in JAX's ``_xla_gc_callback``."""

    def fire(phase, info):
        gc.callbacks.remove(fire)
        os.kill(os.getpid(), signum)
        for _ in range(1000):  # the handler runs here, and its exception is swallowed
            pass

    gc.callbacks.append(fire)
    gc.collect()


# -- signals at any moment ---------------------------------------------------------------------------

def test_sigint_while_jax_is_imported_exits_130_and_computes_nothing(tmp_path):
    """The signal comes in a gc callback during the import of JAX (the first second of a run), where
    an exception would be swallowed (or, across jaxlib's initialization, abort the process)."""
    hook = textwrap.dedent("""
        import gc, os, signal, sys
        def fire(phase, info):
            if "jax" in sys.modules and phase == "start":
                gc.callbacks.remove(fire)
                print("signal sent in a gc callback", file=sys.stderr, flush=True)
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(1000):
                    pass
        gc.callbacks.append(fire)
        from dpjax.cli import main
        sys.exit(main())
    """)
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", hook, *STUDY, "--out", str(out), "--compile-cache", "off"],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 130, done.stderr
    assert "signal sent in a gc callback" in done.stderr  # inside an import: recorded, not raised
    assert "Exception ignored" not in done.stderr and "Traceback (most" not in done.stderr
    assert "studies in" not in done.stdout and "[1/" not in done.stderr  # stopped before the work
    assert not out.exists() and not list(tmp_path.glob(".*"))


def test_a_swallowed_signal_before_the_work_stops_it(tmp_path, monkeypatch, capsys):
    import dpjax._src.tools.study.cli as study_cli

    options = study_cli._options

    def options_then_signal(args):
        _swallowed_signal(signal.SIGTERM)
        return options(args)

    monkeypatch.setattr(study_cli, "_options", options_then_signal)
    assert main([*STUDY, "--out", str(tmp_path / "out")]) == 143
    captured = capsys.readouterr()
    assert "[1/" not in captured.err and "interrupted" in captured.err
    assert not (tmp_path / "out").exists()


def _fake(name, calls):
    from dpjax._src.tools.reproduce import Reproduction, Row

    def run(key, mode, data_dir):
        calls.append(name)
        value = float(jax.random.uniform(key))
        return Reproduction(name, f"Paper {name}", [Row("Table 1", mode, "MAE", 1.0, value, 0.1)], "3 trials",
                            [], None)

    return types.SimpleNamespace(TITLE=f"Paper {name}", run=run)


@pytest.fixture
def fakes(monkeypatch):
    import dpjax._src.tools.reproduce.cli as reproduce_cli

    calls = []
    monkeypatch.setattr(reproduce_cli, "REPRODUCTIONS", {name: _fake(name, calls) for name in ("aa", "bb")})
    monkeypatch.setattr(reproduce_cli, "SEEDS", {})
    return calls


def test_a_signal_after_the_last_write_exits_143_not_0(tmp_path, monkeypatch, fakes, capsys):
    from dpjax._src.tools.outdir import RunDir

    commit = RunDir.commit

    def commit_then_signal(self, **kwargs):
        commit(self, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(RunDir, "commit", commit_then_signal)
    assert main(["reproduce", "--smoke", "--out", str(tmp_path / "out")]) == 143
    assert "interrupted (SIGTERM)" in capsys.readouterr().err


# -- checkpoints: data, fingerprinted, checked -------------------------------------------------------

MECHANISM = """
import jax.numpy as jnp
from dpjax.additive import laplace_mechanism

def mean(key, x, epsilon):
    return laplace_mechanism(key, jnp.mean(x) * SCALE, epsilon, sensitivity=1 / x.size)

SCALE = {scale}
"""


class Planted:
    """A pickle that would create a file if it were ever unpickled."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _study(mean, data, name="ckpt"):
    from dpjax.studies import Study, metrics

    return Study(name, mechanisms={"first": mean, "second": lambda k, x, epsilon: mean(k, x, epsilon) * 1.0},
                 datasets={"u": data}, grid={"epsilon": [0.5, 2.0]}, truth=lambda x, epsilon: jnp.mean(x),
                 metrics=[metrics.abs_error(("mean",))])


def test_checkpoints_are_json_never_unpickled_and_every_change_is_named(tmp_path, capsys):
    from dpjax._src.studies.checkpoint import CheckpointMismatch
    from dpjax._src.tools.study.config import resolve
    from dpjax.studies import run_study

    (tmp_path / "mech.py").write_text(MECHANISM.format(scale=1.0))
    mean = resolve("mech.py:mean", tmp_path)
    data = np.random.default_rng(1).uniform(size=50)
    plain = run_study(_study(mean, data), trials=16)
    store = tmp_path / "ckpt"
    run_study(_study(mean, data), trials=16, checkpoint=store)
    saved = {json.loads(f.read_text())["identity"]["mechanism"]: f for f in store.iterdir()}
    assert sorted(saved) == ["first", "second"]
    assert all(json.loads(f.read_text())["fingerprint"]["mechanism source"] for f in saved.values())
    files = [saved["first"], saved["second"]]

    planted = tmp_path / "pwned"
    files[0].write_bytes(pickle.dumps(Planted(str(planted))))  # a pickle where a step's file was
    files[1].write_text(files[1].read_text()[:100])  # truncated
    capsys.readouterr()
    resumed = run_study(_study(mean, data), trials=16, checkpoint=store)
    assert not planted.exists()  # never unpickled
    assert capsys.readouterr().out.count("unreadable or not this step's") == 2
    assert resumed.table.to_csv() == plain.table.to_csv()
    assert not any(s.get("from_checkpoint") for s in resumed.record["steps"])

    wrong = json.loads(files[0].read_text())
    wrong["rows"] = []  # a valid file with the wrong content: recomputed, never a dropped step
    files[0].write_text(json.dumps(wrong))
    again = run_study(_study(mean, data), trials=16, checkpoint=store)
    assert again.table.to_csv() == plain.table.to_csv()
    assert [bool(s.get("from_checkpoint")) for s in again.record["steps"]] == [False, True]

    for study, options, part in (
        (_study(mean, data + 1e-9), {}, "data"),
        (_study(mean, data), {"trials": 17}, "settings"),
        (_study(mean, data), {"seed": 1}, "seed"),
    ):
        with pytest.raises(CheckpointMismatch, match=f"made with another {part};"):
            run_study(study, **{"trials": 16, **options}, checkpoint=store)
    (tmp_path / "mech.py").write_text(MECHANISM.format(scale=2.0))  # the mechanism's file is edited
    with pytest.raises(CheckpointMismatch, match="made with another mechanism source;"):
        run_study(_study(resolve("mech.py:mean", tmp_path), data), trials=16, checkpoint=store)


def test_reproduce_checkpoints_are_checked(tmp_path, fakes, capsys):
    out = tmp_path / "out"
    argv = ["reproduce", "--smoke", "--out", str(out)]
    assert main(argv) == 0
    csv = (out / "reproduction.csv").read_bytes()
    staging = tmp_path / ".out.partial" / ".checkpoint"
    staging.mkdir(parents=True)  # a killed run's staging directory, with planted and damaged files
    planted = tmp_path / "pwned"
    (staging / "aa.pkl").write_bytes(pickle.dumps(Planted(str(planted))))
    (staging / "aa.json").write_text('{"format": "dpjax-reproduction/1", "finger')
    fakes.clear()
    assert main([*argv, "--resume"]) == 0
    assert not planted.exists() and fakes == ["aa", "bb"]
    assert "checkpoint of aa cannot be used" in capsys.readouterr().err
    assert (out / "reproduction.csv").read_bytes() == csv

    # a run stopped after aa, resumed with another seed: refused before any work, naming the seed
    import dpjax._src.tools.reproduce.cli as reproduce_cli

    stop = reproduce_cli.REPRODUCTIONS["bb"]
    reproduce_cli.REPRODUCTIONS["bb"] = types.SimpleNamespace(
        TITLE=stop.TITLE, run=lambda *a: (os.kill(os.getpid(), signal.SIGINT), stop.run(*a))[1])
    assert main([*argv, "--overwrite"]) == 130
    reproduce_cli.REPRODUCTIONS["bb"] = stop
    fakes.clear()
    assert main([*argv, "--resume", "--seed", "1"]) == 2
    assert "made with another seed" in capsys.readouterr().err and fakes == []


# -- --out values and names ---------------------------------------------------------------------------

def test_odd_out_values_are_refused_before_any_work(tmp_path, monkeypatch, capsys):
    import tempfile

    import dpjax._src.tools.outdir

    monkeypatch.chdir(tmp_path)
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "target").mkdir()
    (tmp_path / ".staged.partial").symlink_to(tmp_path / "target")
    (tmp_path / "file").write_text("x")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "results.csv").write_text("their own")  # a file of ours by name, in a directory we never marked
    readonly = tmp_path / "readonly"
    readonly.mkdir()
    mkstemp = tempfile.mkstemp

    def denied(*args, dir=None, **kwargs):  # a read-only directory, also for root
        if Path(dir) == readonly:
            raise PermissionError(13, "Permission denied")
        return mkstemp(*args, dir=dir, **kwargs)

    monkeypatch.setattr(dpjax._src.tools.outdir.tempfile, "mkstemp", denied)
    for out, flags, message in (
        (".", ["--overwrite"], "is the current directory"),
        ("link", [], "is a symbolic link"),
        ("staged", [], "is a symbolic link"),
        ("file", [], "is a file, not a directory"),
        ("theirs", ["--overwrite"], "no dpjax study run wrote"),
        ("readonly/out", [], "cannot write in"),
    ):
        assert main([*STUDY, "--out", out, *flags]) == 2, out
        err = capsys.readouterr().err
        assert message in err and "[1/" not in err and "Traceback" not in err, (out, err)
    assert (theirs / "results.csv").read_text() == "their own"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["real", "link", "target", ".staged.partial", "file", "theirs", "readonly"])


def test_a_config_name_cannot_leave_out(tmp_path, capsys):
    (tmp_path / "evil.toml").write_text(textwrap.dedent("""
        [studies."../../x"]
        mechanisms = { m = "dpjax.additive:laplace_mechanism" }
        datasets = { uniform = "uniform" }
        metrics = [ { metric = "value", name = "v", description = "v", unit = "u" } ]
    """))
    assert main(["study", "--config", str(tmp_path / "evil.toml"), "--out", str(tmp_path / "a" / "b")]) == 2
    assert "study name '../../x' cannot name a file" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evil.toml"]


# -- bad results are loud -----------------------------------------------------------------------------

MIXED = """
import jax.numpy as jnp
from dpjax.additive import laplace_mechanism

def good(key, x, epsilon, shift=0.0):
    return laplace_mechanism(key, x.mean() + shift, epsilon, sensitivity=1 / x.size)

def nan_above_one(key, x, epsilon, shift=0.0):
    return jnp.where(epsilon > 1, jnp.nan, good(key, x, epsilon, shift))

def broken(key, x, epsilon, shift=0.0):
    raise ValueError("no such thing")

def truth(x, epsilon, shift=0.0):
    return x.mean() + shift
"""

MIXED_CONFIG = """
trials = 8
[studies.mixed]
mechanisms = {{ good = "mixed.py:good", nans = "mixed.py:nan_above_one", broken = "mixed.py:broken" }}
truth = "mixed.py:truth"
datasets = {{ uniform = "uniform" }}
grid = {{ epsilon = [0.5, 2.0] }}
params = {{ shift = {shift} }}
metrics = [ {{ metric = "abs_error", statistics = ["mean"], unit = "units" }} ]
"""


def test_failed_mechanisms_and_empty_cells_make_an_incomplete_output_and_resume_checks_params(
        tmp_path, capsys):
    (tmp_path / "mixed.py").write_text(MIXED)
    config, out = tmp_path / "mixed.toml", tmp_path / "out"
    config.write_text(MIXED_CONFIG.format(shift=0.0))
    assert main(["study", "--config", str(config), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "mixed: nans on uniform: every trial failed (no finite abs_error) at epsilon=2" in err
    assert "mixed: broken on uniform: ValueError: no such thing" in err
    payload = json.loads((out / "results.json").read_text())
    assert payload["record"]["status"] == "incomplete" and len(payload["record"]["failures"]) == 2
    assert json.loads((out / ".dpjax-output").read_text())["complete"] is False
    assert (out / ".checkpoint").is_dir()  # kept: --resume runs what failed again

    config.write_text(MIXED_CONFIG.format(shift=1.0))  # the params edited, then --resume
    assert main(["study", "--config", str(config), "--out", str(out), "--resume"]) == 2
    assert "made with another settings" in capsys.readouterr().err
    assert json.loads((out / "results.json").read_text()) == payload  # untouched


def test_release_shapes_are_checked_and_keys_never_collide():
    from dpjax.studies import Study, metrics, run_study

    def vector(key, x, epsilon):
        return x[:3] + jax.random.laplace(key, (3,)) / epsilon

    study = Study("shapes", mechanisms={"vector": vector}, datasets={"u": np.ones(10)},
                  truth=lambda x, epsilon: x.mean(), metrics=[metrics.abs_error(("mean",))])
    with pytest.raises(ValueError, match=r"the release has shape \(3,\) but the truth has shape \(\)"):
        run_study(study, trials=4)

    def noise(key, x, epsilon):
        return jax.random.normal(key) + 0 * x[0]

    value = metrics.value("noise", "the release", "units", ("mean",))
    twins = Study("m", mechanisms={"m/x": noise, "m": noise}, datasets={"y": np.zeros(1), "x/y": np.zeros(1)},
                  metrics=[value])
    table = run_study(twins, trials=4).table.set_index(["mechanism", "dataset"])["estimate"]
    assert table[("m/x", "y")] != table[("m", "x/y")]  # crc32("m/x" + "/" + "y") == crc32("m" + "/" + "x/y")


@pytest.mark.parametrize("content, message", [
    (b"\x1f\x8b\x08", "truncated or corrupt"),
    ("1," * 784 + "99\n", "has the label 99"),
    ("1," * 784 + "-1\n", "has the label -1"),
    ("1," * 784 + "3.7\n", "has the label 3.7"),
    ("nan," + "1," * 783 + "3\n", "pixel 1 is nan"),
])
def test_train_refuses_bad_mnist_files(tmp_path, capsys, content, message):
    path = tmp_path / ("data.csv.gz" if isinstance(content, bytes) else "data.csv")
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    assert main(["train", "--dataset", "mnist", "--data", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


def test_train_out_is_refused_like_the_other_commands(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("keep me")
    assert main(["train", "--out", str(tmp_path)]) == 2
    assert "already holds files; pass --overwrite" in capsys.readouterr().err
    assert main(["train", "--out", str(tmp_path), "--overwrite"]) == 2
    assert "no dpjax train run wrote" in capsys.readouterr().err


# -- the README's main command, twice ----------------------------------------------------------------

def test_the_readme_main_command_runs_twice(tmp_path, monkeypatch, capsys):
    command = README.split("<!-- main-command -->")[1].split("```")[1]
    words = shlex.split(command.split("&& dpjax ")[-1])
    assert words[0] == "study" and "Run it again" in README
    monkeypatch.chdir(tmp_path)
    cheap = ["--study", "clipped_mean", "--dataset", "uniform", "--trials", "2", "--epsilon", "1"]
    out = tmp_path / words[words.index("--out") + 1]
    for _ in range(2):
        assert main([*words, *cheap]) == 0, capsys.readouterr().err
        assert json.loads((out / ".dpjax-output").read_text())["complete"] is True
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # replaced, nothing left beside it

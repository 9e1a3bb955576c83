"""dpjax._src.tools.train.run: the plan's padded size, the shipped dataset and the ``dpjax train`` command
(the Poisson sampler's law: tests/optax/test_sampling.py)."""

import csv
import json

import jax
import numpy as np
import pytest
from scipy import stats

from dpjax._src.datasets import training as data
from dpjax._src.tools.cli import main
from dpjax._src.tools.train import models, outputs, settings
from dpjax._src.tools.train import run as train


def test_shipped_adult_has_every_row():
    adult = data.load_adult()
    assert adult.x_train.shape == (32561, 107) and adult.x_test.shape == (16281, 107)
    assert adult.y_train.mean() == np.float64(7841 / 32561)  # 7,841 incomes >50K in adult.data
    np.testing.assert_allclose(adult.x_train[:, -5:].mean(axis=0), 0, atol=1e-5)  # standardized on train


@pytest.mark.slow
def test_train_command_writes_per_epoch_metrics(capsys, tmp_path):
    """A tiny run (0.05 epoch, 8 hidden units) with --out: the CSV, JSON and figure are written (and
    no temporary file is left), one row per epoch from epoch 0, the epsilon spent rising to at most
    the target, the phases printed in order."""
    out = tmp_path / "run"
    argv = ["train", "--clip", "geometric", "--epochs", "0.05", "--hidden", "8", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    phases = [
        "dpjax train:",
        "importing JAX",
        "loading data",
        "calibrating",
        "compiling",
        "epoch 0",
        "epoch 1",
        "\ntest accuracy",
    ]
    positions = [printed.index(phase) for phase in phases]
    assert positions == sorted(positions), printed
    written = sorted(p.name for p in out.iterdir())
    assert written == [".dpjax-output", "metrics.csv", "metrics.json", "metrics.png"]
    with open(out / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    record = json.loads((out / "metrics.json").read_text())
    assert [int(r["epoch"]) for r in rows] == [0, 1] == [r["epoch"] for r in record["epochs"]]
    assert tuple(rows[0]) == outputs.COLUMNS
    spent = [float(r["epsilon_spent"]) for r in rows]
    assert spent[0] == 0 < spent[1] <= 3.0 + 1e-9
    assert record["run"]["steps"] == int(rows[-1]["step"]) and record["arguments"]["epsilon"] == 3.0
    assert (out / "metrics.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


BAD_OPTIONS = [
    ("--dataset", "cifar"),
    ("--model", "resnet"),
    ("--clip", "adaptive"),
    ("--clip-norm", "0"),
    ("--quantile", "1"),
    ("--quantile", "0"),
    ("--clip-epsilon", "-1"),
    ("--every", "0"),
    ("--count-noise-multiplier", "nan"),
    ("--epsilon", "0"),
    ("--epsilon", "inf"),
    ("--epsilon", "three"),
    ("--delta", "1.5"),
    ("--delta", "0"),
    ("--epochs", "0"),
    ("--batch-size", "0"),
    ("--hidden", "2.5"),
    ("--learning-rate", "-0.1"),
    ("--microbatch-size", "0"),
    ("--seed", "-1"),
]


@pytest.mark.parametrize("option, value", BAD_OPTIONS)
def test_train_refuses_bad_values_without_a_traceback(capsys, option, value):
    """Every option's bad value stops argparse with status 2 and one ``error:`` line naming it."""
    with pytest.raises(SystemExit) as stop:
        main(["train", option, value])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and option in err and "error:" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--dataset", "mnist"], "run `dpjax data fetch mnist`, or pass --data PATH"),  # an empty cache
        (["--dataset", "mnist", "--data", "/no/such/file.csv"], "--data /no/such/file.csv"),
        (["--batch-size", "100000"], "exceeds the 32561 training examples"),
        (["--model", "cnn"], "--model cnn needs 28x28 images"),
    ],
)
def test_train_reports_bad_combinations_with_status_2(capsys, argv, message, monkeypatch, tmp_path):
    """Values that are each valid but do not fit the data or each other: ``error:`` and status 2,
    before any training."""
    monkeypatch.setenv("DPJAX_DATA", str(tmp_path))  # no fetched MNIST
    assert main(["train", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith("dpjax train: error:"), err


def test_train_refuses_an_out_path_that_is_a_file(capsys, tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    assert main(["train", "--out", str(path)]) == 2
    assert "is a file, not a directory" in capsys.readouterr().err


def test_train_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name, value in settings.DEFAULTS.items():
        assert f"(default: {value})" in text, name
    assert "(default: None)" not in text


def test_plan_handles_any_epsilon():
    """The truncation share is computed in log space: epsilon 1000 gives a finite plan (it overflowed
    ``math.exp``), whose padded size still bounds ``steps * P(Binomial > s)`` by ``eta``."""
    n, steps = 32561, 636
    plan = train.plan(n, epochs=5, batch_size=256, epsilon=1000.0, delta=1e-5)
    assert plan.steps == steps and 256 < plan.padded_size < n
    log_eta = np.log(train.TRUNCATION_SHARE * 1e-5) - 1000.0
    assert np.log(steps) + stats.binom.logsf(plan.padded_size, n, 256 / n) <= log_eta


def test_epoch_ends_split_the_run():
    assert train.epoch_ends(636, 32561, 256) == [127, 254, 382, 509, 636]
    assert train.epoch_ends(13, 32561, 256) == [13]
    assert train.epoch_ends(100, 1000, 100) == [10 * k for k in range(1, 11)]


def test_cnn_maps_images_to_logits():
    """Shapes only (``jax.eval_shape``: nothing is compiled): 9,098 parameters, one logit row per
    image, for a batch and for one image."""
    model = models.cnn(10)
    params = jax.eval_shape(model.init, jax.random.key(0))
    assert sum(leaf.size for leaf in jax.tree.leaves(params)) == 9098
    images = jax.ShapeDtypeStruct((3, 784), np.float32)
    assert jax.eval_shape(model.logits, params, images).shape == (3, 10)
    assert jax.eval_shape(model.logits, params, jax.ShapeDtypeStruct((784,), np.float32)).shape == (10,)

"""The ``dpjax`` command line under stress: ``bench`` and ``reproduce`` stopped by a signal and
resumed, defaults in every ``--help``, and no traceback for any bad argument of any subcommand."""

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import types
from pathlib import Path

import jax
import pytest

from dpjax._src.tools.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _signal_self(signum):
    os.kill(os.getpid(), signum)  # the handler runs in the main thread at the next bytecode


def test_bench_stopped_by_sigint_writes_the_finished_cases_and_resumes(tmp_path, monkeypatch, capsys):
    import dpjax._src.tools.bench.cli as bench_cli
    import dpjax._src.tools.bench.run as bench_run
    from dpjax._src.tools.bench.bound import Limits
    from dpjax._src.tools.bench.case import Case

    measured, stop = [], {"at": "b"}

    def case(name):
        def release(key, x):
            measured.append(name)
            if stop["at"] == name:
                _signal_self(signal.SIGINT)
            return x + jax.random.uniform(key)

        return Case("selection", f"fake.{name}", "tiny", release, (jax.numpy.ones(3),))

    monkeypatch.setattr(bench_cli, "cases", lambda family, scale: [case("a"), case("b"), case("c")])
    fixed = Limits({2**14: 1e12}, hash_rate=1e11)  # the rates are measured elsewhere (test_bench_bounds)
    monkeypatch.setattr(bench_run, "measure_limits", lambda memory, repeats: fixed)
    out = tmp_path / "out"
    argv = ["bench", "selection", "--size", "1", "--repeats", "1", "--no-peers", "--out", str(out)]
    assert main(argv) == 130
    record = json.loads((out / "results.json").read_text())
    assert record["status"] == "interrupted" and [r["mechanism"] for r in record["rows"]] == ["fake.a"]
    assert (out / "results.png").is_file() and (out / "results.md").is_file()
    assert "Traceback" not in capsys.readouterr().err
    assert main(argv) == 2  # refused before measuring: DIR holds a run
    assert "--overwrite" in capsys.readouterr().err
    measured.clear()
    stop["at"] = None
    other = [*argv, "--resume"]
    other[other.index("--repeats") + 1] = "2"
    assert main(other) == 2  # the checkpoint was made with 1 repeat: refused before measuring
    assert "another repeats; refusing to resume" in capsys.readouterr().err and not measured
    assert main([*argv, "--resume"]) == 0
    assert "fake.a: from the checkpoint" in capsys.readouterr().out
    resumed = json.loads((out / "results.json").read_text())
    assert resumed["status"] == "complete" and [r["mechanism"] for r in resumed["rows"]] == [
        "fake.a", "fake.b", "fake.c"]
    assert resumed["rows"][0] == record["rows"][0] and "a" not in measured
    assert not (out / ".checkpoint").exists()


def _fake(name, calls, stop):
    from dpjax._src.tools.reproduce import Reproduction, Row

    def run(key, mode, data_dir):
        calls.append(name)
        if stop.get("at") == name:
            _signal_self(signal.SIGTERM)
        value = float(jax.random.uniform(key))  # the reproduction's own key: the same when resumed
        return Reproduction(name, f"Paper {name}", [Row("Table 1", mode, "MAE", 1.0, value, 0.1)], "3 trials",
                            [], None)

    return types.SimpleNamespace(TITLE=f"Paper {name}", run=run)


def test_reproduce_stopped_by_sigterm_exits_143_and_resume_equals_an_uninterrupted_run(
        tmp_path, monkeypatch, capsys):
    import dpjax._src.tools.reproduce.cli as reproduce_cli

    calls, stop = [], {}
    fakes = {name: _fake(name, calls, stop) for name in ("aa", "bb", "cc")}
    monkeypatch.setattr(reproduce_cli, "REPRODUCTIONS", fakes)
    monkeypatch.setattr(reproduce_cli, "SEEDS", {})
    assert main(["reproduce", "--smoke", "--out", str(tmp_path / "plain")]) == 0
    stop["at"] = "bb"
    out = tmp_path / "out"
    assert main(["reproduce", "--smoke", "--out", str(out)]) == 143
    with open(out / "reproduction.csv") as f:
        assert [r["reproduction"] for r in csv.DictReader(f)] == ["aa"]
    assert "**Interrupted**" in (out / "reproduction.md").read_text()
    capsys.readouterr()
    calls.clear()
    stop.clear()
    assert main(["reproduce", "--smoke", "--out", str(out), "--resume"]) == 0
    assert calls == ["bb", "cc"] and "(from the checkpoint)" in capsys.readouterr().out
    assert (out / "reproduction.csv").read_bytes() == (tmp_path / "plain" / "reproduction.csv").read_bytes()


def _options(parser):
    """(subcommand, option strings, action) of every option of every subcommand of ``dpjax``."""
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, sub in commands.choices.items():
        for action in sub._actions:
            if not isinstance(action, argparse._HelpAction):
                yield name, action


def test_every_help_shows_the_defaults():
    from dpjax._src.tools.cli import build_parser

    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, action in _options(parser):
        if action.nargs != 0:  # takes a value (options and positionals): the help as printed
            shown = commands.choices[name]._get_formatter()._get_help_string(action) or ""
            assert "default" in shown, (name, action.dest)
        else:  # a flag: says what it turns on, off by default
            assert action.help, (name, action.dest)


BAD = ["0", "-1", "nan", "1e999", "x", "", "/nonexistent/dir/file"]


def _bad_argvs():
    from dpjax._src.tools.cli import build_parser

    yield from (pytest.param(argv, id=" ".join(argv)) for argv in (["x"], [""], ["--", "study"], []))
    for name, action in _options(build_parser()):
        if action.nargs == 0:  # a flag, alone
            yield pytest.param([name, action.option_strings[0]], id=f"{name} {action.option_strings[0]}")
            continue
        for value in BAD:
            argv = [name, *action.option_strings[:1], value]
            yield pytest.param(argv, id=" ".join(argv))


STUBS = """
import contextlib, io, json, sys, traceback

def computing(*args, **kwargs):  # the arguments were accepted: stop before the real work
    raise SystemExit(0)

from dpjax._src.tools.bench import cli as bench_cli
from dpjax._src.tools.reproduce import cli as reproduce_cli
from dpjax._src.tools.study import cli as study_cli
from dpjax._src.tools.train import run as train_run
study_cli._run = bench_cli._measure = reproduce_cli._run = computing
train_run.calibrate = train_run.init_carry = computing
from dpjax.cli import main

results = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            code = "traceback"
            traceback.print_exc(file=err)
    results.append([argv, code, err.getvalue()])
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory):
    """Every bad argument of every subcommand, each a ``dpjax`` call, all in one subprocess (one
    import), with the computing stubbed out once the arguments are accepted: ``{argv: (status, err)}``."""
    work = tmp_path_factory.mktemp("bad")
    argvs = [p.values[0] for p in _bad_argvs()]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DPJAX_COMPILE_CACHE": "off"}
    done = subprocess.run([sys.executable, "-c", STUBS, json.dumps(argvs)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {tuple(argv): (code, err) for argv, code, err in json.loads(done.stdout.splitlines()[-1])}



@pytest.mark.parametrize("argv", list(_bad_argvs()))
def test_no_bad_argument_of_any_subcommand_gives_a_traceback(argv, bad_runs):
    code, err = bad_runs[tuple(argv)]
    assert code != "traceback" and "Traceback" not in err, err[-2000:]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('trials = "x"', "option trials must be an integer >= 1"),
        ("epsilon = [0, 1]", "option epsilon must be a list of numbers > 0"),
        ("confidence = 1.5", "option confidence must be a number in (0, 1)"),
        ('dataset = ["mnist"]', "option dataset must be a list of"),
        ("seed = true", "option seed must be an integer"),
        ("trails = 3", "unknown options ['trails']"),
        ("trials = [", "Invalid"),
        ('[studies.x]\nmechanisms = { a = "broken.py:f" }', "SyntaxError"),
    ],
)
def test_bad_config_files_are_refused_clearly(text, message, tmp_path, capsys):
    (tmp_path / "broken.py").write_text("def f(:\n")
    (tmp_path / "c.toml").write_text(text + "\n")
    assert main(["study", "--config", str(tmp_path / "c.toml"), "--list"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_bench_and_reproduce_refuse_foreign_input_files(tmp_path, capsys):
    (tmp_path / "list.json").write_text("[]")
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    (tmp_path / "README.md").write_text("no markers\n")
    readme, other = str(tmp_path / "README.md"), str(tmp_path / "other.csv")
    for argv, message in (
        (["bench", "--from-json", str(tmp_path / "list.json")], "not a results.json"),
        (["bench", "--update-readme", readme], "must contain one <!-- dpjax-bench:begin"),
        (["reproduce", "--from-csv", other, "--update-readme", readme], "must contain one"),
    ):
        assert main(argv) == 2
        assert message in capsys.readouterr().err
    readme = tmp_path / "README.md"
    readme.write_text("<!-- dpjax-bench:begin reproduction -->\n<!-- dpjax-bench:end reproduction -->\n")
    assert main(["reproduce", "--from-csv", str(tmp_path / "other.csv"), "--update-readme", str(readme)]) == 2
    assert "not a reproduction.csv" in capsys.readouterr().err


def test_a_first_signal_asks_for_a_stop_and_a_second_one_exits_at_once():
    script = """
import os, signal, time
from dpjax._src import interrupt
with interrupt.handled():
    os.kill(os.getpid(), signal.SIGTERM)  # outside raising(): only asks for a stop
    time.sleep(0.01)
    try:
        interrupt.check()
    except interrupt.Interrupted as err:
        print("stop asked by", err.signum, interrupt.exit_code(), flush=True)
    os.kill(os.getpid(), signal.SIGINT)  # the second signal
    time.sleep(30)
    print("not reached")
"""
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 130 and done.stdout == "stop asked by 15 143\n", done.stderr
    assert "SIGINT again: stopping at once" in done.stderr

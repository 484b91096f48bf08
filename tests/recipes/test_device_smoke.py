"""`.ci/device_smoke`, the GPU smoke script, checked without a GPU: its
steps' commands parse with the recipes' real parsers, the runner records
ok/failed/skipped (and goes on after a failure or a timeout), and a quick
CPU run (`--allow_cpu --quick`) writes valid JSON. CI never runs the GPU
steps themselves (docs/devices.md)."""

import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import keras
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, ".ci", "device_smoke")


def _module():
    loader = importlib.machinery.SourceFileLoader("device_smoke", SCRIPT)
    spec = importlib.util.spec_from_loader("device_smoke", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _script(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, SCRIPT, *args], cwd=ROOT,
                          env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_script_is_executable():
    assert os.access(SCRIPT, os.X_OK)


def test_every_step_and_its_command(tmp_path):
    from recipes.benchmark import flags as benchmark_flags
    from recipes.glue import train as glue_train
    from recipes.lm import train as lm_train
    from recipes.translate import train as translate_train

    process = _script("--list", "--work_dir", str(tmp_path))
    assert process.returncode == 0, process.stderr[-3000:]
    steps = json.loads(process.stdout)
    names = [s["name"] for s in steps]
    assert len(names) == len(set(names))
    for backend in ("tensorflow", "jax", "torch"):
        for kind in ("devices", "pytest", "probe", "benchmark"):
            assert f"{kind}-{backend}" in names
    options = ["", "-float16", "-jit", "-float16-jit"]
    for recipe in ("glue", "translate"):
        assert [n for n in names if n.startswith(recipe + "-")] == [
            f"{recipe}-mirrored{o}" for o in options] + [
            f"{recipe}-one-device-float16-jit"]
    assert {"xla-4096-random", "xla-4096-factorized_random",
            "lm-builtin-generate"} <= set(names)

    parsers = {"recipes.glue": glue_train.build_parser().parse_args,
               "recipes.translate":
                   translate_train.build_parser().parse_args,
               "recipes.lm": lm_train.build_parser().parse_args,
               "recipes.benchmark": benchmark_flags.parse}
    parsed = {}
    for step in steps:
        command = step["command"]
        if command[1:2] == ["-m"] and command[2] in parsers:
            # The recipes' own parsers accept the step's flags.
            parsed[step["name"]] = parsers[command[2]](command[3:])
            assert step["timeout_s"] <= 300
        if step["name"].startswith("xla-4096-"):
            assert command[-1] == "4096"  # full size without --quick
    assert len(parsed) == 10 + 1 + 3
    for recipe in ("glue", "translate"):
        for option in options:
            args = parsed[f"{recipe}-mirrored{option}"]
            assert args.strategy == "mirrored"
            assert args.jit_compile == ("jit" in option)
            assert args.mixed_precision == (
                "float16" if "float16" in option else "float32")
            step = steps[names.index(f"{recipe}-mirrored{option}")]
            assert step["env"]["KERAS_SYNTH_LOGICAL_DEVICES"] == "2"
            assert step["needs_gpu"]
            # XLA over two mirrored replicas is refused by the recipes.
            assert step["expected_exit"] == (2 if "jit" in option else 0)
        args = parsed[f"{recipe}-one-device-float16-jit"]
        assert (args.strategy, args.jit_compile, args.mixed_precision) == (
            "one_device", True, "float16")
        assert steps[names.index(f"{recipe}-one-device-float16-jit")][
            "expected_exit"] == 0
    assert parsed["lm-builtin-generate"].prompts == ["ROMEO:", "JULIET:"]
    assert [parsed[f"benchmark-{b}"].backends for b in
            ("tensorflow", "jax", "torch")] == [["tensorflow"], ["jax"],
                                                ["torch"]]
    assert not any(s["needs_gpu"] for s in steps
                   if s["name"].startswith(("devices-", "probe-", "xla-")))


def test_runner_records_each_step_and_goes_on_after_failures(tmp_path):
    smoke = _module()
    python = sys.executable
    steps = [
        smoke.Step("fails", "t", [python, "-c", "raise SystemExit(3)"]),
        smoke.Step("hangs", "t", [python, "-c",
                                  "import time; time.sleep(60)"],
                   timeout=1),
        smoke.Step("gpu", "t", [python, "-c", "pass"], needs_gpu=True),
        smoke.Step("measures", "t", [python, "-c",
                                     "print('hello'); print('SMOKE_RESULT "
                                     "{\"x\": 1}')"]),
        smoke.Step("checked", "t", [python, "-c", "print('no GPU here')"],
                   check=smoke._expect("Devices:", gpus=2)),
    ]
    out = str(tmp_path / "smoke.json")
    lines = []
    report = smoke.run_steps(steps, have_gpu=False, out=out,
                             time_limit=120, meta={"gpu": []},
                             log=lines.append)
    with open(out) as f:
        saved = json.load(f)
    assert saved == json.loads(json.dumps(report))
    by_name = {s["name"]: s for s in saved["steps"]}
    assert [s["name"] for s in saved["steps"]] == [s.name for s in steps]
    assert by_name["fails"]["status"] == "failed"
    assert by_name["fails"]["returncode"] == 3
    assert by_name["fails"]["reason"] == "exit status 3 (expected 0)"
    assert by_name["hangs"]["status"] == "failed"
    assert by_name["hangs"]["reason"] == "timed out after 1 s"
    assert by_name["hangs"]["duration_s"] < 30
    assert by_name["gpu"]["status"] == "skipped"
    assert by_name["gpu"]["reason"] == "no GPU"
    assert by_name["measures"]["status"] == "ok"
    assert by_name["measures"]["result"] == {"x": 1}
    assert "hello" in by_name["measures"]["output_tail"]
    assert by_name["checked"]["status"] == "failed"
    assert "Devices:" in by_name["checked"]["reason"]
    assert saved["summary"] == {"ok": 1, "failed": 3, "skipped": 1}
    for record in saved["steps"]:
        assert record["duration_s"] >= 0 and "command" in record

    # Out of time: the steps left are skipped, not run.
    report = smoke.run_steps(steps[3:4], have_gpu=True, out=out,
                             time_limit=1, meta={})
    assert report["steps"][0]["status"] == "skipped"
    assert report["steps"][0]["reason"] == "time limit"


def test_recipe_check_counts_the_gpus_of_the_devices_line():
    smoke = _module()
    check = smoke._expect("MirroredStrategy with 2 replica(s)", gpus=2)
    two = ("Strategy: MirroredStrategy with 2 replica(s); dtype policy "
           "float32.\nDevices: GPU:0 (NVIDIA H200), GPU:1 (NVIDIA H200); "
           "float32 matmuls: highest (full float32, TF32 off).\n")
    assert check(two, {})[0]
    assert check(two, {})[2]["devices_line"].startswith("Devices: GPU:0")
    cpus = two.replace("GPU:0 (NVIDIA H200), GPU:1 (NVIDIA H200)",
                       "CPU:0, CPU:1 (no GPU found)")
    assert check(cpus, {})[:2] == (
        False, "expected 2 GPU(s) in the Devices line")
    assert not check("Strategy: OneDeviceStrategy", {})[0]


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="the CPU run's steps use TensorFlow; the script "
                    "itself is checked on every backend above")
def test_quick_cpu_run_writes_its_json(tmp_path):
    out = tmp_path / "out" / "device_smoke.json"
    process = _script("--allow_cpu", "--quick", "--out", str(out), "--only",
                      "devices-tensorflow,xla-4096-random,"
                      "lm-builtin-generate", timeout=600)
    assert process.returncode == 0, process.stdout[-3000:]
    report = json.loads(out.read_text())
    steps = {s["name"]: s for s in report["steps"]}
    assert list(steps) == ["devices-tensorflow", "xla-4096-random",
                           "lm-builtin-generate"]
    assert report["quick"] and report["allow_cpu"]
    assert report["summary"] == {"ok": 2, "failed": 0, "skipped": 1}
    assert steps["devices-tensorflow"]["status"] == "ok"
    assert "/device:CPU:0" in steps["devices-tensorflow"]["result"][
        "devices"]
    xla = steps["xla-4096-random"]
    assert xla["status"] == "ok" and xla["result"]["tokens"] == 512
    assert xla["result"]["finite"] and len(xla["result"]["step_ms"]) == 3
    assert steps["lm-builtin-generate"]["status"] == "skipped"
    assert steps["lm-builtin-generate"]["reason"] == "no GPU"
    assert f"Wrote {out}" in process.stdout


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None,
                    reason="this machine may have a GPU")
def test_without_a_gpu_it_stops_unless_allowed(tmp_path):
    process = _script("--out", str(tmp_path / "x.json"))
    assert process.returncode == 2
    assert "no GPU found" in process.stderr and "--allow_cpu" in (
        process.stderr)
    assert not (tmp_path / "x.json").exists()
    process = _script("--only", "nope")
    assert process.returncode == 2 and "unknown step(s) ['nope']" in (
        process.stderr)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow",
                    reason="the recipes run on TensorFlow")
def test_mirrored_jit_step_passes_on_the_recipes_refusal(tmp_path):
    """The "-jit" recipe steps expect the recipes' refusal of XLA over two
    mirrored replicas (exit 2 and its message): run on two logical CPUs,
    the step passes; the same step expecting a clean exit fails."""
    smoke = _module()
    steps = {s.name: s for s in smoke.build_steps(str(tmp_path), quick=True)}
    step = steps["glue-mirrored-jit"]
    assert step.exit_code == 2
    record = smoke.run_step(step)
    assert record["status"] == "ok", record
    assert record["returncode"] == 2
    assert "not supported with `--strategy=mirrored` over 2 replicas" in (
        record["output_tail"])
    step.exit_code = 0
    record = smoke.run_step(step)
    assert record["status"] == "failed"
    assert record["reason"] == "exit status 2 (expected 0)"

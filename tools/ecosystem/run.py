"""`make ecosystem`: transformers, accelerate, peft and DeepSpeed on npu, each run unchanged.

Creates a side venv on top of the project's (.venv-eco, pinned versions from requirements.txt),
then runs (a) accelerate's own test files from its PyPI sdist, (b) peft's test_custom_models.py
(a LoRA subset), (c) transformers' model and Trainer tests from a checkout (--transformers DIR),
and (d) our scripts (scripts/): Trainer, FA2 vs eager and generate, accelerate launch on 2 npus,
peft LoRA merge, DeepSpeed ZeRO 1/2/3 via the deepspeed launcher, each against CPU. Prints a table
per part and writes it into docs/ecosystem.md."""

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent / "optests"))
from doc_sections import replace_section  # noqa: E402
from processes import run_with_timeout, stop_children_on_signals  # noqa: E402

ACCELERATE_FILES = ["test_accelerator.py", "test_grad_sync.py", "test_data_loader.py", "test_kwargs_handlers.py",
                    "test_optimizer.py", "test_memory_utils.py", "test_hooks.py", "test_state_checkpointing.py",
                    "test_multidevice.py"]
# peft's custom-model tests: LoRA on its small custom models (all 96 LoRA configurations), the test
# methods that exercise the device (forward in each dtype, training, merging, adapters on and off,
# save / load): about 1300 of the file's 5651 LoRA tests, a few minutes on 2 cores.
PEFT_METHODS = ["test_forward_output_finite", "test_forward_float16", "test_forward_bfloat16",
                "test_only_params_are_updated", "test_training_custom_models", "test_merge_layers", "test_safe_merge",
                "test_disable_adapters", "test_save_load_roundtrip", "test_active_adapter",
                "test_multiple_active_adapters_forward"]
PEFT_SELECT = "lora and (" + " or ".join(PEFT_METHODS) + ")"
TRANSFORMERS_FILES = ["tests/models/llama/test_modeling_llama.py", "tests/models/gpt2/test_modeling_gpt2.py",
                      "tests/models/bert/test_modeling_bert.py", "tests/models/mixtral/test_modeling_mixtral.py",
                      "tests/trainer/test_trainer.py"]
BEGIN, END = "<!-- ecosystem results: begin -->", "<!-- ecosystem results: end -->"


def venv(path: Path) -> Path:
    """The side venv's python: the project's packages (torch, torch_npu) are visible through a .pth."""
    python = path / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
        project_site = subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                      check=True, capture_output=True, text=True).stdout.strip()
        Path(site, "torch_npu_project.pth").write_text(project_site + "\n")
    # As a user installs them: plain pip (DeepSpeed's setup finds the npu through torch_npu, which
    # points ASCEND_HOME_PATH at the toolkit).
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(HERE / "requirements.txt")], check=True)
    return python


def sdist(python: Path, name: str, version: str, into: Path) -> Path:
    subprocess.run([str(python), "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                    f"{name}=={version}", "-d", str(into)], check=True)
    archive = next(into.glob(f"{name}-{version}.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / f"{name}-{version}"


def junit_counts(xml: Path) -> dict:
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "failures": []}
    if not xml.exists():
        return counts
    try:
        root = ET.parse(xml).getroot()
    except ET.ParseError:
        return counts
    for case in root.iter("testcase"):
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if case.find("skipped") is not None:
            counts["skipped"] += 1
        elif bad is not None:
            counts["failed" if bad.tag == "failure" else "errors"] += 1
            lines = (bad.text or "").strip().splitlines()
            message = bad.get("message") or (lines[-1] if lines else "")
            counts["failures"].append(f"{case.get('name')}: {message.splitlines()[0][:160] if message else ''}")
        else:
            counts["passed"] += 1
    return counts


def pytest_part(python: Path, cwd: Path, targets, env, work: Path, label: str, extra=(), timeout=1800) -> dict:
    xml = work / f"{label}.xml"
    # addopts cleared: the projects' own (coverage, xdist) need plugins their users' venvs may lack.
    cmd = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}",
           "-o", "junit_family=xunit1", "-o", "addopts=", *extra, *targets]
    rc, out, timed_out, seconds = run_with_timeout(cmd, cwd, env, timeout)
    counts = junit_counts(xml)
    counts.update(seconds=round(seconds), timed_out=timed_out, tail=out.strip().splitlines()[-3:])
    return counts


def script_part(python: Path, env, work: Path) -> list:
    """Our scripts: one row each, ok when the run matched its CPU reference."""
    bin_dir = python.parent
    s = HERE / "scripts"
    runs = [
        ("Trainer: tiny Llama, bf16, adamw_torch_npu_fused, resume", [str(python), str(s / "hf_trainer.py")]),
        ("flash_attention_2 vs eager, generate()", [str(python), str(s / "hf_generate_fa2.py")]),
        ("accelerate launch, 2 npus", [str(bin_dir / "accelerate"), "launch", "--num_processes", "2", "--multi_gpu",
                                       "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                                       str(s / "accelerate_train.py")]),
        ("peft LoRA train and merge", [str(python), str(s / "peft_lora.py")]),
    ]
    for stage, dtype in ((1, "bf16"), (2, "bf16"), (3, "bf16"), (2, "fp32")):
        runs.append((f"DeepSpeed ZeRO-{stage}, {dtype}, FusedAdam, deepspeed --num_gpus 2",
                     [str(bin_dir / "deepspeed"), "--num_gpus", "2", "--master_port", str(29610 + len(runs)),
                      str(s / "ds_train.py"), "--stage", str(stage), "--dtype", dtype]))
    rows = []
    for name, cmd in runs:
        rc, out, timed_out, seconds = run_with_timeout(cmd, work, env, 900)
        results = [json.loads(line) for line in out.splitlines() if line.startswith("{") and '"ok"' in line]
        ok = rc == 0 and bool(results) and all(r["ok"] for r in results)
        detail = json.dumps(results[-1]) if results else (out.strip().splitlines() or ["no output"])[-1]
        rows.append({"name": name, "ok": ok, "seconds": round(seconds), "detail": detail[:300]})
        print(f"{'PASS' if ok else 'FAIL'} {name} ({round(seconds)}s)", flush=True)
    return rows


def table(parts: dict, scripts: list) -> str:
    lines = [BEGIN, "", "| part | passed | failed | errors | skipped | pass rate |", "|---|---|---|---|---|---|"]
    total_pass = total_run = 0
    for label, c in parts.items():
        run = c["passed"] + c["failed"] + c["errors"]
        total_pass += c["passed"]
        total_run += run
        rate = f"{100.0 * c['passed'] / run:.1f}%" if run else "-"
        lines.append(f"| {label} | {c['passed']} | {c['failed']} | {c['errors']} | {c['skipped']} | {rate} |")
    if total_run:
        lines.append(f"| **third-party tests** | {total_pass} | | | | **{100.0 * total_pass / total_run:.1f}%** |")
    lines += ["", "| our script (against CPU) | result | seconds |", "|---|---|---|"]
    lines += [f"| {r['name']} | {'ok' if r['ok'] else 'FAILED: ' + r['detail']} | {r['seconds']} |" for r in scripts]
    failures = [(label, f) for label, c in parts.items() for f in c["failures"]]
    if failures:
        lines += ["", "Failing third-party tests:", ""]
        lines += [f"- {label}: `{f}`" for label, f in failures[:60]]
    lines += ["", END, ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=ROOT / ".venv-eco")
    parser.add_argument("--transformers", type=Path, help="a transformers checkout for part (c)")
    parser.add_argument("--parts", default="a,b,c,d")
    parser.add_argument("--doc", type=Path)
    args = parser.parse_args(argv)
    stop_children_on_signals()
    parts = set(args.parts.split(","))
    python = venv(args.venv)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPU_SIM")}
    # As in an activated venv: the tests start `accelerate` / `deepspeed` by name.
    env["PATH"] = os.pathsep.join([str(python.parent), env.get("PATH", "")])
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    results = {}
    scripts = []
    with tempfile.TemporaryDirectory(prefix="ecosystem-") as tmp:
        work = Path(tmp)
        if "a" in parts:
            src = sdist(python, "accelerate", "1.15.0", work)
            results["accelerate (own tests)"] = pytest_part(python, src, [f"tests/{f}" for f in ACCELERATE_FILES],
                                                           env, work, "accelerate")
        if "b" in parts:
            src = sdist(python, "peft", "0.21.2", work)
            # The sdist leaves out tests/__init__.py, which the repository has (its tests import relatively).
            (src / "tests" / "__init__.py").touch()
            results["peft test_custom_models (LoRA)"] = pytest_part(
                python, src, ["tests/test_custom_models.py"], env, work, "peft", extra=["-k", PEFT_SELECT])
        if "c" in parts and args.transformers:
            results["transformers models + Trainer"] = pytest_part(
                python, args.transformers, TRANSFORMERS_FILES, env, work, "transformers", timeout=3600)
        elif "c" in parts:
            print("part (c) not run: give TRANSFORMERS=<transformers checkout>", flush=True)
        if "d" in parts:
            scripts = script_part(python, env, work)
    for label, c in results.items():
        print(f"{label}: {c['passed']} passed, {c['failed']} failed, {c['errors']} errors, {c['skipped']} skipped "
              f"({c['seconds']}s{', TIMED OUT' if c['timed_out'] else ''})")
    text = table(results, scripts)
    print(text)
    if args.doc:
        replace_section(args.doc, BEGIN, END, text)
    bad = [r for r in scripts if not r["ok"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

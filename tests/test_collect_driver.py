"""The campaign driver: plan, preflight, collect (SIGKILL, resume, external stacks, the real smoke run)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from collect_fakes import fake_stack
from deepgreen_audit.cli import main
from deepgreen_audit.collect.disk import run_dir_bytes
from deepgreen_audit.collect.driver import collect
from deepgreen_audit.collect.instruments import probe
from deepgreen_audit.collect.plan import load_plan
from deepgreen_audit.errors import UserError
from deepgreen_audit.package.descriptor import Package
from deepgreen_audit.package.rundirs import flatten, restore
from deepgreen_audit.package.validate import validate
from deepgreen_audit.spec import load_spec

CLIENT_SOURCE = Path(__file__).parent / "clients" / "harness_client.c"


def write_plan(tmp_path: Path, stacks: str, scope: str, name: str = "plan.toml") -> Path:
    path = tmp_path / name
    path.write_text(f'campaign = "test"\nmaster_seed = 11\nrun_timeout_s = 120\n{stacks}\n[scope]\n{scope}\n')
    return path


def _host_has_rapl() -> bool:
    """Whether this host has what a cpu campaign's boundary needs: the CPU packages' RAPL."""
    found = probe()
    if found.nvml is not None:
        found.nvml.close()
    return "RAPL" not in found.missing


# ------------------------------------------------------------------ plan


def test_default_plan_derives_the_campaign_from_the_spec():
    spec = load_spec()
    plan = load_plan()
    configs = {(j.ecosystem, j.architecture, j.dataset) for j in plan.jobs}
    expected = (len(spec["S6_replication"]["ecosystems"]) * len(spec["S1_model"]["architectures"])
                * len(spec["S3_data"]["datasets"]))
    assert len(configs) == expected
    assert len(plan.jobs) == expected * spec["S6_replication"]["repetitions"]
    assert len({j.seed for j in plan.jobs}) == len(plan.jobs)
    assert [j.schedule_position for j in plan.jobs] == list(range(1, len(plan.jobs) + 1))
    assert all(a.run_id.rsplit(".", 1)[0] != b.run_id.rsplit(".", 1)[0]
               for a, b in zip(plan.jobs, plan.jobs[1:])), "a configuration ran twice in a row"
    first_round = [j.run_id.rsplit(".", 1)[0] for j in plan.jobs[:expected]]
    assert first_round != sorted(first_round), "runs are interleaved, not in configuration order"
    assert load_plan().jobs == plan.jobs  # deterministic


def test_plan_print_lists_seeds_repetitions_and_commands(capsys):
    assert main(["plan", "--print"]) == 0
    lines = capsys.readouterr().out.splitlines()
    plan = load_plan()
    assert len(lines) == 1 + len(plan.jobs)
    pos, rep, seed, run_id, cmd = lines[1].split("\t")
    job = plan.jobs[0]
    assert (int(pos), int(rep), int(seed), run_id) == (1, job.repetition, job.seed, job.run_id)
    assert f"--run-id {run_id}" in cmd and "deepgreen_audit.collect.runner" in cmd


def test_plan_errors_name_file_and_key(tmp_path, capsys):
    path = write_plan(tmp_path, "", 'datasets = ["mnist"]')
    with pytest.raises(UserError) as info:
        load_plan(path)
    assert info.value.field == "scope.datasets" and str(path) in str(info.value)
    assert main(["plan", "--plan", str(path)]) == 2
    assert "scope.datasets" in capsys.readouterr().err


# ------------------------------------------------------------------ collect with a fake stack

FAKE_STACK = fake_stack('job.architecture == "vgg16" and epoch == 2',
                        "os.kill(os.getpid(), signal.SIGKILL)   # mid-epoch, inside an open block")


def test_sigkill_mid_epoch_fails_the_run_and_resume_finishes_the_plan(tmp_path, monkeypatch):
    (tmp_path / "fake_stack.py").write_text(FAKE_STACK)
    monkeypatch.setenv("FAKE_STACK_MARKER", str(tmp_path))
    plan = load_plan(write_plan(
        tmp_path, f'[stacks.python-pytorch]\nkind = "python"\nprogram = "{tmp_path / "fake_stack.py"}"',
        'ecosystems = ["python-pytorch"]\narchitectures = ["resnet18", "vgg16"]\n'
        'datasets = ["digits"]\nrepetitions = 1\nepochs = 2'))
    out = tmp_path / "out"
    first = collect(plan, out, allow_missing_counters=True)
    killed = "python-pytorch.vgg16.digits.r1"
    assert first.completed == ["python-pytorch.resnet18.digits.r1"]
    assert "SIGKILL" in first.failed[killed]
    assert not (out / "runs" / "test" / killed).exists()
    assert not (out / "work" / killed).exists()
    failure = json.loads((out / "failed" / f"{killed}.1" / "failure.json").read_text())
    assert failure["status"] == "failed" and "SIGKILL" in failure["reason"]
    # What is in runs/ is a valid package already: the failed run is kept out of it.
    pkg = flatten(out / "runs", tmp_path / "pkg1")
    assert validate(pkg).valid and len(Package.open(pkg).text("runs").rows) == 1

    second = collect(plan, out, allow_missing_counters=True)
    assert second.skipped == ["python-pytorch.resnet18.digits.r1"] and second.completed == [killed]
    assert second.ok
    pkg = flatten(out / "runs", tmp_path / "pkg2")
    package = Package.open(pkg)
    assert validate(pkg).valid and len(package.text("runs").rows) == 2
    assert len(package.text("blocks").rows) == 2 * 2 * 2


def test_collect_of_an_external_stack_through_the_c_client(tmp_path):
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler: the external reference stack cannot be built")
    exe = tmp_path / "harness_client"
    subprocess.run([compiler, "-O2", "-o", str(exe), str(CLIENT_SOURCE)], check=True)
    plan = load_plan(write_plan(
        tmp_path, f'[stacks.cpp-libtorch]\nkind = "external"\ncommand = ["{exe}", "env", "--stack"]',
        'ecosystems = ["cpp-libtorch"]\narchitectures = ["resnet18"]\ndatasets = ["digits"]\n'
        'repetitions = 1\nepochs = 2'))
    summary = collect(plan, tmp_path / "out", allow_missing_counters=True)
    assert summary.ok, summary.failed
    package = Package.open(flatten(tmp_path / "out" / "runs", tmp_path / "pkg"))
    env = package.table("environment").to_pylist()[0]
    assert env["framework"] == "c-reference-client"
    blocks = package.table("blocks").to_pylist()
    assert [(b["epoch"], b["phase"]) for b in blocks] == [(1, "train"), (1, "eval"), (2, "train"), (2, "eval")]


# ------------------------------------------------------------------ the real smoke run


def test_real_smoke_run_refuses_then_collects_a_valid_package(tmp_path, capsys):
    """One real Python/PyTorch run on scikit-learn digits, 2 epochs of one batch, on this host."""
    path = write_plan(tmp_path, '[stacks.python-pytorch]\nkind = "python"\n'
                                'program = "stacks/python_pytorch/train.py"',
                      'ecosystems = ["python-pytorch"]\narchitectures = ["resnet18"]\n'
                      'datasets = ["digits"]\nrepetitions = 1\nepochs = 2\n'
                      'max_train_batches = 1\nmax_eval_batches = 1\ndevice = "cpu"')
    out = tmp_path / "out"
    counters = _host_has_rapl()
    if not counters:   # a cpu campaign needs RAPL alone: NVML is outside its boundary
        assert main(["collect", "--plan", str(path), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert "RAPL: " in err and "NVML" not in err and "--allow-missing-counters" in err
        assert not (out / "runs").exists()
    assert main(["collect", "--plan", str(path), "--out", str(out), "--allow-missing-counters"]) == 0
    pkg = tmp_path / "pkg"
    assert main(["flatten", str(out / "runs"), "--out", str(pkg)]) == 0
    report = validate(pkg)
    assert report.valid, report.format_text()
    package = Package.open(pkg)
    blocks = package.table("blocks").to_pylist()
    assert len(blocks) == 4
    for b in blocks:
        assert b["duration_s"] > 0 and b["samples_processed"] > 0 and b["loss"] > 0
        assert b["codecarbon_energy_j"] > 0 and b["codecarbon_cpu_method"] != "unknown"
        # what CodeCarbon assumed: its emissions follow from the pinned country's intensity
        assert b["codecarbon_emissions_kg"] > 0 and b["codecarbon_country_iso_code"] == "DEU"
        assert b["codecarbon_emissions_rate_kg_per_s"] > 0
        if not counters:
            assert b["energy_j"] is None and b["cpu_energy_j"] is None
            assert b["energy_missing_reason"].startswith("RAPL: ")
        assert (b["test_accuracy"] is not None) == (b["phase"] == "eval")
    run = package.table("runs").to_pylist()[0]
    assert run["status"] == "completed" and run["learning_rate"] == load_spec()["S2_optimisation"]["learning_rate"]
    assert run["initial_weights_sha256"] and run["data_fingerprint_sha256"]
    # where torch placed the work, asked of torch during the run (this host has no GPU)
    assert (run["device"], run["device_name"], run["cudnn_enabled"], run["tf32_enabled"]) == \
        ("cpu", "cpu", False, False)
    env = package.table("environment").to_pylist()[0]
    assert env["framework"] == "torch" and env["codecarbon_version"].startswith("3.")
    assert env["ram_total_gb"] > 0 and env["pue"] >= 1 and env["on_cloud"] is False
    # CodeCarbon's own GPU count, from what it published: NVML's (none when NVML is absent)
    assert env["codecarbon_gpu_count"] == (env["gpu_count"] or 0)
    if not counters:
        assert env["rapl_available"] is False and env["counters_missing_reason"].startswith("RAPL: ")
        assert "NVML" not in env["counters_missing_reason"]
        assert package.descriptor["measured"]["counters_missing"].keys() == {"RAPL"}
    samples = package.table("samples").to_pylist()
    assert samples and all(s["cpu_utilization_pct"] is not None for s in samples)
    # the disk estimate of a run directory (collect.disk) holds for this real one
    run_dir = next((out / "runs" / "test").iterdir())
    assert sum(p.stat().st_size for p in run_dir.iterdir()) <= run_dir_bytes(len(blocks), len(samples))
    # the round trip: restoring the package gives back what collect wrote, byte for byte
    restore(pkg, tmp_path / "restored")
    for path in sorted((tmp_path / "restored").rglob("*")):
        if path.is_file():
            rel = path.relative_to(tmp_path / "restored")
            assert (out / "runs" / rel).read_bytes() == path.read_bytes(), rel


def test_codecarbon_host_keeps_the_gpu_count_codecarbon_published():
    from types import SimpleNamespace

    from deepgreen_audit.collect.codecarbon_tracker import CodeCarbonHost

    data = dict(ram_total_size=62.5, pue=1.0, on_cloud="N", cloud_provider="", cloud_region="")
    assert CodeCarbonHost.from_data(SimpleNamespace(**data, gpu_count=2.0)).gpu_count == 2
    assert CodeCarbonHost.from_data(SimpleNamespace(**data, gpu_count=None)).gpu_count is None


def test_preflight_names_each_check(tmp_path, capsys):
    path = write_plan(tmp_path, "", 'ecosystems = ["python-jax"]\narchitectures = ["resnet18"]\n'
                                    'datasets = ["digits"]\nrepetitions = 1')
    assert main(["preflight", "--plan", str(path), "--allow-missing-counters"]) == 1
    out = capsys.readouterr().out
    assert "PASS  host.codecarbon" in out and "stack.ready       python-jax/digits: no [stacks.python-jax]" in out


# ------------------------------------------------------------------ the device each stack would use

DEVICE_STACK = """
from deepgreen_audit.stacks.runtime import DeviceReport

def check(job):
    pass

def run(harness, job):
    raise RuntimeError("collect must refuse before the first run")

def device():
    return DeviceReport({device!r}, "FAKE device", {cudnn}, False)
"""


def _device_plan(tmp_path: Path, stack_device: str, declared: str) -> Path:
    (tmp_path / "device_stack.py").write_text(DEVICE_STACK.format(device=stack_device,
                                                                  cudnn=stack_device == "cuda"))
    return write_plan(tmp_path, f'[stacks.python-jax]\nkind = "python"\n'
                                f'program = "{tmp_path / "device_stack.py"}"',
                      'ecosystems = ["python-jax"]\narchitectures = ["resnet18"]\n'
                      f'datasets = ["digits"]\nrepetitions = 1\ndevice = "{declared}"')


@pytest.mark.parametrize("stack_device,declared", [("cuda", "cuda"), ("cpu", "cpu"), ("cpu", "cuda"),
                                                   ("cuda", "cpu")])
def test_preflight_asks_each_stack_which_device_it_would_use(stack_device, declared, tmp_path, capsys):
    from deepgreen_audit.collect.preflight import run_checks

    plan = load_plan(_device_plan(tmp_path, stack_device, declared))
    finding = run_checks(plan, allow_missing_counters=True).finding("stack.device")
    assert finding.resource == "python-jax"
    if stack_device == declared:
        assert finding.status == "pass" and finding.message.startswith(f"{declared} (FAKE device")
    else:
        assert finding.status == "fail"
        assert finding.message.startswith(f"python-jax would run on {stack_device} (FAKE device), "
                                          f"the plan declares {declared}")


def test_collect_refuses_a_stack_on_another_device_before_its_first_run(tmp_path, capsys):
    path = _device_plan(tmp_path, "cpu", "cuda")
    out = tmp_path / "out"
    assert main(["collect", "--plan", str(path), "--out", str(out), "--allow-missing-counters"]) == 2
    err = capsys.readouterr().err
    assert "python-jax would run on cpu (FAKE device), the plan declares cuda" in err
    assert "Traceback" not in err and not out.exists()


def test_preflight_probes_the_real_stacks_of_this_host(tmp_path):
    """This host has no GPU: PyTorch says cpu, so a cuda plan fails naming it and a cpu plan passes."""
    from deepgreen_audit.collect.preflight import run_checks

    for declared, status in (("cuda", "fail"), ("cpu", "pass")):
        path = write_plan(tmp_path, '[stacks.python-pytorch]\nkind = "python"\n'
                                    'program = "stacks/python_pytorch/train.py"',
                          'ecosystems = ["python-pytorch"]\narchitectures = ["resnet18"]\n'
                          f'datasets = ["digits"]\nrepetitions = 1\ndevice = "{declared}"',
                          name=f"{declared}.toml")
        finding = run_checks(load_plan(path), allow_missing_counters=True).finding("stack.device")
        assert finding.status == status, finding.message
        if status == "fail":
            assert finding.message.startswith("python-pytorch would run on cpu (cpu), the plan declares cuda")


# ------------------------------------------------------------------ runs that fail alike (issue 24)

FAILING_STACK = ["/bin/sh", "-c", "echo 'error: cannot open data/digits/train.npz' >&2; exit 1"]


def test_collect_shows_the_stack_error_and_stops_after_failures_alike(tmp_path, capsys):
    command = ", ".join(f'"{part}"' for part in FAILING_STACK)
    path = write_plan(tmp_path, f'[stacks.cpp-libtorch]\nkind = "external"\ncommand = [{command}]',
                      'ecosystems = ["cpp-libtorch"]\narchitectures = ["resnet18", "vgg16"]\n'
                      'datasets = ["digits"]\nrepetitions = 2\nepochs = 1')
    assert main(["collect", "--plan", str(path), "--out", str(tmp_path / "out"),
                 "--allow-missing-counters", "--max-consecutive-failures", "2"]) == 1
    captured = capsys.readouterr()
    failed = [line for line in captured.err.splitlines() if "FAILED" in line]
    assert len(failed) == 2 and all("its log ends: error: cannot open data/digits/train.npz"
                                    in line for line in failed)
    assert "stopped after 2 consecutive runs failed alike" in captured.out
    assert "2 run(s) not started" in captured.out
    # no run completed: the summary does not send the user to flatten, and flatten says why
    assert "no run completed: nothing to flatten" in captured.out
    assert "deepgreen flatten" not in captured.out
    status = main(["flatten", str(tmp_path / "out" / "runs"), "--out", str(tmp_path / "pkg")])
    err = capsys.readouterr().err
    assert status == 2 and "no run" in err and "completed" in err and err.count("\n") == 1


def test_collect_refuses_a_plan_whose_data_is_not_prepared(tmp_path, capsys):
    path = write_plan(tmp_path, '[stacks.cpp-libtorch]\nkind = "external"\ncommand = ["true"]',
                      'ecosystems = ["cpp-libtorch"]\narchitectures = ["resnet18"]\n'
                      'datasets = ["cifar100"]\nrepetitions = 1')
    assert main(["collect", "--plan", str(path), "--out", str(tmp_path / "out"),
                 "--allow-missing-counters"]) == 2
    err = capsys.readouterr().err
    assert "the data of cifar100 is not prepared" in err.splitlines()[-1] and "Traceback" not in err
    assert not (tmp_path / "out" / "failed").exists()


@pytest.mark.parametrize("declared, counters", [("cuda", {"NVML": "fail", "RAPL": "pass"}),
                                                ("cpu", {"RAPL": "pass"})])
def test_preflight_asks_for_the_counters_of_the_plan_s_boundary(declared, counters, tmp_path):
    """A cpu campaign's boundary is the CPU packages: a host without NVML lacks nothing it needs."""
    from collect_fakes import FakeNvmlState, fake_pynvml, zone
    from deepgreen_audit.collect.preflight import run_checks

    zone(tmp_path / "powercap", "intel-rapl:0", "package-0", 1_000)
    plan = load_plan(_device_plan(tmp_path, declared, declared))
    report = run_checks(plan, pynvml_module=fake_pynvml(FakeNvmlState(present=False)),
                        powercap_root=tmp_path / "powercap")
    assert {f.resource: f.status for f in report.findings if f.id == "counter.readable"} == counters


def test_the_measurement_boundary_follows_the_declared_device():
    from deepgreen_audit.collect.driver import measurement_boundary

    no_rapl = {"RAPL": "no powercap driver"}
    assert measurement_boundary({}) == "GPU boards (NVML) + CPU packages (RAPL)"
    assert measurement_boundary(no_rapl) == "GPU boards (NVML) only; not measured: CPU packages"
    assert measurement_boundary({"NVML": "no driver", **no_rapl}) == \
        "none: not measured: GPU boards, CPU packages"
    outside = " (GPU boards outside the boundary of a cpu campaign)"
    assert measurement_boundary({}, "cpu") == "CPU packages (RAPL)" + outside
    assert measurement_boundary(no_rapl, "cpu") == "none: not measured: CPU packages" + outside

# ------------------------------------------------------------------ whose folder OUT is (issue 36)

ONE_FAILING_RUN = ('ecosystems = ["cpp-libtorch"]\narchitectures = ["resnet18"]\ndatasets = ["digits"]\n'
                   'repetitions = 1\nepochs = 1')


def _failing_plan(tmp_path: Path, campaign: str = "test", scope: str = ONE_FAILING_RUN,
                  timeout_s: int = 120, name: str = "plan.toml") -> Path:
    """A plan of one run whose stack exits 1 at once: started, it would leave OUT/failed/."""
    command = ", ".join(f'"{part}"' for part in FAILING_STACK)
    path = tmp_path / name
    path.write_text(f'campaign = "{campaign}"\nmaster_seed = 11\nrun_timeout_s = {timeout_s}\n'
                    f'[stacks.cpp-libtorch]\nkind = "external"\ncommand = [{command}]\n'
                    f'[scope]\n{scope}\n')
    return path


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("holds, says", [
    ("another campaign", "holds campaign 'other' (collected from "),
    ("a package", "holds a package (datapackage.json: 'A tiny hand-written package for tests'); "
                  "collect fills a new or empty folder, or one its own campaign started"),
    ("files of the user's", "holds 1 unrelated file(s) or folder(s) (notes.txt)")])
def test_collect_refuses_an_out_that_holds_something_else_before_any_work(holds, says, tmp_path,
                                                                           tiny_package, capsys):
    from deepgreen_audit.collect.outfolder import claim_out_folder

    out = tmp_path / "out"
    if holds == "another campaign":
        claim_out_folder(load_plan(_failing_plan(tmp_path, "other", name="other.toml")), out, False)
    elif holds == "a package":
        shutil.copytree(tiny_package, out)
    else:
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    before = _tree(out)
    path = _failing_plan(tmp_path)
    assert main(["collect", "--plan", str(path), "--out", str(out), "--allow-missing-counters"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{out}: {says}" in err and "choose another --out" in err
    assert _tree(out) == before  # no run started, nothing written


def test_collect_resumes_its_own_campaign_only(tmp_path):
    from deepgreen_audit.collect.outfolder import check_out_folder, claim_out_folder, read_identity

    out = tmp_path / "out"
    first = load_plan(_failing_plan(tmp_path))
    assert check_out_folder(first, out, False) is None          # a new folder
    claim_out_folder(first, out, False)
    assert check_out_folder(first, out, False) is None          # the same campaign and plan
    # the same runs from a changed plan file: resumed, with a note, and recorded
    longer = load_plan(_failing_plan(tmp_path, timeout_s=600, name="longer.toml"))
    note = check_out_folder(longer, out, False)
    assert note is not None and "its runs are the same, so collect resumes" in note
    claim_out_folder(longer, out, False)
    revisions = read_identity(out)["plan_revisions"]
    assert [r["path"] for r in revisions] == [str(longer.path)]
    assert check_out_folder(longer, out, False) is None
    # other runs under the same name, another mark, another campaign: refused, naming why
    for plan, synthetic, says in (
            (_failing_plan(tmp_path, scope=ONE_FAILING_RUN.replace("epochs = 1", "epochs = 2"),
                           name="epochs.toml"), False, "scope.epochs 1, now 2"),
            (_failing_plan(tmp_path, name="same.toml"), True, "collected without --synthetic"),
            (_failing_plan(tmp_path, "renamed", name="renamed.toml"), False,
             "holds campaign 'test' (collected from")):
        with pytest.raises(UserError, match=re.escape(says)):
            check_out_folder(load_plan(plan), out, synthetic)


def test_collect_records_its_plan_and_says_what_it_measures(tmp_path, capsys):
    from deepgreen_audit.collect.measuring import Measuring
    from deepgreen_audit.package.checksums import sha256_file
    from deepgreen_audit.spec import spec_path

    path, out = _failing_plan(tmp_path), tmp_path / "out"
    assert main(["collect", "--plan", str(path), "--out", str(out), "--allow-missing-counters"]) == 1
    err = capsys.readouterr().err
    running = next(line for line in err.splitlines() if ": running (seed" in line)
    assert "measuring " in running and "CodeCarbon, the 1 Hz sampler (" in running
    found = probe()
    if found.nvml is not None:
        found.nvml.close()
    loud = Measuring.of(found).not_measured()
    assert err.count("NOT MEASURED: ") == (1 if loud else 0)
    if loud:
        assert loud in err.splitlines()
    provenance = json.loads((out / "runs" / "package.json").read_text())["provenance"]
    assert provenance["plan"] == {"path": str(path), "resolved": str(path.resolve()),
                                  "sha256": sha256_file(path)}
    assert provenance["spec_sha256"] == sha256_file(spec_path()) and "plan_revisions" not in provenance
    path.write_text(path.read_text().replace("run_timeout_s = 120", "run_timeout_s = 300"))
    assert main(["collect", "--plan", str(path), "--out", str(out), "--allow-missing-counters"]) == 1
    assert "its runs are the same, so collect resumes" in capsys.readouterr().err
    provenance = json.loads((out / "runs" / "package.json").read_text())["provenance"]
    assert [r["sha256"] for r in provenance["plan_revisions"]] == [sha256_file(path)]


def test_what_is_measured_follows_the_probe(tmp_path):
    from collect_fakes import FakeNvmlState, fake_pynvml, zone
    from deepgreen_audit.collect.measuring import Measuring

    zone(tmp_path / "rapl", "intel-rapl:0", "package-0", 1000)
    both = Measuring.of(probe(pynvml_module=fake_pynvml(FakeNvmlState()), powercap_root=tmp_path / "rapl"))
    assert both.not_measured() is None
    assert both.per_run() == ("measuring GPU energy (NVML), CPU energy (RAPL), CodeCarbon, the 1 Hz "
                              "sampler (GPU and CPU utilisation)")
    cpu = Measuring.of(probe(pynvml_module=fake_pynvml(FakeNvmlState(present=False)),
                             powercap_root=tmp_path / "rapl"))
    assert cpu.per_run().startswith("measuring CPU energy (RAPL), CodeCarbon")
    assert cpu.not_measured().startswith("NOT MEASURED: GPU energy (NVML: nvmlInit failed")
    assert "models on this host" not in cpu.not_measured()
    none = Measuring.of(probe(pynvml_module=fake_pynvml(FakeNvmlState(present=False)),
                              powercap_root=tmp_path / "none"))
    assert none.per_run().endswith("; NO energy counter")
    assert "GPU energy (NVML: nvmlInit failed" in none.not_measured()
    assert "CPU energy (RAPL: " in none.not_measured()
    assert "CodeCarbon's CPU and RAM figures are models on this host" in none.not_measured()
    # a counter neither opened nor missing lies outside the campaign's boundary
    outside = Measuring(readable=("RAPL",), missing={})
    assert outside.not_measured() == ("NOT MEASURED: GPU energy (NVML): outside this campaign's "
                                      "measurement boundary; CodeCarbon reports no GPU, and the "
                                      "samples' GPU columns stay empty")


def test_a_folder_collected_before_campaign_json_is_resumed_when_its_package_json_agrees(tmp_path):
    from deepgreen_audit.collect.driver import ensure_campaign_metadata
    from deepgreen_audit.collect.outfolder import check_out_folder

    out = tmp_path / "out"
    plan = load_plan(_failing_plan(tmp_path))
    ensure_campaign_metadata(plan, out, {}, [])        # what an earlier collect left: no campaign.json
    note = check_out_folder(plan, out, False)
    assert note is not None and "names this campaign, scope and master seed, so collect resumes" in note
    other = load_plan(_failing_plan(tmp_path, scope=ONE_FAILING_RUN.replace("repetitions = 1",
                                                                            "repetitions = 2"),
                                    name="more.toml"))
    with pytest.raises(UserError, match="which is not this campaign"):
        check_out_folder(other, out, False)


def test_an_out_that_links_to_a_folder_is_that_folder(tmp_path):
    """OUT as a symbolic link to a folder on a scratch disk: collect fills the folder it names."""
    from deepgreen_audit.collect.outfolder import check_out_folder

    scratch, link = tmp_path / "scratch", tmp_path / "out"
    scratch.mkdir()
    link.symlink_to(scratch)
    plan = load_plan(_failing_plan(tmp_path))
    assert check_out_folder(plan, link, False) is None
    (scratch / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match=re.escape("unrelated file(s) or folder(s) (notes.txt)")):
        check_out_folder(plan, link, False)

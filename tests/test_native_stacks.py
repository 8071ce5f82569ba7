"""The built stacks and the pinned versions: one pin per framework (the specification), the
installers and builds that follow it, preflight's one-line fixes, and the honest R/torch row."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deepgreen_audit import pins, spec
from deepgreen_audit.cli import main
from deepgreen_audit.collect import preflight
from deepgreen_audit.collect.plan import load_plan, write_scoped_plan
from deepgreen_audit.errors import UserError
from deepgreen_audit.stacks import native

SPEC_PINS = pins.pinned()


# ------------------------------------------------------------------ one pin per framework


def test_every_installer_follows_the_specification_pins():
    assert pins.pip_constraints().splitlines() == [
        f"torch=={SPEC_PINS['torch']}", f"tensorflow=={SPEC_PINS['tensorflow']}",
        f"jax=={SPEC_PINS['jax']}", f"jaxlib=={SPEC_PINS['jax']}"]
    rust = native.NATIVE_STACKS["rust-tch"].source_dir
    assert native.cargo_tch_pin(rust) == SPEC_PINS["tch"]
    assert pins.cargo_lock_version(rust / "Cargo.lock", "tch") == SPEC_PINS["tch"]
    assert pins.cargo_lock_version(rust / "Cargo.lock", "torch-sys") == SPEC_PINS["tch"]
    pom = (native.NATIVE_STACKS["java-dl4j"].source_dir / "pom.xml").read_text()
    assert re.search(r"<dl4j\.version>([^<]+)</dl4j\.version>", pom).group(1) == SPEC_PINS["dl4j"]
    assert SPEC_PINS["libtorch"] == SPEC_PINS["torch"]        # the control group runs one LibTorch
    # pyproject names the frameworks without versions: the constraints carry them
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert not re.search(r'"(torch|tensorflow|jax|jaxlib)\s*[=<>~]', pyproject)


def test_this_install_runs_the_pinned_versions():
    installed = pins.installed()
    for framework in ("torch", "tensorflow", "jax", "libtorch", "tch"):
        assert installed[framework] == SPEC_PINS[framework], (framework, installed[framework])
    if native.NATIVE_STACKS["java-dl4j"].product_path.is_file():
        assert installed["dl4j"] == SPEC_PINS["dl4j"]


def test_the_tch_crate_refuses_another_libtorch():
    """tch's build script checks the LibTorch it links against the one it was written for:
    the pair (tch, torch) of the specification is one that torch-sys accepts."""
    cargo_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    scripts = sorted(cargo_home.glob(f"registry/src/*/torch-sys-{SPEC_PINS['tch']}/build.rs"))
    if not scripts:
        pytest.fail("torch-sys is not in cargo's registry: run 'deepgreen build rust-tch'")
    wanted = re.search(r'const TORCH_VERSION: &str = "([^"]+)"', scripts[0].read_text()).group(1)
    assert wanted == SPEC_PINS["torch"]


def test_a_cargo_pin_that_differs_from_the_specification_stops_the_build(tmp_path, monkeypatch):
    rust = native.NATIVE_STACKS["rust-tch"]
    copy = tmp_path / "rust_tch"
    shutil.copytree(rust.source_dir, copy, ignore=shutil.ignore_patterns("target"))
    (copy / "Cargo.toml").write_text((copy / "Cargo.toml").read_text().replace(
        f'tch = "={SPEC_PINS["tch"]}"', 'tch = "=0.24.0"'))
    monkeypatch.setattr(native.NativeStack, "source_dir", property(lambda self: copy))
    with pytest.raises(UserError, match=r"Cargo.toml pins tch '0.24.0'.*specification"):
        rust.build()


# ------------------------------------------------------------------ the audit's S4 check


def test_pinned_versions_check_reads_the_release_and_keeps_the_build_label():
    from deepgreen_audit.audit.checks.recipe import pinned_versions
    from deepgreen_audit.columnar.frame import Frame

    env = Frame.of({"run_id": ["a", "b", "c"], "framework": ["torch", "torch", "tch"],
                    "framework_version": [f"{SPEC_PINS['torch']}+cu130", "2.5.1+cpu", SPEC_PINS["tch"]]})
    ctx = type("Ctx", (), {"environment": env, "spec": {"S4_backend": {"pinned_versions": SPEC_PINS}}})()
    outcome = pinned_versions(ctx)
    assert not outcome.ok and outcome.rows == 1 and "torch 2.5.1+cpu" in outcome.message
    assert [row["run_id"] for row in outcome.details["evidence"]] == ["b"]


# ------------------------------------------------------------------ builds and preflight


def test_build_verb_names_what_is_missing(monkeypatch, capsys):
    assert main(["build", "r-torch"]) == 2
    err = capsys.readouterr().err
    assert "r-torch cannot be built" in err and "CRAN" in err and "[scope]" in err and "Traceback" not in err
    assert main(["build", "cobol-stack"]) == 2
    assert "'cobol-stack' is not a built stack (valid: cpp-libtorch, rust-tch, java-dl4j)" \
        in capsys.readouterr().err
    assert main(["build", "rust"]) == 2
    assert "'rust' is not a built stack; did you mean 'rust-tch'?" in capsys.readouterr().err
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["build", "rust-tch"]) == 2
    assert "needs cargo on PATH" in capsys.readouterr().err
    assert main(["build", "--available", "java-dl4j"]) == 0
    assert "skipping java-dl4j: mvn, java not on PATH" in capsys.readouterr().err


def _plan(tmp_path, ecosystems):
    return load_plan(write_scoped_plan(tmp_path / "plan.toml", "pre", tmp_path / "data", {
        "ecosystems": ecosystems, "architectures": ["resnet18"], "datasets": ["digits"], "repetitions": 1}))


def _lines(report):
    return {f"{f.id}:{f.resource}": (f.status, f.message) for f in report.findings}


def test_preflight_gives_each_built_stack_one_line_naming_its_fix(tmp_path, monkeypatch):
    from deepgreen_audit.collect.prepare import prepare_plan

    plan = _plan(tmp_path, ["cpp-libtorch", "rust-tch", "java-dl4j", "r-torch"])
    got = _lines(preflight.run_checks(plan, allow_missing_counters=True))
    assert got["stack.ready:r-torch/digits"][0] == "fail" and "CRAN" in got["stack.ready:r-torch/digits"][1]
    assert got["stack.ready:cpp-libtorch/digits"] == ("fail", f"{tmp_path}/data/digits/manifest.json is missing: "
                                                        f"run 'deepgreen data prepare --plan {plan.path}'")
    prepare_plan(plan)
    rust = native.NATIVE_STACKS["rust-tch"]
    monkeypatch.setitem(native.NATIVE_STACKS, "rust-tch",
                        dataclasses.replace(rust, product="target/release/not-built-here"))
    monkeypatch.setitem(native.NATIVE_STACKS, "java-dl4j",
                        dataclasses.replace(native.NATIVE_STACKS["java-dl4j"], runtime_tools=("no-such-java",)))
    got = _lines(preflight.run_checks(plan, allow_missing_counters=True))
    assert got["stack.ready:rust-tch/digits"][0] == "fail"
    assert "not-built-here is not built: run 'deepgreen build rust-tch'" in got["stack.ready:rust-tch/digits"][1]
    assert got["stack.ready:java-dl4j/digits"] == ("fail", "no-such-java is not on PATH (a JDK 17 and Maven; "
                                                     "Debian: apt-get install openjdk-17-jdk maven)")
    assert got["stack.ready:cpp-libtorch/digits"][0] == "pass"
    monkeypatch.setattr(pins, "installed", lambda: {**pins.pinned(), "tch": "0.18.0"})
    got = _lines(preflight.run_checks(plan, allow_missing_counters=True))
    assert got["version.pinned:tch"][0] == "fail" and "the specification pins 0.26.0" in got["version.pinned:tch"][1]
    assert got["version.pinned:libtorch"][0] == "pass"


# ------------------------------------------------------------------ DL4J's backend follows the device

JAVA = native.NATIVE_STACKS["java-dl4j"]


def test_the_pom_builds_the_specifications_backends():
    """Plain `mvn package` builds the CPU backend the specification names; the GPU's comes
    through the `cuda` profile, with the CUDA libraries its version needs."""
    pom = (JAVA.source_dir / "pom.xml").read_text()
    assert re.search(r"<nd4j\.backend>([^<]+)</nd4j\.backend>", pom).group(1) == spec.dl4j_backend("cpu")
    assert native.maven_options("cpu") == [f"-Ddl4j.version={SPEC_PINS['dl4j']}",
                                           f"-Dnd4j.backend={spec.dl4j_backend('cpu')}"]
    assert native.maven_options("cuda")[1:] == [f"-Dnd4j.backend={spec.dl4j_backend('cuda')}", "-Pcuda",
                                                f"-Dcuda.redist.version={SPEC_PINS['cuda-redist']}"]


def test_auto_is_the_hosts_device(monkeypatch, capsys):
    from deepgreen_audit.device import nvml
    from deepgreen_audit.device.errors import NvmlUnavailable

    def no_driver():
        raise NvmlUnavailable("nvmlInit failed")

    monkeypatch.delenv(native.ACCELERATOR_VARIABLE, raising=False)
    monkeypatch.setattr(nvml, "Nvml", no_driver)
    assert native.host_device() == "cpu"
    monkeypatch.setattr(nvml, "Nvml", lambda: type("Session", (), {"close": lambda self: None})())
    assert native.host_device() == "cuda"
    monkeypatch.setenv(native.ACCELERATOR_VARIABLE, "cpu")
    assert native.host_device() == "cpu"
    monkeypatch.setenv(native.ACCELERATOR_VARIABLE, "tpu")
    assert main(["build", "java-dl4j"]) == 2
    err = capsys.readouterr().err
    assert "DEEPGREEN_ACCELERATOR='tpu' is not one of cuda, cpu" in err and "Traceback" not in err


def test_a_build_for_another_device_starts_afresh_and_records_its_backend(tmp_path, monkeypatch):
    """Maven's copy-dependencies never removes a jar: a build whose backend changes starts from
    an empty target/, so no jar of the other backend stays beside the new one."""
    source = tmp_path / "java_dl4j"
    lib = source / "target" / "lib"
    lib.mkdir(parents=True)
    (lib / "nd4j-native-old.jar").touch()
    (lib.parent / native.BACKEND_RECORD).write_text("nd4j-native\n")
    commands = []

    def maven(stack, command, quiet):
        commands.append(command)
        lib.mkdir(parents=True, exist_ok=True)
        (lib / "built.jar").touch()

    monkeypatch.setattr(native.NativeStack, "source_dir", property(lambda self: source))
    monkeypatch.setattr(native, "_run", maven)
    JAVA.builder(JAVA, True, "cuda")
    assert sorted(p.name for p in lib.iterdir()) == ["built.jar"]
    assert native.built_backend(JAVA) == spec.dl4j_backend("cuda")
    assert commands == [["mvn", "-q", "-B", "package", "-DskipTests", *native.maven_options("cuda")]]
    (lib / "kept.jar").touch()
    JAVA.builder(JAVA, True, "cuda")            # the same backend: Maven's incremental build
    assert (lib / "kept.jar").exists()


def test_the_cuda_backend_resolves_with_its_cuda_libraries(tmp_path):
    """Maven resolves the GPU build (offline, from ~/.m2, where `deepgreen build java-dl4j
    --backend cuda` put it): nd4j-cuda for linux-x86_64, and the redist of the very CUDA build
    that nd4j-cuda is written against (the specification's cuda-redist)."""
    if JAVA.missing_tools(("mvn",)):
        pytest.fail("mvn is not installed: " + native.TOOL_HINTS["java-dl4j"])
    listed = tmp_path / "dependencies.txt"
    result = subprocess.run(["mvn", "-o", "-q", "-B", "dependency:list", f"-DoutputFile={listed}",
                             "-DincludeScope=runtime", *native.maven_options("cuda")],
                            cwd=JAVA.source_dir, capture_output=True, text=True)
    if result.returncode != 0 and "in offline mode" in result.stdout:
        pytest.skip("the cuda backend's jars (2.4 GB) are not in ~/.m2: run 'deepgreen build java-dl4j "
                    "--backend cuda' once where Maven Central is reachable")
    assert result.returncode == 0, result.stdout[-3000:]
    dependencies = listed.read_text()
    cuda, redist = spec.dl4j_backend("cuda"), SPEC_PINS["cuda-redist"]
    assert f"org.nd4j:{cuda}:jar:linux-x86_64:{SPEC_PINS['dl4j']}:" in dependencies
    assert f"org.bytedeco:cuda:jar:linux-x86_64:{redist}:" in dependencies          # nd4j-cuda's own
    assert f"org.bytedeco:cuda:jar:linux-x86_64-redist:{redist}:" in dependencies   # its libraries
    assert f"org.nd4j:{spec.dl4j_backend('cpu')}:" not in dependencies
    assert "linux-x86_64-cudnn" not in dependencies and "deeplearning4j-cuda" not in dependencies  # no cuDNN path


def test_preflight_names_the_dl4j_build_a_plans_device_needs(tmp_path, monkeypatch):
    if not JAVA.product_path.is_file() or JAVA.stale_inputs():
        pytest.fail(f"java-dl4j is not built or out of date: {JAVA.fix()}")
    cpu, cuda = spec.dl4j_backend("cpu"), spec.dl4j_backend("cuda")
    monkeypatch.setattr(native, "built_backend", lambda stack: cpu)

    def java_line(device):
        plan = load_plan(write_scoped_plan(tmp_path / f"{device}.toml", "pre", tmp_path / "data", {
            "ecosystems": ["java-dl4j"], "architectures": ["resnet18"], "datasets": ["digits"],
            "repetitions": 1, "device": device}))
        return _lines(preflight.run_checks(plan, allow_missing_counters=True))["stack.ready:java-dl4j/digits"]

    assert java_line("cuda") == ("fail", f"{JAVA.product_path} holds {cpu}, the plan's device cuda needs {cuda}: "
                                         "run 'deepgreen build java-dl4j --backend cuda'")
    assert "holds" not in java_line("cpu")[1]


def test_rust_stack_unit_tests_pass():
    """The Rust stack's own tests (Python's repr of floats, percent-encoding), through cargo."""
    rust = native.NATIVE_STACKS["rust-tch"]
    if shutil.which("cargo") is None:
        pytest.fail("cargo is not installed: " + native.TOOL_HINTS["rust-tch"])
    env = dict(os.environ, LIBTORCH_USE_PYTORCH="1", VIRTUAL_ENV=sys.prefix,
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    result = subprocess.run(["cargo", "test", "--release", "--locked", "--offline", "--quiet"],
                            cwd=rust.source_dir, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "test result: ok. 2 passed" in result.stdout


def test_cpp_stack_unit_tests_pass(tmp_path):
    """The C++ stack's own tests (ctest: Python's repr of floats against Python's, the percent
    codec and the harness client, JSON, SHA-256, npz and safetensors reading), built in a
    temporary folder without LibTorch and with the address and undefined-behaviour sanitizers."""
    cpp = native.NATIVE_STACKS["cpp-libtorch"]
    missing = cpp.missing_tools(("cmake", "ctest", "c++"))
    if missing:
        pytest.fail(f"{', '.join(missing)} not on PATH: " + native.TOOL_HINTS["cpp-libtorch"])
    build = tmp_path / "build"
    sanitize = "-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
    for command, cwd in (
            (["cmake", "-S", str(cpp.source_dir), "-B", str(build), "-DCMAKE_BUILD_TYPE=Debug",
              "-DCMAKE_CXX_FLAGS_DEBUG=-O0",
              "-DDEEPGREEN_TESTS=ON", f"-DCMAKE_CXX_FLAGS={sanitize}"], None),
            (["cmake", "--build", str(build), "-j", str(min(os.cpu_count() or 2, 4))], None),
            (["ctest", "--output-on-failure"], build)):
        result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
        assert result.returncode == 0, f"{' '.join(command[:3])} ... failed:\n" + (result.stdout + result.stderr)[-6000:]
    assert "100% tests passed, 0 tests failed out of 6" in result.stdout, result.stdout[-3000:]


@pytest.mark.parametrize("ecosystem", ["cpp-libtorch", "rust-tch", "java-dl4j"])
def test_each_built_stack_says_which_device_it_would_use(ecosystem, tmp_path):
    """`<stack> device` prints one line the probe reads; this host has no GPU, so a cpu plan
    accepts the stack and a cuda plan is refused naming it."""
    from deepgreen_audit.collect.device_probe import probe

    stack = native.NATIVE_STACKS[ecosystem]
    if not stack.product_path.is_file() or stack.stale_inputs():
        pytest.fail(f"{ecosystem} is not built or out of date: {stack.fix()}")
    cpu = load_plan(write_scoped_plan(tmp_path / "cpu.toml", "dev", tmp_path / "data", {
        "ecosystems": [ecosystem], "device": "cpu"}))
    report = probe(cpu, ecosystem)
    assert (report.device, report.cudnn_enabled, report.tf32_enabled) == ("cpu", False, False)
    assert report.device_name
    preflight.refuse_other_devices(cpu, [ecosystem])
    cuda = load_plan(write_scoped_plan(tmp_path / "cuda.toml", "dev", tmp_path / "data", {
        "ecosystems": [ecosystem], "device": "cuda"}))
    with pytest.raises(preflight.DeviceMismatch, match=f"{ecosystem} would run on cpu .*, the plan declares cuda"):
        preflight.refuse_other_devices(cuda, [ecosystem])

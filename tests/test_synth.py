"""The synthetic campaign generator (deepgreen_audit.synth)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import statistics
from collections import defaultdict

import pytest

import deepgreen_audit
from deepgreen_audit.errors import UserError
from deepgreen_audit.package.schema import TABLES, load_schema
from deepgreen_audit.package.tables import canonical_bytes
from deepgreen_audit.package.validate import validate
from deepgreen_audit.spec import load_spec, recipe
from deepgreen_audit.synth import DEFECTS, SynthModel, generate, write_synthetic
from deepgreen_audit.synth.model import CODECARBON_CONFIG_PLACEHOLDER

SMALL = dict(ecosystems=["python-pytorch", "java-dl4j"], architectures=["resnet18"],
             datasets=["cifar100"], repetitions=2, epochs=3)
# Bigger but still fast: every structure the defects need (two architectures, reps).
MEDIUM = dict(ecosystems=["python-pytorch", "java-dl4j", "rust-tch"],
              architectures=["resnet18", "vgg16"], datasets=["cifar100"], repetitions=3, epochs=4)


def rows(table):
    return [dict(zip(table.header, r)) for r in table.rows]


def ts(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def small():
    return generate(**SMALL)


@pytest.fixture(scope="module")
def medium():
    return generate(**MEDIUM)


# --- shape, determinism, validity -------------------------------------------

def test_tables_follow_the_schemas_and_the_spec(small):
    for name in TABLES:
        assert small.tables[name].header == load_schema(name).field_names
    runs = rows(small.tables["runs"])
    assert len(runs) == 2 * 1 * 1 * 2
    assert len(small.tables["blocks"].rows) == 4 * 3 * 2
    assert len(small.tables["environment"].rows) == 4
    rec = recipe()
    for r in runs:
        assert r["run_id"] == f"{r['ecosystem']}.{r['architecture']}.{r['dataset']}.r{r['repetition']}"
        assert r["campaign"] == "synthetic" and r["status"] == "completed"
        assert r["missing_reason"] == "" and r["source_labels"] == ""
        for key in ("optimizer", "lr_schedule", "input_scaling", "input_normalisation",
                    "precision_policy"):
            assert r[key] == rec[key]
        assert float(r["learning_rate"]) == rec["learning_rate"]
        assert int(r["batch_size"]) == rec["batch_size"]
        assert int(r["epochs"]) == 3
    assert [r["run_id"] for r in runs] == sorted(r["run_id"] for r in runs)


def test_default_campaign_shape_comes_from_the_spec():
    spec = load_spec()
    res = generate(repetitions=1, epochs=1, datasets=["cifar100"])
    ecos = {r["ecosystem"] for r in rows(res.tables["runs"])}
    archs = {r["architecture"] for r in rows(res.tables["runs"])}
    assert ecos == set(spec["S6_replication"]["ecosystems"])
    assert archs == set(spec["S1_model"]["architectures"])


def test_same_seed_same_bytes_other_seed_other_bytes(small, tmp_path):
    again = generate(**SMALL)
    for name in TABLES:
        assert canonical_bytes(again.tables[name]) == canonical_bytes(small.tables[name])
    assert again.truth_bytes() == small.truth_bytes()
    assert again.meta == small.meta
    other = generate(seed=7, **SMALL)
    for name in TABLES:
        if name != "environment":      # the host description is fixed
            assert canonical_bytes(other.tables[name]) != canonical_bytes(small.tables[name])
    a = write_synthetic(tmp_path / "a", **SMALL).parent
    b = write_synthetic(tmp_path / "b", **SMALL).parent
    files = sorted(p.name for p in a.iterdir())
    assert files == sorted(p.name for p in b.iterdir())
    for f in files:
        assert (a / f).read_bytes() == (b / f).read_bytes()


def test_written_package_validates_and_says_it_is_synthetic(tmp_path):
    lines = []
    desc = write_synthetic(tmp_path / "pkg", progress=lines.append, **SMALL)
    report = validate(tmp_path / "pkg")
    assert report.valid, report.format_text()
    assert report.synthetic
    meta = json.loads(desc.read_text())
    assert meta["synthetic"] is True and "SYNTHETIC" in meta["title"]
    assert "synthetic" in meta["description"].lower()
    prov = meta["provenance"]
    assert prov["generator"] == "deepgreen synth" and prov["seed"] == 20261202
    assert prov["generator_version"] == deepgreen_audit.__version__
    truth = (tmp_path / "pkg" / prov["truth_file"]).read_bytes()
    assert prov["truth_sha256"] == hashlib.sha256(truth).hexdigest()
    assert json.loads(truth)["seed"] == 20261202
    assert lines and any("SYNTHETIC" in line for line in lines)
    with pytest.raises(UserError):
        write_synthetic(tmp_path / "pkg", **SMALL)          # no silent overwrite
    write_synthetic(tmp_path / "pkg", overwrite=True, **SMALL)


# --- counters and energies ----------------------------------------------------

def _recompute(row):
    gpu = sum((int(e) - int(s)) / 1000 for s, e in
              zip(row["nvml_start_mj"].split(";"), row["nvml_end_mj"].split(";")))
    cpu = sum((int(e) - int(s) + int(w) * int(r)) / 1e6 for s, e, r, w in
              zip(row["rapl_start_uj"].split(";"), row["rapl_end_uj"].split(";"),
                  row["rapl_max_energy_range_uj"].split(";"), row["rapl_wraps"].split(";")))
    return gpu, cpu


def test_counter_differences_are_the_energies_exactly(small):
    blocks = rows(small.tables["blocks"])
    wraps = 0
    for row in blocks:
        gpu, cpu = _recompute(row)
        assert float(row["gpu_energy_j"]) == gpu
        assert float(row["cpu_energy_j"]) == cpu
        assert float(row["energy_j"]) == gpu + cpu
        assert row["rapl_max_energy_range_uj"] == "262143328850;262143328850"
        starts = [int(x) for x in row["rapl_start_uj"].split(";")]
        ends = [int(x) for x in row["rapl_end_uj"].split(";")]
        assert all(0 <= v < 262143328850 for v in starts + ends)
        # the recorded wraps are the ones the readings show (no block is long enough for two)
        assert row["rapl_wraps"] == ";".join(str(int(e < s)) for s, e in zip(starts, ends))
        wraps += any(e < s for s, e in zip(starts, ends))
    assert wraps >= 1, "a campaign has at least one genuinely wrapping RAPL block"
    assert wraps == small.truth["rapl_wraps"]["blocks"]


def test_counters_are_monotonic_and_count_the_gaps(small):
    by_run = defaultdict(list)
    for row in rows(small.tables["blocks"]):
        by_run[row["run_id"]].append(row)
    for blocks in by_run.values():
        for prev, nxt in zip(blocks, blocks[1:]):
            assert int(nxt["nvml_start_mj"]) > int(prev["nvml_end_mj"])     # gap energy
            assert ts(nxt["started_at_utc"]) > ts(prev["started_at_utc"]) + dt.timedelta(
                seconds=float(prev["duration_s"]))


def test_codecarbon_is_a_second_longer_reading(small):
    for row in rows(small.tables["blocks"]):
        dur, cc_dur = float(row["duration_s"]), float(row["codecarbon_duration_s"])
        assert 0.2 <= cc_dur - dur <= 1.6
        kwh = float(row["codecarbon_energy_kwh"])
        assert float(row["codecarbon_energy_j"]) == kwh * 3.6e6
        parts = sum(float(row[f"codecarbon_{d}_energy_kwh"]) for d in ("cpu", "gpu", "ram"))
        assert kwh == pytest.approx(parts, rel=1e-12)
        ram_j = float(row["codecarbon_ram_power_w"]) * cc_dur
        ratio = (kwh * 3.6e6 - ram_j) / float(row["energy_j"])
        assert 0.97 < ratio < 1.07
        assert float(row["codecarbon_gpu_power_w"]) == pytest.approx(
            float(row["codecarbon_gpu_energy_kwh"]) * 3.6e6 / cc_dur)
        assert (row["codecarbon_cpu_method"], row["codecarbon_gpu_method"]) == ("rapl", "nvml")
    env = rows(small.tables["environment"])
    assert {e["codecarbon_version"] for e in env} == {"3.0.4"}
    assert {e["codecarbon_tracking_mode"] for e in env} == {"machine"}
    assert {e["codecarbon_config_sha256"] for e in env} == {
        hashlib.sha256(CODECARBON_CONFIG_PLACEHOLDER.encode()).hexdigest()}


def test_metrics_columns(small):
    spec = load_spec()
    by_run = defaultdict(list)
    for row in rows(small.tables["blocks"]):
        by_run[row["run_id"]].append(row)
        expected = spec["S3_data"]["train_samples" if row["phase"] == "train"
                                   else "eval_samples"]["cifar100"]
        assert int(row["samples_processed"]) == expected
        if row["phase"] == "train":
            assert row["test_accuracy"] == ""
        else:
            assert 0 <= float(row["test_accuracy"]) <= 1
    for blocks in by_run.values():
        for phase in ("train", "eval"):
            losses = [float(r["loss"]) for r in blocks if r["phase"] == phase]
            assert losses == sorted(losses, reverse=True) and len(set(losses)) == len(losses)
        accs = [float(r["test_accuracy"]) for r in blocks if r["phase"] == "eval"]
        assert accs[-1] > accs[0]


def test_warmup_epoch_is_slower(medium):
    blocks = rows(medium.tables["blocks"])
    first = [float(r["duration_s"]) for r in blocks if r["phase"] == "train" and r["epoch"] == "1"]
    later = [float(r["duration_s"]) for r in blocks if r["phase"] == "train" and r["epoch"] == "2"]
    ratios = [a / b for a, b in zip(first, later)]
    assert all(1.2 < r < 1.4 for r in ratios)


# --- schedule, seeds, clocks, samples -------------------------------------------

def test_schedule_is_interleaved_with_distinct_seeds_and_processes(medium):
    runs = sorted(rows(medium.tables["runs"]), key=lambda r: int(r["schedule_position"]))
    n = len(runs)
    assert [int(r["schedule_position"]) for r in runs] == list(range(1, n + 1))
    config = [r["run_id"].rsplit(".", 1)[0] for r in runs]
    assert all(a != b for a, b in zip(config, config[1:]))
    n_cfg = len(set(config))
    for k in range(0, n, n_cfg):       # each round is one pass over all configurations
        assert len(set(config[k:k + n_cfg])) == n_cfg
        assert {int(r["repetition"]) for r in runs[k:k + n_cfg]} == {k // n_cfg + 1}
    assert len({r["seed"] for r in runs}) == n
    assert len({r["process_id"] for r in runs}) == n
    assert ts(runs[0]["started_at_utc"]) == dt.datetime(2026, 3, 2, 8, tzinfo=dt.UTC)
    for a, b in zip(runs, runs[1:]):
        gap = (ts(b["started_at_utc"]) - ts(a["ended_at_utc"])).total_seconds()
        assert 20 <= gap <= 60


def test_blocks_lie_inside_their_runs(medium):
    runs = {r["run_id"]: r for r in rows(medium.tables["runs"])}
    for row in rows(medium.tables["blocks"]):
        run = runs[row["run_id"]]
        start = ts(row["started_at_utc"])
        end = start + dt.timedelta(seconds=float(row["duration_s"]))
        assert ts(run["started_at_utc"]) < start and end < ts(run["ended_at_utc"])


def test_samples_cover_each_run_at_1_hz(medium):
    runs = {r["run_id"]: r for r in rows(medium.tables["runs"])}
    blocks = defaultdict(list)
    for row in rows(medium.tables["blocks"]):
        blocks[row["run_id"]].append(row)
    samples = defaultdict(list)
    for row in rows(medium.tables["samples"]):
        samples[row["run_id"]].append(row)
    assert set(samples) == set(runs)
    for run_id, srows in samples.items():
        run = runs[run_id]
        t0 = ts(run["started_at_utc"])
        length = (ts(run["ended_at_utc"]) - t0).total_seconds()
        # one sample a second from the sampler's first tick, a fraction of a second in
        times = [float(s["t_s"]) for s in srows]
        assert 0 <= times[0] < 1 and times[-1] <= length
        assert all(abs(b - a - 1) < 1e-6 for a, b in zip(times, times[1:]))
        assert len(times) == int(length - times[0]) + 1
        for s in srows:
            for key in ("gpu_utilization_pct", "gpu_power_w", "gpu_memory_used_mib",
                        "cpu_utilization_pct"):
                value = float(s[key])
                assert value >= 0 and round(value, 1) == value
            assert float(s["gpu_utilization_pct"]) <= 100
        # power in the middle of each train block is that block's mean power
        for b in blocks[run_id]:
            if b["phase"] != "train":
                continue
            start = (ts(b["started_at_utc"]) - t0).total_seconds()
            inside = [float(s["gpu_power_w"]) for s in srows
                      if start + 0.5 < float(s["t_s"]) < start + float(b["duration_s"]) - 0.5]
            mean_w = float(b["gpu_energy_j"]) / float(b["duration_s"])
            assert statistics.mean(inside) == pytest.approx(mean_w, rel=0.03)


def test_environment_describes_the_host(small):
    env = rows(small.tables["environment"])
    frameworks = {e["framework"] for e in env}
    assert frameworks == {"torch", "dl4j"}
    # a GPU campaign: DL4J on the specification's CUDA backend, torch's CUDA build
    assert {(e["framework"], e["framework_backend"]) for e in env} == {
        ("torch", "cuda-12.4"), ("dl4j", load_spec()["S4_backend"]["dl4j_backend"]["cuda"])}
    for e in env:
        assert e["host"] == "synthetic-host" and "L40S" in e["gpu_model"]
        assert e["nvml_energy_available"] == "true" and e["rapl_available"] == "true"
        assert e["rapl_domains"] == "package-0;package-1"


# --- truth ------------------------------------------------------------------------

def test_truth_recovers_from_the_tables():
    res = generate(ecosystems=["python-pytorch", "java-dl4j"], architectures=["vgg16"],
                   datasets=["fashion-mnist"], repetitions=9, epochs=3)
    energy = defaultdict(float)
    duration = defaultdict(float)
    for row in rows(res.tables["blocks"]):
        if row["phase"] == "train":
            energy[row["run_id"]] += float(row["energy_j"])
            duration[row["run_id"]] += float(row["duration_s"])
    for cfg, truth in res.truth["configurations"].items():
        ids = [r for r in energy if r.startswith(cfg + ".")]
        assert len(ids) == 9
        e_med = statistics.median(energy[r] for r in ids)
        t_med = statistics.median(duration[r] for r in ids)
        assert e_med == pytest.approx(truth["train"]["phase_energy_j"], rel=0.03)
        assert t_med == pytest.approx(truth["train"]["phase_duration_s"], rel=0.03)
    spread = res.truth["spreads"]["vgg16.fashion-mnist.train"]
    assert spread["max_ecosystem"] == "java-dl4j" and spread["min_ecosystem"] == "python-pytorch"
    json.dumps(res.truth)          # JSON-serialisable


def test_truth_lists_model_overhang_and_wraps(small):
    t = small.truth
    assert t["seed"] == 20261202 and t["synthetic"] is True
    assert t["model"] == SynthModel().to_dict()
    assert t["codecarbon_overhang_s"]["low"] == 0.2 and t["codecarbon_overhang_s"]["high"] == 1.6
    assert t["defects"] == {}
    assert t["campaign"]["runs"] == 4 and t["campaign"]["blocks"] == 24


# --- defects ------------------------------------------------------------------------

#: sha256 of each table's canonical bytes and of the truth (less generator_version) of
#: generate(seed=3, **MEDIUM), clean and with every defect.  A change of the generative model, a
#: defect or a schema changes them on purpose (recompute and say why in the commit); a refactor
#: of the generator must not.
GOLDEN_MEDIUM_SEED_3 = {
    "clean": {
        "runs": "bf9cd1956b67a5fb3c140a359f58f0e74277e57054ec37e5c478b781896500df",
        "blocks": "dee22e7400c1cee9f653ffde324185bb867520485c7cb405382d8d2a636de98d",
        "samples": "ae69ec4f86619ddcbac7fbf83b0d3bc6b8cc2f4ea124858b8f9e4944502b035b",
        "environment": "66c70758ea9992145dc9bb75ca82308b38dd2b09d67731d6b050977b639a0f0c",
        "truth": "27cdb8eed50943c2e54f82cbc0e7bcc1a5295ff68336d6ebada9d543a60d2dab",
    },
    "every-defect": {
        "runs": "6e9300c754d40a9cfe483428a7bf94a91e79963c8a112a3d7a38d011d693f8b2",
        "blocks": "916c972c603edb51b18474f5bcb7b1ed158a2ec4b373a62c27e08b5d6e429e2d",
        "samples": "aa4cf96876d40eca1302abf15a4aaf550dc01a67da0f098724cfc0301ae37e6e",
        "environment": "5543b87f32a63587a9b88a7047fde8e077537a0a38ec05aa18656adb8f9d7f5a",
        "truth": "b52191a39b5a8b8c68c09c7170c6f7debab99254bd5f8324085d50e4534e8a30",
    },
}
#: sha256 of the CSV files of the default campaign (the specification's master seed).
GOLDEN_FULL_CSV = {
    "blocks.csv": "50a195ed1fe41130a410eed9a6545ce3f15f40f99bbcd625867d11d44b24d37a",
    "environment.csv": "94e37146bdb73e2b63357f0ab689143d2b627cb8d478e8e70ac6cc34bc52c234",
    "runs.csv": "5ef5cdc8f5e7dab2e6c923acdbd2fd8cbe2cf267530c15c0152b0be5ce58e965",
    "samples.csv": "4efaa632efc22a59ca513937207ad613eb2c9d4b041257a1cff5ca126d868fcb",
}


def _digests(res) -> dict[str, str]:
    out = {name: hashlib.sha256(canonical_bytes(res.tables[name])).hexdigest() for name in TABLES}
    truth = {k: v for k, v in res.truth.items() if k != "generator_version"}
    out["truth"] = hashlib.sha256(json.dumps(truth, indent=2, sort_keys=True).encode()).hexdigest()
    return out


@pytest.mark.parametrize("kind", sorted(GOLDEN_MEDIUM_SEED_3))
def test_generated_bytes_match_the_golden_digests(kind):
    defects = list(DEFECTS) if kind == "every-defect" else []
    assert _digests(generate(seed=3, defects=defects, **MEDIUM)) == GOLDEN_MEDIUM_SEED_3[kind]


def _by_key(res):
    return {(r["run_id"], r["epoch"], r["phase"]): r for r in rows(res.tables["blocks"])}


@pytest.fixture(scope="module")
def defected():
    return {name: generate(defects=[name], **MEDIUM) for name in DEFECTS}


def test_every_defect_is_documented_and_keeps_the_package_valid(tmp_path):
    assert set(DEFECTS) == {"kwh-as-joules", "modelled-cpu", "mislabelled-architecture",
                            "codecarbon-v2", "recipe-drift", "duplicate-seed", "missing-blocks",
                            "short-blocks", "counter-mismatch", "varying-environment",
                            "another-window", "drifting-window", "broken-identity", "cpu-fallback",
                            "late-reruns"}
    for fn in DEFECTS.values():
        assert fn.__doc__ and fn.__doc__.strip()
    write_synthetic(tmp_path / "pkg", defects=list(DEFECTS), **MEDIUM)
    report = validate(tmp_path / "pkg")
    assert report.valid, report.format_text()
    truth = json.loads((tmp_path / "pkg" / "synth-truth.json").read_text())
    assert set(truth["defects"]) == set(DEFECTS)
    meta = json.loads((tmp_path / "pkg" / "datapackage.json").read_text())
    assert meta["provenance"]["defects"] == list(DEFECTS)
    with pytest.raises(UserError, match="'short-block' is not a defect the generator plants; "
                                        "did you mean 'short-blocks'"):
        generate(defects=["short-block"], **SMALL)


def test_report_defects_change_only_what_they_touch(medium, defected):
    clean = _by_key(medium)
    for name in ("kwh-as-joules", "modelled-cpu", "counter-mismatch"):
        res = defected[name]
        touched = set(res.truth["defects"][name]["run_ids"])
        for key, row in _by_key(res).items():
            if key[0] not in touched:
                assert row == clean[key], name
        for t in ("runs", "samples", "environment"):
            assert canonical_bytes(res.tables[t]) == canonical_bytes(medium.tables[t])


def test_defect_kwh_as_joules(defected):
    res = defected["kwh-as-joules"]
    entry = res.truth["defects"]["kwh-as-joules"]
    cfg = entry["configuration"]
    n = 0
    for row in rows(res.tables["blocks"]):
        hit = row["run_id"].startswith(cfg + ".")
        kwh, j = float(row["codecarbon_energy_kwh"]), float(row["codecarbon_energy_j"])
        assert (j == kwh) if hit else (j == kwh * 3.6e6)
        n += hit
    assert n == entry["rows"]["blocks"] == 3 * 8


def test_defect_modelled_cpu(defected):
    res = defected["modelled-cpu"]
    eco = res.truth["defects"]["modelled-cpu"]["ecosystem"]
    for row in rows(res.tables["blocks"]):
        if row["run_id"].startswith(eco + "."):
            assert row["codecarbon_cpu_method"] == "tdp-constant"
            assert float(row["codecarbon_cpu_power_w"]) == 42.5
            assert float(row["codecarbon_cpu_energy_kwh"]) * 3.6e6 == pytest.approx(
                42.5 * float(row["codecarbon_duration_s"]))
        else:
            assert row["codecarbon_cpu_method"] == "rapl"


def test_defect_mislabelled_architecture(medium, defected):
    res = defected["mislabelled-architecture"]
    entry = res.truth["defects"]["mislabelled-architecture"]
    eco, arch, ds = entry["configuration"].split(".")
    assert arch == "resnet18"
    durations = defaultdict(list)
    for r in rows(res.tables["blocks"]):
        if r["phase"] == "train" and r["epoch"] != "1":
            durations[r["run_id"].rsplit(".", 1)[0]].append(float(r["duration_s"]))
    labelled = statistics.median(durations[entry["configuration"]])
    vgg = statistics.median(durations[f"{eco}.vgg16.{ds}"])
    assert labelled == pytest.approx(vgg, rel=0.05)
    assert labelled == pytest.approx(entry["expected_as_run"]["train"]["block_duration_s"], rel=0.05)
    runs = {r["run_id"]: r for r in rows(res.tables["runs"])}
    assert all(runs[i]["architecture"] == "resnet18" for i in entry["run_ids"])
    assert entry["rows"]["blocks"] == 3 * 8


def test_defect_codecarbon_v2(defected):
    res = defected["codecarbon-v2"]
    entry = res.truth["defects"]["codecarbon-v2"]
    for e in rows(res.tables["environment"]):
        hit = e["run_id"] in entry["run_ids"]
        assert e["codecarbon_version"] == ("2.8.4" if hit else "3.0.4")
        assert e["codecarbon_tracking_mode"] == ("process" if hit else "machine")
    assert all(r.startswith(entry["ecosystem"] + ".") for r in entry["run_ids"])
    assert entry["rows"]["environment"] == len(entry["run_ids"]) == 6


def test_defect_recipe_drift(defected):
    res = defected["recipe-drift"]
    entry = res.truth["defects"]["recipe-drift"]
    for r in rows(res.tables["runs"]):
        hit = r["ecosystem"] == entry["ecosystem"]
        assert float(r["learning_rate"]) == (0.001 if hit else recipe()["learning_rate"])
    assert entry["rows"]["runs"] == 6


def test_defect_duplicate_seed(defected):
    res = defected["duplicate-seed"]
    entry = res.truth["defects"]["duplicate-seed"]
    runs = rows(res.tables["runs"])
    seeds = [r["seed"] for r in runs]
    assert len(set(seeds)) == len(seeds) - 1
    pair = [r for r in runs if r["run_id"] in entry["run_ids"]]
    assert len(pair) == 2 and pair[0]["seed"] == pair[1]["seed"] == str(entry["seed"])
    assert pair[0]["initial_weights_sha256"] == pair[1]["initial_weights_sha256"]


def test_defect_missing_blocks(medium, defected):
    res = defected["missing-blocks"]
    entry = res.truth["defects"]["missing-blocks"]
    run_id = entry["run_id"]
    epochs = sorted({int(r["epoch"]) for r in rows(res.tables["blocks"]) if r["run_id"] == run_id})
    assert epochs == [1]                   # 4 epochs, the last 3 missing
    assert entry["epochs_missing"] == [2, 3, 4]
    assert len(res.tables["blocks"].rows) == len(medium.tables["blocks"].rows) - 6
    run = next(r for r in rows(res.tables["runs"]) if r["run_id"] == run_id)
    assert run["status"] == "completed" and run["epochs"] == "4"


def test_defect_short_blocks(defected):
    res = defected["short-blocks"]
    entry = res.truth["defects"]["short-blocks"]
    n = 0
    for r in rows(res.tables["blocks"]):
        hit = r["run_id"].startswith(entry["configuration"] + ".") and r["phase"] == "eval"
        assert (float(r["duration_s"]) == 0.4) == hit
        n += hit
    assert n == entry["rows"]["blocks"] == 3 * 4
    gpu, cpu = _recompute(next(r for r in rows(res.tables["blocks"])
                               if r["run_id"] in entry["run_ids"] and r["phase"] == "eval"))
    assert 20 < gpu + cpu < 120            # 0.4 s at eval power


def test_clean_runs_are_a_gpu_campaign_on_the_declared_device(medium):
    env = {e["run_id"]: e for e in rows(medium.tables["environment"])}
    for r in rows(medium.tables["runs"]):
        assert (r["device"], r["device_name"]) == ("cuda", env[r["run_id"]]["gpu_model"])
        assert r["cudnn_enabled"] == ("false" if r["ecosystem"] == "java-dl4j" else "true")
        assert r["tf32_enabled"] == "false"
        assert env[r["run_id"]]["codecarbon_gpu_count"] == env[r["run_id"]]["gpu_count"]


def test_defect_cpu_fallback_puts_one_stack_on_the_cpu_with_an_idle_gpu(medium, defected):
    res = defected["cpu-fallback"]
    entry = res.truth["defects"]["cpu-fallback"]
    runs = {r["run_id"]: r for r in rows(res.tables["runs"])}
    env = {e["run_id"]: e for e in rows(res.tables["environment"])}
    assert entry["run_ids"] == sorted(i for i in runs if runs[i]["ecosystem"] == entry["ecosystem"])
    for run_id, r in runs.items():
        hit = run_id in entry["run_ids"]
        assert r["device"] == ("cpu" if hit else "cuda")
        assert r["device_name"] == env[run_id]["cpu_model" if hit else "gpu_model"]
        assert (r["cudnn_enabled"] == "false") if hit else True
    clean = {(r["run_id"], r["epoch"], r["phase"]): float(r["duration_s"])
             for r in rows(medium.tables["blocks"])}
    for r in rows(res.tables["blocks"]):
        if r["run_id"] in entry["run_ids"]:
            key = (r["run_id"], r["epoch"], r["phase"])
            assert float(r["duration_s"]) == pytest.approx(clean[key] * entry["time_factor"])
            gpu, _ = _recompute(r)
            assert gpu / float(r["duration_s"]) == pytest.approx(entry["gpu_power_w"], rel=0.05)


def test_defect_counter_mismatch(defected):
    res = defected["counter-mismatch"]
    entry = res.truth["defects"]["counter-mismatch"]
    bad = []
    for r in rows(res.tables["blocks"]):
        gpu, cpu = _recompute(r)
        if float(r["gpu_energy_j"]) != gpu:
            bad.append((r["run_id"], int(r["epoch"]), r["phase"]))
            assert 1.03 <= float(r["gpu_energy_j"]) / gpu <= 1.15
        assert float(r["energy_j"]) == float(r["gpu_energy_j"]) + float(r["cpu_energy_j"])
        assert float(r["cpu_energy_j"]) == cpu
    listed = [(b["run_id"], b["epoch"], b["phase"]) for b in entry["blocks"]]
    assert sorted(bad) == sorted(listed) and len(bad) == 5 == entry["rows"]["blocks"]


def test_defect_choice_does_not_depend_on_other_defects():
    one = generate(defects=["recipe-drift"], **MEDIUM).truth["defects"]["recipe-drift"]
    both = generate(defects=["counter-mismatch", "recipe-drift"], **MEDIUM)
    assert both.truth["defects"]["recipe-drift"] == one


# --- the model from TOML --------------------------------------------------------

def test_model_from_toml_changes_the_planted_spread(tmp_path):
    path = tmp_path / "model.toml"
    path.write_text('run_time_sigma = 0.0\n[ecosystem_time]\n"java-dl4j" = 4.0\n',
                    encoding="utf-8")
    model = SynthModel.from_toml(path)
    assert model.ecosystem_time["java-dl4j"] == 4.0
    assert model.ecosystem_time["python-pytorch"] == 1.0      # merged, not replaced
    assert model.run_time_sigma == 0.0
    base = generate(**SMALL)
    res = generate(model=model, **SMALL)
    key = "resnet18.cifar100.train"
    assert res.truth["spreads"][key]["max_over_min"] > 1.5 * base.truth["spreads"][key]["max_over_min"]
    assert res.truth["model"]["ecosystem_time"]["java-dl4j"] == 4.0

    def observed(r):
        med = {}
        for eco in SMALL["ecosystems"]:
            med[eco] = statistics.median(float(b["energy_j"]) for b in rows(r.tables["blocks"])
                                         if b["run_id"].startswith(eco + ".")
                                         and b["phase"] == "train" and b["epoch"] != "1")
        return med["java-dl4j"] / med["python-pytorch"]

    assert observed(res) == pytest.approx(res.truth["spreads"][key]["max_over_min"], rel=0.05)
    assert observed(res) > 1.5 * observed(base)


def test_model_from_toml_refuses_unknown_or_mistyped_keys(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("no_such_parameter = 1\n", encoding="utf-8")
    with pytest.raises(UserError, match="no_such_parameter"):
        SynthModel.from_toml(path)
    path.write_text('warmup_factor = "fast"\n', encoding="utf-8")
    with pytest.raises(UserError, match="warmup_factor"):
        SynthModel.from_toml(path)
    with pytest.raises(UserError):
        SynthModel.from_toml(tmp_path / "missing.toml")


def test_overrides_outside_the_spec_are_refused():
    with pytest.raises(UserError, match="'cobol-magic' is not an ecosystem in the experiment "
                                        "specification"):
        generate(ecosystems=["cobol-magic"], repetitions=1, epochs=1)
    with pytest.raises(UserError, match="'matlab' is not an ecosystem in the experiment "
                                        "specification: MATLAB is outside the study: its Deep "
                                        "Learning Toolbox is proprietary"):
        generate(ecosystems=["matlab"], repetitions=1, epochs=1)
    with pytest.raises(UserError, match="did you mean 'python-tensorflow'"):
        generate(ecosystems=["tensorflow"], repetitions=1, epochs=1)
    with pytest.raises(UserError):
        generate(seed=-1, **SMALL)


# --- full size ---------------------------------------------------------------------

@pytest.mark.slow
def test_full_campaign(tmp_path):
    desc = write_synthetic(tmp_path / "full")
    report = validate(tmp_path / "full")
    assert report.valid, report.format_text()
    assert report.stats["runs"]["rows"] == 210
    assert report.stats["environment"]["rows"] == 210
    assert report.stats["blocks"]["rows"] == 12_600
    assert report.stats["samples"]["bytes"] < 12_000_000
    for name, digest in GOLDEN_FULL_CSV.items():
        assert hashlib.sha256((desc.parent / name).read_bytes()).hexdigest() == digest, name
    truth = json.loads((desc.parent / "synth-truth.json").read_text())
    assert truth["rapl_wraps"]["blocks"] >= 3
    assert len(truth["configurations"]) == 42
    assert len(truth["spreads"]) == 2 * 3 * 2
    text = (desc.parent / "blocks.csv").read_text().splitlines()
    header = text[0].split(",")
    energy = defaultdict(float)
    for line in text[1:]:
        row = dict(zip(header, line.split(",")))
        if row["phase"] == "train":
            energy[row["run_id"]] += float(row["energy_j"])
    for cfg, values in truth["configurations"].items():
        med = statistics.median(v for k, v in energy.items() if k.rsplit(".", 1)[0] == cfg)
        assert med == pytest.approx(values["train"]["phase_energy_j"], rel=0.05)


def test_a_cpu_scope_draws_a_host_without_a_gpu(tmp_path):
    """`device = "cpu"` (a plan's scope, `synth --plan`): no NVML reading, no GPU energy, no
    GPU sample; the blocks' energy is the CPU packages'; every run on the CPU; digits sized."""
    res = generate(seed=4, ecosystems=["python-pytorch", "cpp-libtorch", "rust-tch"],
                   architectures=["resnet18"], datasets=["digits"], repetitions=2, epochs=2,
                   device="cpu")
    blocks = rows(res.tables["blocks"])
    assert all(b["nvml_start_mj"] == "" and b["gpu_energy_j"] == "" for b in blocks)
    assert all(b["energy_j"] == b["cpu_energy_j"] != "" for b in blocks)
    assert {b["codecarbon_gpu_method"] for b in blocks} == {"none"}
    assert {b["samples_processed"] for b in blocks} == {"1437", "360"}
    samples = rows(res.tables["samples"])
    assert samples and all(s["gpu_utilization_pct"] == s["gpu_power_w"] == "" for s in samples)
    assert all(s["cpu_utilization_pct"] != "" for s in samples)
    runs = rows(res.tables["runs"])
    assert {(r["device"], r["cudnn_enabled"]) for r in runs} == {("cpu", "false")}
    env = rows(res.tables["environment"])
    assert {(e["gpu_model"], e["nvml_energy_available"]) for e in env} == {("", "false")}
    assert res.meta["scope"]["device"] == "cpu" and res.truth["campaign"]["device"] == "cpu"
    out = tmp_path / "pkg"
    write_synthetic(out, seed=4, ecosystems=["python-pytorch"], datasets=["digits"],
                    architectures=["resnet18"], repetitions=2, epochs=1, device="cpu")
    assert validate(out).valid

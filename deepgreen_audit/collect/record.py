"""A finished run as a run directory, written by package.rundirs (the format's one writer).

This module turns what the harness measured into the run's rows (canonical cells);
`rundirs.run_dir_files` serialises them: block columns split over blocks.csv /
codecarbon.csv / metrics.csv by the `rundir` property of the blocks schema, the runs
and environment rows in manifest.json, the samples in samples.csv.  Energies are
computed here from the raw readings, the way the audit recomputes them
(docs/collection.md): energy_j sums the counters of the campaign's measurement boundary
(the GPU boards and CPU packages on cuda, the CPU packages on cpu); a missing counter
leaves its cells empty and says why in energy_missing_reason.
"""

from __future__ import annotations

import json
from pathlib import Path

from deepgreen_audit.collect.harness import BlockRecord
from deepgreen_audit.device.rapl import package_energy_j
from deepgreen_audit.package import atomic
from deepgreen_audit.package.canonical import parse_value
from deepgreen_audit.package.rundirs import MANIFEST, manifest_bytes, run_dir_files
from deepgreen_audit.package.schema import load_schema
from deepgreen_audit.package.tables import rows_from_columns
from deepgreen_audit.spec import Counter
from deepgreen_audit.units import J_PER_KWH


def _joined(values) -> str | None:
    return None if values is None else ";".join(str(v) for v in values)


def boundary_energy_j(domains_j: dict[str, float | None], boundary: tuple[Counter, ...]) -> float | None:
    """A block's energy at the measurement boundary: the sum of its boundary counters' energies
    ({column: joules}) in the boundary's order, as the audit adds them; None unless every one
    was read."""
    read = [j for c in boundary if (j := domains_j[c.column]) is not None]
    return sum(read, 0.0) if len(read) == len(boundary) else None


def block_row(block: BlockRecord, run_id: str, rapl_max_energy_range_uj, boundary: tuple[Counter, ...],
              energy_missing_reason: str | None) -> dict:
    """The blocks-table row of a block, energies computed from the raw readings and the
    wraps counted between them (the audit recomputes them from the same cells); energy_j
    sums the counters of the campaign's `boundary` (`Instruments.boundary`)."""
    rapl = block.rapl_start_uj is not None and block.rapl_end_uj is not None
    nvml0, nvml1, rapl0, rapl1 = block.nvml_start_mj, block.nvml_end_mj, block.rapl_start_uj, block.rapl_end_uj
    gpu_j = (sum(e - s for s, e in zip(nvml0, nvml1)) / 1000
             if nvml0 is not None and nvml1 is not None else None)
    cpu_j = (package_energy_j(rapl0, rapl1, rapl_max_energy_range_uj, block.rapl_wraps)
             if rapl0 is not None and rapl1 is not None else None)
    cc = block.codecarbon
    row = {
        "run_id": run_id, "epoch": block.epoch, "phase": block.phase,
        "started_at_utc": block.started_at_utc, "duration_s": block.duration_s,
        "nvml_start_mj": _joined(block.nvml_start_mj), "nvml_end_mj": _joined(block.nvml_end_mj),
        "rapl_start_uj": _joined(block.rapl_start_uj), "rapl_end_uj": _joined(block.rapl_end_uj),
        "rapl_max_energy_range_uj": _joined(rapl_max_energy_range_uj) if rapl else None,
        "rapl_wraps": _joined(block.rapl_wraps) if rapl else None,
        "gpu_energy_j": gpu_j, "cpu_energy_j": cpu_j,
        "energy_j": boundary_energy_j({"gpu_energy_j": gpu_j, "cpu_energy_j": cpu_j}, boundary),
        "energy_missing_reason": energy_missing_reason,
        "codecarbon_missing_reason": block.codecarbon_missing_reason,
        "samples_processed": block.samples_processed, "loss": block.loss,
        "test_accuracy": block.test_accuracy,
    }
    cc_fields = {"codecarbon_duration_s": "duration_s", "codecarbon_energy_kwh": "energy_kwh",
                 "codecarbon_cpu_energy_kwh": "cpu_energy_kwh",
                 "codecarbon_gpu_energy_kwh": "gpu_energy_kwh",
                 "codecarbon_ram_energy_kwh": "ram_energy_kwh", "codecarbon_cpu_power_w": "cpu_power_w",
                 "codecarbon_gpu_power_w": "gpu_power_w", "codecarbon_ram_power_w": "ram_power_w",
                 "codecarbon_cpu_method": "cpu_method", "codecarbon_gpu_method": "gpu_method",
                 "codecarbon_emissions_kg": "emissions_kg",
                 "codecarbon_emissions_rate_kg_per_s": "emissions_rate_kg_per_s",
                 "codecarbon_country_iso_code": "country_iso_code", "codecarbon_region": "region"}
    for column, attr in cc_fields.items():
        row[column] = getattr(cc, attr) if cc is not None else None
    row["codecarbon_energy_j"] = cc.energy_kwh * J_PER_KWH if cc is not None else None
    return row


def _row_object(table: str, values: dict, skip: int = 0) -> dict:
    """{column: JSON value whose canonical text is the cell}, in the schema's order."""
    schema = load_schema(table)
    cells = rows_from_columns(schema, {f.name: [values.get(f.name)] for f in schema.fields})[0]
    return {f.name: parse_value(c, f.type) for f, c in zip(schema.fields[skip:], cells[skip:])}


def run_files(run: dict, environment: dict, block_rows: list[dict], samples: list[dict]) -> dict[str, bytes]:
    """{file name: bytes} of one run directory."""
    blocks_schema, samples_schema = load_schema("blocks"), load_schema("samples")
    rows = rows_from_columns(blocks_schema, {f.name: [r.get(f.name) for r in block_rows]
                                             for f in blocks_schema.fields})
    run_id = run["run_id"]
    sample_rows = rows_from_columns(samples_schema, {
        f.name: [run_id if f.name == "run_id" else s.get(f.name) for s in samples]
        for f in samples_schema.fields})
    return run_dir_files(_row_object("runs", run), _row_object("environment", environment, skip=1),
                         rows, sample_rows)


def record_slurm_energy(run_dir: Path, joules: float | None, reason: str | None) -> None:
    """Write Slurm's whole-run energy (or why it is missing) into a completed run's manifest:
    Slurm knows it only after the job has ended, when the run is already in place.  One atomic
    rewrite in the canonical form, so flatten and restore stay exact."""
    path = run_dir / MANIFEST
    manifest = json.loads(path.read_text(encoding="utf-8"))
    run = dict(manifest["run"], slurm_consumed_energy_j=joules, slurm_energy_missing_reason=reason)
    atomic.write_bytes(path, manifest_bytes(_row_object("runs", run), manifest["environment"]))

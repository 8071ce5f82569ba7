"""What Slurm says about the array tasks of a collection: state, reason, node, energy.

`sacct --parsable2` is read first (State, Reason, ExitCode, NodeList, times and
ConsumedEnergyRaw of each task's allocation).  A cluster without job
accounting (no slurmdbd: "Slurm accounting storage is disabled") still knows
its recent jobs: `scontrol show job -o` gives the state and the reason, but no
energy.  ConsumedEnergy is a whole-run reading from the cluster's
`acct_gather_energy` plugin; a cluster without one reports 0, which is
missing, not zero energy (docs/design.md, "Honesty rules"), and so is an empty cell.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

#: runs.slurm_energy_missing_reason of a run collected by the local executor
LOCAL_EXECUTOR = "collected by the local executor: no Slurm job, so no Slurm energy accounting"
#: ... of a run whose array task has not been read back since it ended
ENERGY_NOT_READ_YET = ("not read yet: Slurm reports a job's ConsumedEnergy once the job has ended "
                       "(the next 'deepgreen collect' on this output reads it)")
SACCT_FIELDS = ("JobID", "State", "Reason", "ExitCode", "NodeList", "Submit", "Start", "End",
                "ConsumedEnergyRaw")
#: states after which a task runs no more (COMPLETING is not one: its processes may still live)
ENDED_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT"}
#: the state of a task Slurm no longer knows (no accounting, and ended more than MinJobAge ago)
FORGOTTEN = "UNKNOWN"
#: how long after submission a task Slurm does not list counts as forgotten, not yet registered
FORGET_AFTER_S = 120
#: Slurm's "no value" markers for 64-bit counters (NO_VAL64, INFINITE64)
_NO_VALUE = {2**64 - 2, 2**64 - 1}


@dataclass(frozen=True)
class TaskRecord:
    """One array task as Slurm accounts for it."""

    task: int
    job_id: str            # <array job>_<task>
    state: str             # first word of State: COMPLETED, CANCELLED, TIMEOUT, NODE_FAIL, ...
    state_text: str        # State as written ("CANCELLED by 0")
    reason: str | None     # Reason, None for "None"
    exit_code: str | None
    node: str | None
    consumed_energy_raw: str | None   # None: this source has no energy column

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES or self.state == FORGOTTEN

    @property
    def active(self) -> bool:
        return not self.ended

    def describe(self) -> str:
        """Slurm's account of how the task ended, for failure.json and the progress lines."""
        text = f"Slurm array task {self.job_id} ended {self.state_text}"
        if self.reason:
            text += f" (reason: {self.reason})"
        if self.exit_code and self.exit_code != "0:0":
            text += f", exit code {self.exit_code}"
        return text + (f" on {self.node}" if self.node else "")

    def cause(self) -> str:
        """How the task ended, without its id and node: what repeats when tasks fail alike."""
        return f"Slurm ended the task {self.state}" + (f" (reason: {self.reason})" if self.reason else "")


@dataclass(frozen=True)
class SlurmEnergy:
    """Slurm's whole-run energy of a job, or why it is missing (exactly one is None)."""

    energy_j: float | None
    missing_reason: str | None


def consumed_energy(raw: str | None, source_note: str | None = None) -> SlurmEnergy:
    """The joules of a ConsumedEnergyRaw cell, or why they are missing."""
    if raw is None:
        return SlurmEnergy(None, "Slurm gave no ConsumedEnergy: " + (source_note or "no job accounting"))
    text = raw.strip()
    if text == "":
        return SlurmEnergy(None, "Slurm's accounting has no ConsumedEnergy for this job (no "
                                 "acct_gather_energy plugin, or a job that was not exclusive)")
    try:
        value = int(text) if text.isdigit() else float(text)
    except ValueError:
        return SlurmEnergy(None, f"Slurm's ConsumedEnergyRaw {text!r} is not a number")
    if value in _NO_VALUE:
        return SlurmEnergy(None, "Slurm's ConsumedEnergyRaw holds its no-value marker: the energy "
                                 "plugin read nothing")
    if value <= 0:
        return SlurmEnergy(None, "Slurm reported ConsumedEnergy 0: the cluster has no "
                                 "acct_gather_energy plugin (0 is Slurm's value for not measured, "
                                 "not zero energy)")
    return SlurmEnergy(float(value), None)


def _expand_tasks(text: str) -> list[int]:
    """Task ids of '4', '[2-5,7%2]' or '2-5': the forms sacct and scontrol write."""
    text = text.strip("[]").split("%")[0]
    tasks: list[int] = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        tasks.extend(range(int(low), int(high or low) + 1))
    return tasks


def parse_sacct(text: str, array_job: str) -> dict[int, TaskRecord]:
    """Task records of one array job from `sacct --parsable2 -X -o <SACCT_FIELDS>` output
    (header line included); a pending range ("123_[4-9]") gives one record a task."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return {}
    header = lines[0].split("|")
    records = {}
    for line in lines[1:]:
        row = dict(zip(header, line.split("|")))
        job, _, tasks = row.get("JobID", "").partition("_")
        if job != str(array_job) or not tasks or "." in tasks:
            continue
        state_text = row.get("State", "").strip()
        for task in _expand_tasks(tasks):
            records[task] = TaskRecord(
                task=task, job_id=f"{job}_{task}", state=state_text.split(" ")[0].rstrip("+"),
                state_text=state_text, reason=None if row.get("Reason") in (None, "", "None") else row["Reason"],
                exit_code=row.get("ExitCode") or None, node=row.get("NodeList") or None,
                consumed_energy_raw=row.get("ConsumedEnergyRaw", ""))
    return records


def parse_scontrol(text: str, array_job: str) -> dict[int, TaskRecord]:
    """Task records of one array job from `scontrol show job -o <job>` (no energy column)."""
    records = {}
    for line in text.splitlines():
        fields = dict(token.split("=", 1) for token in line.split() if "=" in token)
        if fields.get("ArrayJobId") != str(array_job) or "ArrayTaskId" not in fields:
            continue
        state = fields.get("JobState", "")
        for task in _expand_tasks(fields["ArrayTaskId"]):
            node = fields.get("NodeList")
            records[task] = TaskRecord(
                task=task, job_id=f"{array_job}_{task}", state=state, state_text=state,
                reason=None if fields.get("Reason") in (None, "None") else fields["Reason"],
                exit_code=fields.get("ExitCode"), node=None if node in (None, "(null)") else node,
                consumed_energy_raw=None)
    return records


def forgotten(task: int, array_job: str) -> TaskRecord:
    """A task Slurm lists no more: it has ended, how is not known."""
    return TaskRecord(task=task, job_id=f"{array_job}_{task}", state=FORGOTTEN,
                      state_text="unknown to Slurm", reason="no accounting record left (a cluster "
                      "without job accounting forgets finished jobs after MinJobAge)",
                      exit_code=None, node=None, consumed_energy_raw=None)


def _run(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, env=dict(os.environ))


def read_array(array_job: str) -> tuple[dict[int, TaskRecord], str | None]:
    """The tasks of an array job, and why energy is unavailable from the source used (None:
    sacct answered, its ConsumedEnergy cells say)."""
    sacct = _run(["sacct", "--parsable2", "-X", "--jobs", str(array_job), "-o", ",".join(SACCT_FIELDS)])
    if sacct.returncode == 0:
        return parse_sacct(sacct.stdout, array_job), None
    note = (sacct.stderr.strip().splitlines() or [f"sacct exited with status {sacct.returncode}"])[-1]
    shown = _run(["scontrol", "show", "job", "-o", str(array_job)])
    return parse_scontrol(shown.stdout, array_job), f"the cluster keeps no job accounting (sacct: {note})"


def task_id_of_environment() -> str | None:
    """This process's Slurm job as the runs table records it: <array job>_<task>, or the job."""
    array_job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array_job and task:
        return f"{array_job}_{task}"
    return os.environ.get("SLURM_JOB_ID")


def valid_job_id(text: str) -> bool:
    return re.fullmatch(r"[0-9]+", text) is not None

"""The campaign plan: configurations x repetitions, distinct seeds, interleaved order.

`collect/plan.toml` says how each stack runs; what runs comes from the
experiment specification (configurations, repetitions, recipe).  An optional
`[scope]` table narrows it (a smoke run on digits, one stack).  The schedule
is deterministic from `master_seed` (the plan's, else the specification's
S6_replication.master_seed): each repetition is one round over every
configuration in a seeded shuffled order, and no configuration runs twice in
a row across a round boundary.  Seeds are derived per run from the master
seed and the run id, and checked distinct.
"""

from __future__ import annotations

import hashlib
import random
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from deepgreen_audit.errors import UserError, refuse_unknown
from deepgreen_audit.package.schema import load_schema
from deepgreen_audit.resources import project_file, require_checkout
from deepgreen_audit.spec import (
    DEVICES,
    SCHEDULES,
    SCOPE_KEYS,
    SCOPE_LABELS,
    load_spec,
    master_seed as spec_master_seed,
    out_of_scope_reasons,
    read_toml,
    recipe,
    scope_labels,
)
from deepgreen_audit.trial import CANONICAL_INITIALISER

PLAN_KEYS = {"campaign", "master_seed", "run_timeout_s", "data_dir", "stacks", "stacks_from",
             "scope", "hosts"}
STACK_KINDS = ("python", "external")
#: How a campaign's runs may map to hosts (the plan's [hosts] design; the audit's S6.host-design):
#: every compared run on one kind of hardware, or each repetition round whole on one host.
HOST_DESIGNS = ("one-kind", "replicates")
HOST_KEYS = ("design", "replicate_nodes", "gpus_per_run")


def default_plan_path() -> Path:
    return project_file("collect", "plan.toml")


@dataclass(frozen=True)
class Stack:
    ecosystem: str
    kind: str
    program: Path | None = None       # python: the program file
    command: tuple[str, ...] = ()     # external: the executable and its arguments
    #: python: the interpreter its runs start in (None: this one, sys.executable): the plan's
    #: `python`, else the stack's own environment when set-up built it (.venv-jax/bin/python)
    python: Path | None = None
    #: where `python` came from: "plan" (must exist: preflight refuses otherwise),
    #: "own environment" (set-up built it here), or "" (none: this interpreter)
    python_from: str = ""

    @property
    def interpreter(self) -> str:
        """The interpreter that runs this stack's jobs (the runner module runs inside it)."""
        return str(self.python) if self.python is not None else sys.executable


@dataclass(frozen=True)
class Job:
    """One run: what a stack needs to know, and where it sits in the schedule."""

    run_id: str
    campaign: str
    ecosystem: str
    architecture: str
    dataset: str
    repetition: int
    seed: int
    schedule_position: int
    epochs: int
    data_dir: Path
    max_train_batches: int | None
    max_eval_batches: int | None
    recipe: dict = field(default_factory=dict, hash=False)
    #: the initialiser its export is drawn with (S1_model.initialisers): the canonical one,
    #: except in an initialiser trial (deepgreen_audit.trial), whose run ids name it
    initialiser: str = CANONICAL_INITIALISER

    @property
    def classes(self) -> int:
        return int(load_spec()["S3_data"]["classes"][self.dataset])

    def protocol_params(self) -> dict:
        """The job as the line protocol's HELLO reply carries it to external stacks."""
        params = {k: getattr(self, k) for k in ("run_id", "ecosystem", "architecture", "dataset",
                                                "repetition", "seed", "epochs", "classes")}
        params.update({k: v for k, v in self.recipe.items() if k != "epochs"})
        params["data_dir"] = str(self.data_dir)
        for key in ("max_train_batches", "max_eval_batches"):
            if getattr(self, key) is not None:
                params[key] = getattr(self, key)
        return params


@dataclass(frozen=True)
class Plan:
    path: Path
    campaign: str
    master_seed: int
    run_timeout_s: float
    stacks: dict[str, Stack]
    jobs: tuple[Job, ...]
    #: the plan's [scope] table as written: what the campaign declares it set out to run
    #: (recorded in the package, so the audit holds a pilot to its scope, not the full design)
    scope: dict = field(default_factory=dict, hash=False)
    #: the plan's [hosts] table: the declared host design, the node of each repetition round
    #: (replicate_nodes, cycled), the GPUs one run asks for (Slurm --gres); recorded in the package
    hosts: dict = field(default_factory=dict, hash=False)

    @property
    def device(self) -> str:
        """The device every run of this campaign is to place its work on (cuda or cpu)."""
        return self.scope.get("device") or load_spec()["S4_backend"]["device"]

    @property
    def host_design(self) -> str:
        return self.hosts.get("design", "one-kind")

    def node_of(self, job: Job) -> str | None:
        """The node the declared design assigns to this run's repetition (None: any node)."""
        nodes = self.hosts.get("replicate_nodes")
        return nodes[(job.repetition - 1) % len(nodes)] if nodes else None

    def job(self, run_id: str) -> Job:
        for job in self.jobs:
            if job.run_id == run_id:
                return job
        raise UserError(f"the plan has no run {run_id!r} (see 'deepgreen plan --print')",
                        path=self.path, code="unknown-run")

    def runner_command(self, job: Job, work: Path, allow_missing_counters: bool) -> list[str]:
        """The exact command that runs one job in its own process."""
        stack = self.stacks.get(job.ecosystem)
        python = stack.interpreter if stack is not None else sys.executable
        cmd = [python, "-m", "deepgreen_audit.collect.runner", "--plan", str(self.path),
               "--run-id", job.run_id, "--work", str(work)]
        return cmd + (["--allow-missing-counters"] if allow_missing_counters else [])


def _list(scope: dict, key: str, default: list[str], spec: dict, path: Path) -> list[str]:
    """The scope's labels under `key`, each one the specification holds (`scope_labels`):
    the runs schema knows labels of other campaigns (the first one's MATLAB), which the
    study leaves out (S6_replication.out_of_scope says why)."""
    values = scope.get(key, default)
    if not isinstance(values, list) or not values:
        raise UserError("must be a non-empty list", path=path, field=f"scope.{key}", code="plan-error")
    refuse_unknown(values, scope_labels(spec, key), f"{SCOPE_LABELS[key]} of the specification",
                   reasons=out_of_scope_reasons(spec), path=path, field=f"scope.{key}",
                   code="plan-error")
    return list(values)


def _positive(table: dict, key: str, default, path: Path, where: str):
    value = table.get(key, default)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise UserError(f"{value!r} is not an integer >= 1", path=path, field=f"{where}{key}",
                        code="plan-error")
    return value


def derive_seed(master_seed: int, run_id: str, attempt: int = 0) -> int:
    digest = hashlib.sha256(f"{master_seed}/{run_id}/{attempt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def schedule(configs: Sequence[tuple[str, ...]], repetitions: int, master_seed: int):
    """[(config, repetition)] in interleaved order: one shuffled round per repetition."""
    order: list = []
    for rep in range(1, repetitions + 1):
        round_ = list(configs)
        random.Random(f"{master_seed}/round/{rep}").shuffle(round_)
        if order and len(round_) > 1 and round_[0] == order[-1][0]:
            round_[0], round_[1] = round_[1], round_[0]
        order.extend((c, rep) for c in round_)
    return order


def _in_checkout(relative: str, plan: Path, key: str) -> Path:
    """A path the plan names, a relative one resolved against the checkout (the stacks, their
    builds and the data live there, wherever the plan file lies)."""
    if Path(relative).is_absolute():
        return Path(relative)
    try:
        return require_checkout(f"the relative path {relative!r}") / relative
    except UserError as exc:
        raise UserError(exc.message, path=plan, field=key, code=exc.code) from None


def load_plan(path: Path | None = None) -> Plan:
    """The campaign plan at `path` (default: the checkout's), every part checked before any run
    starts, so that a mistake in it is one line naming its key, not a campaign stopped midway."""
    path = Path(path) if path else default_plan_path()
    data = read_toml(path, missing="no such plan file", code="plan-error")
    refuse_unknown(data, sorted(PLAN_KEYS), "a key of a plan", path=path, code="plan-error")
    spec = load_spec()
    campaign = _campaign_name(data, path)
    master_seed = _master_seed(data, spec, path)
    scope = data.get("scope", {})
    design = _scoped_design(scope, spec, path)
    stacks = {eco: _stack(eco, table, spec, path)
              for eco, table in _stack_tables(data, path).items()}
    _refuse_external_trial(design, stacks, path)
    data_dir = _in_checkout(data.get("data_dir", "data"), path, "data_dir")
    jobs = _jobs(design, campaign, master_seed, data_dir)
    hosts = _hosts(data.get("hosts", {}), path)
    run_timeout_s = _run_timeout_s(data, path)
    return Plan(path=path, campaign=campaign, master_seed=master_seed, run_timeout_s=run_timeout_s,
                stacks=stacks, jobs=tuple(jobs), scope=dict(scope), hosts=hosts)


def _master_seed(data: dict, spec: dict, path: Path) -> int:
    """The plan's master seed, from which every run's seed is derived (default: the
    specification's S6_replication.master_seed)."""
    master_seed = data.get("master_seed", spec_master_seed(spec))
    if isinstance(master_seed, bool) or not isinstance(master_seed, int) or master_seed < 0:
        raise UserError("must be an integer >= 0", path=path, field="master_seed", code="plan-error")
    return master_seed


def _run_timeout_s(data: dict, path: Path) -> float:
    """How long one run may take before it is stopped, in seconds (default 6 hours)."""
    timeout_s = data.get("run_timeout_s", 21600)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
        raise UserError("must be a number of seconds > 0", path=path, field="run_timeout_s",
                        code="plan-error")
    return float(timeout_s)


def _campaign_name(data: dict, path: Path) -> str:
    """The plan's campaign: a name the runs table admits, since it names folders too."""
    import re

    campaign = data.get("campaign")
    if not isinstance(campaign, str) or not re.fullmatch(load_schema("runs").field("campaign").regex,
                                                         campaign):
        raise UserError(f"{campaign!r} is not a safe campaign name", path=path, field="campaign",
                        code="plan-error")
    return campaign


@dataclass(frozen=True)
class _ScopedDesign:
    """The design a plan's [scope] narrows the specification's to: its labels, repetitions, the
    recipe each run follows (its epochs, batch size and resolution scoped) and the smoke-run
    batch limits."""

    ecosystems: list
    architectures: list
    datasets: list
    repetitions: int
    recipe: dict
    limits: dict
    #: an initialiser trial's initialisers (empty: every run from the canonical export)
    initialisers: tuple[str, ...] = ()


def _scoped_design(scope: dict, spec: dict, path: Path) -> _ScopedDesign:
    """The plan's [scope], checked against the specification it narrows (each label one the
    specification holds, each count a positive integer)."""
    refuse_unknown(scope, SCOPE_KEYS, "a key of [scope]", path=path, field="scope",
                   code="plan-error")
    ecosystems = _list(scope, "ecosystems", spec["S6_replication"]["ecosystems"], spec, path)
    architectures = _list(scope, "architectures", spec["S1_model"]["architectures"], spec, path)
    datasets = _list(scope, "datasets", spec["S3_data"]["datasets"], spec, path)
    repetitions = _positive(scope, "repetitions", spec["S6_replication"]["repetitions"], path, "scope.")
    run_recipe = recipe(spec)
    run_recipe["epochs"] = _positive(scope, "epochs", run_recipe["epochs"], path, "scope.")
    for key in ("batch_size", "input_resolution_px"):
        run_recipe[key] = _positive(scope, key, run_recipe[key], path, "scope.")
    if not isinstance(scope.get("reason", ""), str):
        raise UserError("must be a sentence saying why the campaign narrows the design", path=path,
                        field="scope.reason", code="plan-error")
    device = scope.get("device", spec["S4_backend"]["device"])
    refuse_unknown([device], DEVICES, "a device", path=path, field="scope.device",
                   code="plan-error")
    refuse_unknown([scope.get("schedule", SCHEDULES[0])], SCHEDULES, "a schedule", path=path,
                   field="scope.schedule", code="plan-error")
    limits = {k: _positive(scope, k, None, path, "scope.") for k in ("max_train_batches", "max_eval_batches")}
    return _ScopedDesign(ecosystems, architectures, datasets, repetitions, run_recipe, limits,
                         _initialisers(scope, spec, path))


def _initialisers(scope: dict, spec: dict, path: Path) -> tuple[str, ...]:
    """An initialiser trial's initialisers, each one S1_model.initialisers describes."""
    from deepgreen_audit.trial import known_initialisers, trial_initialisers

    if "initialisers" not in scope:
        return ()
    values = scope["initialisers"]
    if not isinstance(values, list) or not values or len(set(map(str, values))) != len(values):
        raise UserError("must be a non-empty list of distinct initialisers", path=path,
                        field="scope.initialisers", code="plan-error")
    refuse_unknown(values, known_initialisers(spec), "an initialiser of S1_model.initialisers",
                   path=path, field="scope.initialisers", code="plan-error")
    return trial_initialisers(scope)


def _refuse_external_trial(design: _ScopedDesign, stacks: dict[str, Stack], path: Path) -> None:
    """An initialiser trial runs Python stacks only: the external stacks find their export by
    architecture, classes and seed (the canonical file name), so they would load the
    canonical weights whatever the trial's initialiser."""
    external = [e for e in design.ecosystems if e in stacks and stacks[e].kind == "external"]
    if design.initialisers and external:
        raise UserError(f"an initialiser trial runs Python stacks only ({', '.join(external)} "
                        "load(s) the canonical export by its file name, whatever the "
                        "initialiser)", path=path, field="scope.ecosystems", code="plan-error")


def _stack(eco: str, table: dict, spec: dict, path: Path) -> Stack:
    """How the plan runs stack `eco`: a Python program and its interpreter, or a command."""
    where = f"stacks.{eco}."
    refuse_unknown([eco], scope_labels(spec, "ecosystems"), "an ecosystem of the specification",
                   reasons=out_of_scope_reasons(spec), path=path, field=f"stacks.{eco}",
                   code="plan-error")
    stated = table.get("kind")  # anything the TOML holds: refused by name unless a kind
    refuse_unknown([cast(str, stated)], STACK_KINDS, "a kind of stack", path=path,
                   field=where + "kind", code="plan-error")
    kind = str(stated)
    if kind == "python":
        program = table.get("program")
        if not isinstance(program, str):
            raise UserError("a python stack needs program = \"path/to/train.py\"", path=path,
                            field=where + "program", code="plan-error")
        python, python_from = _interpreter(table, eco, path, where)
        return Stack(eco, kind, program=_in_checkout(program, path, where + "program"),
                     python=python, python_from=python_from)
    if "python" in table:
        raise UserError("applies to kind = \"python\" stacks only", path=path,
                        field=where + "python", code="plan-error")
    command = table.get("command")
    if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
        raise UserError("an external stack needs command = [\"path/to/exe\", ...]", path=path,
                        field=where + "command", code="plan-error")
    # A relative executable path is the project's, like a python program's.
    executable = command[0]
    if "/" in executable and not Path(executable).is_absolute():
        executable = str(_in_checkout(executable, path, where + "command"))
    return Stack(eco, kind, command=(executable, *command[1:]))


def _jobs(design: _ScopedDesign, campaign: str, master_seed: int, data_dir: Path) -> list[Job]:
    """One job per run, in the interleaved schedule, each with a seed of its own (derived from
    the master seed and the run id, drawn again on the rare collision).  An initialiser trial
    runs every configuration once per initialiser in each round, its run ids naming it."""
    from deepgreen_audit.trial import run_id as trial_run_id

    configs = [(e, a, d, i) for e in design.ecosystems for a in design.architectures
               for d in design.datasets for i in (design.initialisers or ("",))]
    jobs, seeds = [], set()
    for position, ((eco, arch, ds, init), rep) in enumerate(
            schedule(configs, design.repetitions, master_seed), 1):
        run_id = trial_run_id(eco, arch, ds, rep, init)
        attempt, seed = 0, derive_seed(master_seed, run_id)
        while seed in seeds:
            attempt += 1
            seed = derive_seed(master_seed, run_id, attempt)
        seeds.add(seed)
        jobs.append(Job(run_id=run_id, campaign=campaign, ecosystem=eco, architecture=arch,
                        dataset=ds, repetition=rep, seed=seed, schedule_position=position,
                        epochs=design.recipe["epochs"], data_dir=data_dir,
                        recipe=dict(design.recipe), **design.limits,
                        initialiser=init or CANONICAL_INITIALISER))
    return jobs


def _stack_tables(data: dict, path: Path) -> dict:
    """The plan's [stacks] tables: those of the plan `stacks_from` names (one definition of how
    each stack runs, e.g. "collect/plan.toml"; relative to the checkout, as every path a plan
    names), then the plan's own."""
    tables = {}
    source = data.get("stacks_from")
    if source is not None:
        if not isinstance(source, str) or not source:
            raise UserError("must be the path of another plan file", path=path,
                            field="stacks_from", code="plan-error")
        other = _in_checkout(source, path, "stacks_from")
        if not other.is_file():
            raise UserError(f"{source!r} resolves to {other}, which is no file (a relative "
                            "stacks_from is read from the checkout, as every path of a plan)",
                            path=path, field="stacks_from", code="plan-error")
        if other.resolve() == path.resolve():
            raise UserError("names this plan itself", path=path, field="stacks_from",
                            code="plan-error")
        tables.update(read_toml(other, missing="no such plan file (named by stacks_from)",
                                code="plan-error").get("stacks", {}))
    tables.update(data.get("stacks", {}))
    return tables


def _interpreter(table: dict, eco: str, path: Path, where: str) -> tuple[Path | None, str]:
    """A python stack's interpreter: the plan's `python` (relative: to the checkout), else the
    stack's own environment when set-up built one here (a cuda host), else None (this one).
    Existence of the plan's is preflight's to check, so that `plan --print` works anywhere."""
    from deepgreen_audit.collect.environments import own_interpreter
    from deepgreen_audit.resources import checkout

    python = table.get("python")
    if python is not None:
        if not isinstance(python, str) or not python:
            raise UserError("must be the path of a Python interpreter, e.g. \".venv-jax/bin/python\"",
                            path=path, field=where + "python", code="plan-error")
        return _in_checkout(python, path, where + "python"), "plan"
    own = own_interpreter(eco, checkout())
    return (own, "own environment") if own is not None else (None, "")


def _hosts(table: dict, path: Path) -> dict:
    """The [hosts] table, checked: design, replicate_nodes (only with design = "replicates")."""
    if not isinstance(table, dict):
        raise UserError(f"must be a table of {', '.join(HOST_KEYS)}", path=path, field="hosts",
                        code="plan-error")
    refuse_unknown(table, HOST_KEYS, "a key of [hosts]", path=path, field="hosts",
                   code="plan-error")
    design = table.get("design", "one-kind")
    refuse_unknown([design], HOST_DESIGNS, "a host design", path=path, field="hosts.design",
                   code="plan-error")
    nodes = table.get("replicate_nodes")
    if nodes is not None and (design != "replicates" or not isinstance(nodes, list) or not nodes
                              or not all(isinstance(n, str) and n for n in nodes)):
        raise UserError("must be a non-empty list of node names, with design = \"replicates\"",
                        path=path, field="hosts.replicate_nodes", code="plan-error")
    gpus = table.get("gpus_per_run", 0)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise UserError(f"{gpus!r} is not an integer >= 0", path=path, field="hosts.gpus_per_run",
                        code="plan-error")
    return dict(table)


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_scoped_plan(path: Path, campaign: str, data_dir: Path, scope: dict, master_seed: int = 5,
                      run_timeout_s: float = 900, hosts: dict | None = None) -> Path:
    """A plan file over a narrowed scope, with the stacks of the scope's ecosystems as
    collect/plan.toml defines them (its relative paths resolve against the project wherever the
    file lies; an ecosystem it does not define stays undefined): what the tests, the benchmarks
    and smoke runs collect."""
    base = tomllib.loads(default_plan_path().read_text(encoding="utf-8"))["stacks"]
    wanted = [eco for eco in scope.get("ecosystems", base) if eco in base]
    lines = [f"campaign = {_toml_value(campaign)}", f"master_seed = {master_seed}",
             f"run_timeout_s = {_toml_value(run_timeout_s)}", f"data_dir = {_toml_value(str(data_dir))}"]
    for eco in wanted:
        lines += ["", f"[stacks.{eco}]"] + [f"{k} = {_toml_value(v)}" for k, v in base[eco].items()]
    lines += ["", "[scope]"] + [f"{k} = {_toml_value(v)}" for k, v in scope.items()]
    if hosts:
        lines += ["", "[hosts]"] + [f"{k} = {_toml_value(v)}" for k, v in hosts.items()]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return Path(path)


def format_schedule(plan: Plan, work_root: Path, allow_missing_counters: bool = False) -> str:
    """One line a run: position, repetition, seed, run id, and the exact command(s)."""
    import shlex

    lines = ["# position\trepetition\tseed\trun_id\tcommand"]
    for job in plan.jobs:
        cmd = shlex.join(plan.runner_command(job, work_root / job.run_id, allow_missing_counters))
        stack = plan.stacks.get(job.ecosystem)
        if stack is not None and stack.kind == "external":
            cmd += "   # runs: " + shlex.join(stack.command) + " (DEEPGREEN_HARNESS_PORT=<port>)"
        lines.append(f"{job.schedule_position}\t{job.repetition}\t{job.seed}\t{job.run_id}\t{cmd}")
    return "\n".join(lines) + "\n"

"""A real single-node Slurm cluster in a temporary folder, for the tests and the benchmark.

munged (its own socket and key), slurmctld and slurmd from Debian's packages,
configured for this host as it is (`slurmd -C`): `proctrack/linuxproc`,
`task/none`, `select/cons_tres`, loopback only, ports chosen free, state and
spool under the folder.  There is no slurmdbd here, so `sacct` has no
accounting storage: the executor falls back to the job-completion log
(`jobcomp/filetxt`), which this configuration writes, and to `scontrol`.
Starting needs root (slurmd runs jobs as their submitter).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo")
INSTALL = "apt-get install -y slurmctld slurmd munge slurm-client"


def unavailable() -> str | None:
    """Why a cluster cannot be started here (None: it can)."""
    absent = [d for d in DAEMONS if shutil.which(d) is None
              and not Path("/usr/sbin", d).is_file()]
    if absent:
        return f"Slurm is not installed ({', '.join(absent)} missing): {INSTALL}"
    if os.geteuid() != 0:
        return "starting a test Slurm cluster needs root (slurmd runs jobs as their submitter)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _daemon(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


class Cluster:
    """Start with `Cluster(folder).start()`, stop with `.stop()`; `.env` is what clients need."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.conf = self.folder / "slurm.conf"
        self.munge_socket = self.folder / "munge" / "munge.socket"
        self.node = subprocess.run(["hostname", "-s"], capture_output=True, text=True,
                                   check=True).stdout.strip()
        self.pids: list[int] = []

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def _node_line(self) -> str:
        probe = subprocess.run([_daemon("slurmd"), "-C"], capture_output=True, text=True, check=True)
        line = probe.stdout.splitlines()[0].split()
        keep = [f for f in line if f.split("=")[0] in
                ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")]
        return f"NodeName={self.node} NodeAddr=127.0.0.1 " + " ".join(keep) + " State=UNKNOWN"

    def write_conf(self) -> None:
        for sub in ("state", "spool", "log", "munge"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        f = self.folder
        self.conf.write_text("\n".join([
            "ClusterName=deepgreen-test",
            f"SlurmctldHost={self.node}(127.0.0.1)",
            f"SlurmctldPort={_free_port()}",
            f"SlurmdPort={_free_port()}",
            "SlurmUser=root", "SlurmdUser=root",
            f"AuthInfo=socket={self.munge_socket}",
            "AuthType=auth/munge", "CredType=cred/munge",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core_Memory",
            "ReturnToService=2", "MpiDefault=none", "SwitchType=switch/none",
            f"StateSaveLocation={f / 'state'}", f"SlurmdSpoolDir={f / 'spool'}",
            f"SlurmctldPidFile={f / 'slurmctld.pid'}", f"SlurmdPidFile={f / 'slurmd.pid'}",
            f"SlurmctldLogFile={f / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={f / 'log' / 'slurmd.log'}",
            "JobCompType=jobcomp/filetxt", f"JobCompLoc={f / 'log' / 'jobcomp.log'}",
            "JobAcctGatherType=jobacct_gather/linux", "JobAcctGatherFrequency=30",
            "AccountingStorageType=accounting_storage/none",
            "MinJobAge=3600", "KillWait=5", "SchedulerType=sched/backfill",
            "SchedulerParameters=sched_interval=1", "MaxArraySize=10001",
            "InactiveLimit=0", "SlurmctldTimeout=30", "SlurmdTimeout=30",
            self._node_line(),
            f"PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
        ]) + "\n")

    def _start_munge(self) -> None:
        key = self.folder / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.folder.chmod(0o755)
        (self.folder / "munge").chmod(0o700)
        subprocess.run(["munged", "--force", f"--socket={self.munge_socket}", f"--key-file={key}",
                        f"--pid-file={self.folder / 'munge' / 'munged.pid'}",
                        f"--log-file={self.folder / 'log' / 'munged.log'}",
                        f"--seed-file={self.folder / 'munge' / 'munged.seed'}"], check=True)
        self.pids.append(int((self.folder / "munge" / "munged.pid").read_text()))

    def start(self, timeout_s: float = 60) -> Cluster:
        self.write_conf()
        self._start_munge()
        env = dict(os.environ, **self.env)
        for daemon, pid_file in (("slurmctld", "slurmctld.pid"), ("slurmd", "slurmd.pid")):
            subprocess.run([_daemon(daemon), "-f", str(self.conf)], check=True, env=env)
            deadline = time.monotonic() + 10
            while not (self.folder / pid_file).is_file() and time.monotonic() < deadline:
                time.sleep(0.1)
            self.pids.append(int((self.folder / pid_file).read_text()))
        deadline = time.monotonic() + timeout_s
        state = ""
        while time.monotonic() < deadline:
            state = subprocess.run(["sinfo", "-h", "-n", self.node, "-o", "%T"], capture_output=True,
                                   text=True, env=env).stdout.strip()
            if state == "idle":
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the test Slurm node did not become idle (state {state!r}); "
                           f"logs in {self.folder / 'log'}")

    def stop(self) -> None:
        """Stop slurmd, slurmctld, munged (in that order), each by its own pid."""
        for pid in reversed(self.pids):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
        self.pids.clear()

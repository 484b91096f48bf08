"""Starts a recipe as a cluster of worker processes on 127.0.0.1.

Each worker is its own Python process (`python -m <module> ...`) with a
`TF_CONFIG` naming every worker's address (ports picked free at run time)
and its own index, limited to one CPU thread. Every process is bounded in
time: `Cluster.wait` kills what is still running at its deadline, and
`Cluster.kill` (call it in teardown) kills whatever is left.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def free_ports(count):
    """`count` distinct TCP ports on 127.0.0.1 that are free right now."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def tf_config(ports, index):
    """The `TF_CONFIG` of worker `index` in a cluster of workers on
    127.0.0.1 at `ports`."""
    return json.dumps({
        "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
        "task": {"type": "worker", "index": index},
    })


def worker_env(config=None, **extra):
    """The environment of a test worker: TensorFlow backend, one CPU
    thread, no GPU, quiet logs, this checkout first on the path."""
    env = dict(
        os.environ, KERAS_BACKEND="tensorflow", CUDA_VISIBLE_DEVICES="",
        TF_NUM_INTEROP_THREADS="1", TF_NUM_INTRAOP_THREADS="1",
        OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1",
        PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    env.pop("TF_CONFIG", None)
    if config is not None:
        env["TF_CONFIG"] = config
    env.update(extra)
    return env


def jax_process_env(num_processes):
    """`(index, ports) -> env`: process `index` of `num_processes` JAX
    processes whose coordinator listens on 127.0.0.1:`ports[0]`, set by
    Keras' `KERAS_DISTRIBUTION_*` variables; one device and one thread a
    process."""

    def environment(index, ports):
        env = worker_env(
            KERAS_BACKEND="jax",
            KERAS_DISTRIBUTION_JOB_ADDRESSES=f"127.0.0.1:{ports[0]}",
            KERAS_DISTRIBUTION_NUM_PROCESSES=str(num_processes),
            KERAS_DISTRIBUTION_PROCESS_ID=str(index),
            XLA_FLAGS=os.environ.get("XLA_FLAGS", "")
            + " --xla_force_host_platform_device_count=1")
        return env

    return environment


class Cluster:
    """Worker processes running `argv` (after `python`), one per port.

    Args:
        argv: the command after `python`, e.g. `["-m", "recipes.glue",
            ...]`, the same for every worker.
        num_workers: how many workers the cluster has.
        ports: the cluster's ports (default: picked free now); a restart
            passes the previous run's.
        start: which worker indices to start (default: all); a cluster
            whose other workers never come up starts only some.
        config: a `TF_CONFIG` for every started worker instead of the
            cluster's.
        log_dir: a folder for the workers' output (`worker-N.log`).
        environment: `(index, ports) -> env` of each started process
            instead of `worker_env` with its `TF_CONFIG` (e.g. JAX
            processes, `jax_process_env`).
    """

    def __init__(self, argv, num_workers=2, ports=None, start=None,
                 config=None, log_dir=None, environment=None):
        self.ports = list(ports or free_ports(num_workers))
        self.processes = {}
        self.logs = {}
        self.started = time.time()
        for index in (range(num_workers) if start is None else start):
            env = (environment(index, self.ports) if environment else
                   worker_env(config if config is not None
                              else tf_config(self.ports, index)))
            if log_dir:
                self.logs[index] = os.path.join(log_dir,
                                                f"worker-{index}.log")
                with open(self.logs[index], "w") as log:
                    self.processes[index] = subprocess.Popen(
                        [sys.executable] + list(argv), cwd=ROOT, env=env,
                        stdout=log, stderr=subprocess.STDOUT)
            else:
                self.processes[index] = subprocess.Popen(
                    [sys.executable] + list(argv), cwd=ROOT, env=env,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def output(self, index):
        """What worker `index` printed so far (needs `log_dir`)."""
        with open(self.logs[index], encoding="utf-8",
                  errors="replace") as f:
            return f.read()

    def wait(self, timeout):
        """Waits until every worker has exited or `timeout` seconds have
        passed since this call (then kills the rest); returns the exit
        codes by index (`-9` for a killed process)."""
        deadline = time.time() + timeout
        for process in self.processes.values():
            try:
                process.wait(timeout=max(0.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        return {i: p.returncode for i, p in self.processes.items()}

    def wait_for_line(self, index, text, timeout):
        """Waits until worker `index` prints a line containing `text`;
        returns False at the deadline or when it exited first."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if text in self.output(index):
                return True
            if self.processes[index].poll() is not None:
                return text in self.output(index)
            time.sleep(0.2)
        return False

    def kill(self, index=None):
        """SIGKILLs worker `index` (default: every worker still running).

        SIGKILL, not SIGTERM: TensorFlow's preemption handling catches
        SIGTERM in multi-worker runs."""
        for i, process in self.processes.items():
            if index is not None and i != index:
                continue
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()

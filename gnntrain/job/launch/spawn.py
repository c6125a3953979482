"""Spawning a job's workers on this machine and waiting for them.

The parent has loaded the dataset and partition once (only the manifest where the ranks load
their parts); ``world_size`` processes start with ``torch.multiprocessing`` and receive the
tensors through shared memory. They are forked from a fork server (:mod:`.fork_server`) that
imported torch once for every job of the launcher. If any worker dies, the others are terminated at once and
:class:`~gnntrain.errors.WorkerFailed` names the rank that failed first, with its traceback; on Ctrl-C or SIGTERM
(:class:`~gnntrain.errors.JobInterrupted` from the CLI's signal handler), or any other
exception in the launcher, the workers are terminated too; a launcher killed outright
(SIGKILL) takes its workers with it (Linux). No process outlives the job. While they run, the
launcher passes rank 0's epochs on to the job's W&B run
(:class:`~gnntrain.engine.recorder.WandbFollower`). With ``network.mode=kernel`` each worker
first moves into its node's network namespace and the store listens on the switch's address
(:mod:`gnntrain.comm.namespaces`).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import pickle
import select
import signal
import socket
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Iterator

import torch.distributed as dist
import torch.multiprocessing as mp

from gnntrain.comm import namespaces
from gnntrain.job.composition import typed_run
from gnntrain.config.schema import RootConfig
from gnntrain.config.typed import plain
from gnntrain.data.job import JobData
from gnntrain.engine.recorder import WandbFollower
from gnntrain.errors import (ConfigError, JobInterrupted, WorkerFailed, first_line, interrupt, interrupts_deferred,
                             warn)
from gnntrain.job.launch.rank import WorkerFn, run_rank
from gnntrain.parallel.mesh import Layout
from gnntrain.job.launch.fork_server import Surroundings, launcher_folder, worker_context
from gnntrain.job.startup import reached
from gnntrain.strategies.registry import load_plugins

FOLLOW_EVERY_S = 0.5
"""How often the launcher passes rank 0's new epochs on to the W&B run."""

STOP_GRACE_S = 5.0
"""How long the launcher gives its workers to end once the job stops (a failure or Ctrl-C)
before it kills them: a stopped worker (SIGSTOP) holds a SIGTERM pending, so only the kill ends
it. After a failure torch's ``join`` waits its grace twice (for the workers to end, then after
SIGTERM), so it is given half; left unset it waits 30 s after SIGTERM."""

# torch logs each worker it terminates after a failure; the failure is reported in one line here.
logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)


def _stop_with_the_launcher(launcher: int) -> None:
    """Linux: a thread of this worker waits on the launcher's process (a pidfd, Linux 5.3) and
    sends this worker SIGTERM when it ends, even of SIGKILL (the OOM killer, ``kill -9``), which
    the launcher cannot pass on; the worker then stops as when the launcher stops it. The worker's
    parent is the fork server, which outlives the launcher as long as any worker holds the pipe
    that tells it the launcher is gone, so the parent's death (``PR_SET_PDEATHSIG``) comes too
    late to stop it. torch's workers are asked for SIGINT, which a worker ignores (Ctrl-C is the
    launcher's to handle); workers orphaned that way have kept training. Elsewhere a no-op."""
    try:
        launcher_ended = os.pidfd_open(launcher)
    except ProcessLookupError:  # it died before the request
        os.kill(os.getpid(), signal.SIGTERM)
        return
    except (OSError, AttributeError):
        return

    def stop_when_it_ends() -> None:
        select.select([launcher_ended], [], [])
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=stop_when_it_ends, name="launcher-watch", daemon=True).start()


def _spawned(local_rank: int, surroundings: Surroundings, fn: WorkerFn, config: dict, job: JobData, layout: Layout,
             world_size: int, init_method: str, launcher: int, failed_at: Any,
             network_namespaces: tuple[list[str], list[str]] | None) -> None:
    """A spawned worker. After an orderly finish (results written, process group destroyed)
    it leaves without interpreter finalization: we have seen gloo's C++ threads abort a
    finished worker's shutdown (``std::terminate``) on a loaded machine, turning a complete
    run into a failed job. A failing worker leaves the same way once torch has written its
    traceback, so that abort's line cannot come before the job's one-line error. The config
    arrives plain and is typed here (:func:`~gnntrain.job.composition.typed_run`), once this
    process has taken its launcher's environment and output (``surroundings``,
    :class:`~gnntrain.job.launch.fork_server.Surroundings`) and imported the plugins it names,
    whose classes a typed config holds.

    Ctrl-C is the launcher's to handle: it stops the workers with SIGTERM, which a worker turns
    into :class:`JobInterrupted`, so rank 0's sinks close within the launcher's grace period
    (the W&B run is the launcher's); it then leaves as a finished worker does, without
    finalization, whatever error the stop caused (e.g. a peer's closed connection). A worker
    that fails stamps the time in ``failed_at[local_rank]``, so the launcher names the first;
    a stop that reaches it while it exits ends it at once, with no traceback of its own.

    ``network_namespaces`` (``network.mode=kernel``): each rank's node namespace, which the
    worker moves into before anything opens a socket (gloo then binds to the node's link), and
    every namespace of the job, which it holds while it lives (:func:`namespaces.join`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    surroundings.adopt()
    if network_namespaces is not None:
        per_rank, every = network_namespaces
        namespaces.join(per_rank[local_rank], every)
        os.environ["GLOO_SOCKET_IFNAME"] = namespaces.NODE_INTERFACE
    _stop_with_the_launcher(launcher)
    load_plugins()
    stopped: list[int] = []

    def stop(signum: int, frame: object) -> None:
        # once: a second SIGTERM (the launcher's, after the group's) must not cut the sinks' closing short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stopped.append(signum)
        interrupt(signum, frame)

    signal.signal(signal.SIGTERM, stop)
    try:
        run_rank(fn, typed_run(config), job, layout, local_rank, world_size, local_rank, world_size, init_method)
    except Exception:
        if not stopped:  # a real failure: the launcher reports the earliest
            failed_at[local_rank] = time.monotonic()
            # the launcher's stop may come while the failing worker exits: it then leaves at once, quietly
            signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(128 + signum))
            atexit.register(_leave, 1)  # once torch has written the traceback and exits: no finalization either
            raise
        # stopped (the error may be a peer's closed connection that came first): sinks are closed
    _leave(128 + stopped[0] if stopped else 0)


def _leave(code: int) -> None:
    """End this worker with ``code`` without interpreter finalization, its output flushed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def rendezvous_store(addr: str, port: int, timeout_s: int) -> dist.TCPStore:
    """The job's rendezvous store, served by the launcher on ``addr`` alone (``port`` 0: a free
    one, picked by the kernel as it binds). A store that opens its own socket listens on every
    interface of the machine, with no authentication; this one is given a socket bound to the
    one address (``cluster.master_addr``, loopback by default)."""
    if addr in ("0.0.0.0", "::"):
        warn(f"cluster.master_addr={addr}: the job's rendezvous store listens on every interface of this machine, "
             "unauthenticated; an address of the interface the workers use keeps it there")
    listener = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    try:
        listener.bind((addr, port))
        listener.listen(socket.SOMAXCONN)
    except (OSError, OverflowError) as exc:
        listener.close()
        raise ConfigError(f"cluster.master_addr={addr} cluster.master_port={port}: the launcher cannot listen there "
                          f"({first_line(exc)}); valid: an address of this machine and a free port in 1-65535 "
                          "(0: any free one)") from None
    port = listener.getsockname()[1]
    return dist.TCPStore(addr, port, None, True, timedelta(seconds=timeout_s), wait_for_workers=False,
                         master_listen_fd=listener.detach())


def spawn_and_join(fn: WorkerFn, run: RootConfig, job: JobData, layout: Layout, world_size: int,
                    follower: WandbFollower | None) -> None:
    """Start the workers and wait for them, passing rank 0's epochs on to the W&B run; the
    first worker to fail takes the others down."""
    with contextlib.ExitStack() as network:
        if run.network.mode == "kernel":
            nodes = namespaces.nodes_of(run.network, world_size)
            kernel = network.enter_context(namespaces.KernelNetwork(run.network, max(nodes) + 1))
            addr, network_namespaces = namespaces.SWITCH_ADDRESS, ([kernel.node(node) for node in nodes], kernel.every)
            with namespaces.inside(kernel.switch):
                store = rendezvous_store(addr, 0, run.cluster.timeout_s)
        else:
            addr, network_namespaces = run.cluster.master_addr, None
            store = rendezvous_store(addr, run.cluster.master_port, run.cluster.timeout_s)
        reached("store")
        try:
            _spawn_and_join(fn, run, job, layout, world_size, follower, f"tcp://{addr}:{store.port}", network_namespaces)
        except WorkerFailed as failed:
            if network_namespaces is None:
                raise
            raise _with_unreachable_nodes(failed, kernel, nodes) from None


def _with_unreachable_nodes(failed: WorkerFailed, kernel: namespaces.KernelNetwork, nodes: list[int]) -> WorkerFailed:
    """``failed``, its line led by the nodes whose link went down (the usual cause of a
    kernel-shaped job's timeout) and their ranks."""
    down = kernel.unreachable()
    if not down:
        return failed
    named = "; ".join(f"node {node} ({namespaces.node_address(node)}, rank(s) "
                      f"{', '.join(str(r) for r, n in enumerate(nodes) if n == node)}) became unreachable: its link "
                      "went down" for node in down)
    return WorkerFailed(f"{named}; {failed}", failed.rank, failed.trace)


def _spawn_and_join(fn: WorkerFn, run: RootConfig, job: JobData, layout: Layout, world_size: int,
                    follower: WandbFollower | None, init_method: str,
                    network_namespaces: tuple[list[str], list[str]] | None) -> None:
    failed_at = worker_context().Array("d", world_size, lock=False)
    with tempfile.TemporaryDirectory(prefix="workers-", dir=launcher_folder()) as private:  # 0700: private_names
        context = None
        try:  # whatever ends the launcher from here on (a stop, a failure) stops the workers first
            with private_names(private), interrupts_deferred():  # a stop while they start is raised once they all have
                context = mp.start_processes(_spawned, nprocs=world_size, join=False, start_method="forkserver",
                                             args=(Surroundings.of_this_process(), fn, plain(run), job, layout,
                                                   world_size, init_method, os.getpid(), failed_at,
                                                   network_namespaces))
                reached("spawned")
            _join(context, run, follower, failed_at)
        except BaseException:
            if context is not None:
                with interrupts_deferred():  # a second stop does not cut the stopping short
                    _stop(context.processes)
            raise


@contextlib.contextmanager
def private_names(folder: str) -> Iterator[None]:
    """Temporary file names made meanwhile (``tempfile``'s) are in ``folder``, a directory of
    this process alone.

    torch names each worker's error file in the temporary directory, closes and deletes it, and
    unpickles what it finds at that name when the worker fails. In a shared ``/tmp`` another user
    can create the name in between, and the launcher would unpickle their file: their code run as
    the launcher's user. In a directory of mode 0700 no one else can create anything."""
    shared, tempfile.tempdir = tempfile.tempdir, folder
    try:
        yield
    finally:
        tempfile.tempdir = shared


def _join(context: Any, run: RootConfig, follower: WandbFollower | None, failed_at: Any) -> None:
    """Wait for the workers of ``context`` (torch's), passing rank 0's epochs on to the W&B run;
    the first worker to fail is named (torch's join has stopped the others)."""
    frozen = FrozenWorkers(context.processes)
    reached("joining")
    try:
        while not context.join(FOLLOW_EVERY_S, grace_period=STOP_GRACE_S / 2):
            frozen.check(run.cluster.timeout_s)
            if follower is not None:
                with interrupts_deferred():
                    follower.poll()
    except mp.ProcessRaisedException as exc:
        frozen.blame()  # a worker seen stopped is the cause its peers' timeouts show
        raise WorkerFailed.raised(*_first_failure(failed_at, context.error_files, exc)) from None
    except mp.ProcessExitedException as exc:
        raise WorkerFailed(f"worker rank {exc.error_index} died (exit code {exc.exit_code}); "
                           f"the other workers were stopped") from None


class FrozenWorkers:
    """Workers whose process is stopped (SIGSTOP, a debugger, a frozen container) and since
    when, read from ``/proc`` at each poll. A worker stopped for longer than
    ``cluster.timeout_s`` ends the job, named as itself: its peers would otherwise time out in
    a collective and the first of them to fail would be blamed."""

    def __init__(self, processes: list) -> None:
        self.processes = processes
        self.since: dict[int, float] = {}

    def check(self, timeout_s: float) -> None:
        """Note stopped workers; raise WorkerFailed for one stopped for more than ``timeout_s``."""
        now = time.monotonic()
        for rank, process in enumerate(self.processes):
            if _stopped(process.pid):
                self.since.setdefault(rank, now)
            else:
                self.since.pop(rank, None)
        self.blame(timeout_s)

    def blame(self, timeout_s: float = 0.0) -> None:
        """Raise WorkerFailed for the worker stopped longest, if it was seen stopped for
        ``timeout_s`` or more at the last check."""
        now = time.monotonic()
        for rank, since in sorted(self.since.items(), key=lambda item: item[1]):
            if now - since >= timeout_s:
                raise WorkerFailed(f"worker rank {rank} stopped responding: its process {self.processes[rank].pid} "
                                   f"was stopped for {now - since:.0f} s (cluster.timeout_s limits a wait on a peer); "
                                   "the other workers were stopped", rank)


def _stopped(pid: int | None) -> bool:
    """Whether process ``pid`` is stopped (state T or t in ``/proc/<pid>/stat``)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("T", "t")


class _TextUnpickler(pickle.Unpickler):
    """Unpickles plain data only: a worker's error file holds its traceback as a string."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"a worker's error file names {module}.{name}; it holds a string")


def _first_failure(failed_at: Any, error_files: list[str], exc: mp.ProcessRaisedException) -> tuple[int, str]:
    """The rank that failed first and its traceback (the worker's, as it raised).

    The exception torch raises names whichever failed worker it noticed first, often a peer
    whose collective broke because the real culprit had exited ("Connection closed by peer").
    Each failing worker stamps the system-wide monotonic clock in ``failed_at`` before it
    exits, and its peers notice the exit only after, so the earliest stamp is the cause."""
    stamped = [(at, rank) for rank, at in enumerate(failed_at[:]) if at > 0 and os.path.isfile(error_files[rank])]
    if not stamped:
        return exc.error_index, str(exc).partition("with the following error:\n")[2] or str(exc)
    rank = min(stamped)[1]
    with open(error_files[rank], "rb") as fh:
        return rank, _TextUnpickler(fh).load()


def _stop(workers: list, grace_s: float = STOP_GRACE_S) -> None:
    """Terminate the workers (SIGTERM), then kill those still alive after ``grace_s``."""
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
    deadline = time.monotonic() + grace_s
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            worker.kill()
            worker.join()

"""Containment of a child process and every process it starts, for both sides of the isolation model.

A candidate is untrusted code: it may start processes (in its own session, so a process-group kill misses them),
fork without bound, fill a disk, or hang while the orchestrator that started it is killed. What holds it here:

* the child becomes a *subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), so every process its candidate starts stays
  in its process tree even when an intermediate parent exits (a double-forked daemon is re-parented to the child,
  not to init), and :func:`kill_descendants` finds them all by walking ``/proc``: it stops every descendant first
  (``SIGSTOP``, repeated until no new one appears, so a fork bomb cannot outrun it), then kills them;
* a :class:`ParentWatch` thread in the child polls its connection to the orchestrator: when the orchestrator is
  gone (killed with ``SIGKILL``, nothing of it can clean up), the child kills its descendants and exits, so no
  worker spins on forever and the fork server, resource tracker and ``torch_shm_manager`` (which unlinks the
  shared-memory files under ``/dev/shm``) exit after it. The same thread bounds the number of descendants
  (:data:`MAX_DESCENDANTS`, exit status :data:`EXIT_PROCESS_LIMIT`). ``prctl(PR_SET_PDEATHSIG)``
  (:func:`set_parent_death_signal`) is not what the children use: their parent is the fork server, not the
  orchestrator, and a candidate that kills or breaks the fork server would then take the reference process down
  with it;
* a worker joins a cgroup-v1 ``pids`` group of its own where the hierarchy is writable (:func:`join_pids_cgroup`,
  :data:`MAX_TASKS`): the kernel's bound on a fork bomb, for root too, and the one list of every process the
  candidate started, whatever its session (:func:`kill_cgroup`);
* :func:`limit_resources`: ``RLIMIT_FSIZE`` bounds any one file a candidate writes, ``RLIMIT_NPROC`` (a
  non-root user; root in the initial user namespace is exempt from it) the processes it may start;
  :func:`private_tmpdir` gives the candidate a temporary folder of its own, removed with it (by the child, or by
  the orchestrator after a kill: :func:`tmpdir_of`); :func:`remove_shared_memory` unlinks the ``/dev/shm`` files
  of an ended child whose ``torch_shm_manager`` did not.

Linux only (``/proc``, ``prctl``); elsewhere every function is a no-op that reports nothing done. This module
imports no other kbstudy module: the child side and the orchestrator both use it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import select
import shutil
import signal
import sys
import tempfile
import threading
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

#: descendants a child may have at once; above it the :class:`ParentWatch` kills them all and the child exits
#: with :data:`EXIT_PROCESS_LIMIT` (KernelBench candidates start none; a compiler driver starts a handful)
MAX_DESCENDANTS = 64
#: largest file a candidate process may write (``RLIMIT_FSIZE``): a CUDA extension is megabytes;
#: ``$KBSTUDY_FILE_SIZE_LIMIT`` (bytes, read by the fork server's children) sets another
FILE_SIZE_LIMIT = int(os.environ.get("KBSTUDY_FILE_SIZE_LIMIT") or 2 << 30)
#: processes (threads included) a non-root child may add to its user's count (``RLIMIT_NPROC``)
NPROC_HEADROOM = 512
#: exit status of a child whose watch found more than :data:`MAX_DESCENDANTS` descendants
EXIT_PROCESS_LIMIT = 86
#: exit status of a child whose watch found the orchestrator gone
EXIT_PARENT_GONE = 87
#: exit status of a child whose connection to the orchestrator was closed inside it (by its candidate)
EXIT_CONNECTION_CLOSED = 88
#: what an exit status of a contained child means (for the orchestrator's messages)
EXIT_MEANINGS = {EXIT_PROCESS_LIMIT: f"its candidate started more than {MAX_DESCENDANTS} processes at once "
                                     f"(all killed)",
                 EXIT_PARENT_GONE: "the orchestrator was gone",
                 EXIT_CONNECTION_CLOSED: "its connection to the orchestrator was closed inside it"}

_LINUX = sys.platform.startswith("linux")
_libc = None


def _prctl(option: int, arg: int) -> bool:
    global _libc
    if not _LINUX:
        return False
    try:
        if _libc is None:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return _libc.prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Have the kernel send ``sig`` to this process when its parent dies. True if set."""
    return _prctl(PR_SET_PDEATHSIG, int(sig))


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (they stay in its tree). True if set."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


# ------------------------------------------------------------------------------------------------ the process tree


def _stat(pid: int) -> tuple[str, int] | None:
    """``(state, parent pid)`` of a process from ``/proc/<pid>/stat``; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read()
    except OSError:
        return None
    fields = text[text.rfind(b")") + 2:].split()  # the command name may hold spaces and parentheses
    return fields[0].decode(), int(fields[1])


def _live_parents() -> dict[int, int]:
    """``{pid: parent pid}`` of every live (not zombie) process visible in ``/proc``."""
    parents = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return parents
    for name in names:
        if name.isdigit():
            stat = _stat(int(name))
            if stat is not None and stat[0] not in ("Z", "X"):
                parents[int(name)] = stat[1]
    return parents


def has_children(pid: int | None = None) -> bool:
    """Whether a process has any child, live or zombie (cheap: its threads' ``children`` lists)."""
    pid = os.getpid() if pid is None else pid
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as fh:
                    if fh.read().strip():
                        return True
            except OSError:
                continue
    except OSError:
        return False
    return False


def descendants(pid: int) -> list[int]:
    """The live descendants of ``pid`` (children, their children, ...), found through ``/proc``."""
    if not _LINUX:
        return []
    children: dict[int, list[int]] = {}
    for child, parent in _live_parents().items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child != pid:
                found.append(child)
                todo.append(child)
    return found


def kill_descendants(pid: int | None = None, rounds: int = 200, limit_s: float = 20.0) -> int:
    """Kill every live descendant of ``pid`` (default: this process) and return how many there were.

    Descendants are stopped (``SIGSTOP``) as they are found, again and again until a pass finds none not yet
    stopped (or ``rounds`` passes, or ``limit_s`` seconds), and only then killed: a process that forks while being
    killed cannot leave a new one behind. (A process group is stopped at once by ``killpg``, which no fork
    outruns: the orchestrator does that first for a child's own group, :func:`freeze_group`.)"""
    pid = os.getpid() if pid is None else pid
    in_cgroup = kill_cgroup(_joined, keep=pid) if _joined and pid == os.getpid() else 0
    if not _LINUX or not has_children(pid):
        return in_cgroup
    stopped: set[int] = set()
    deadline = time.monotonic() + limit_s
    for _ in range(rounds):
        if time.monotonic() > deadline:
            break
        fresh = [p for p in descendants(pid) if p not in stopped]
        if not fresh:
            break
        for p in fresh:
            try:
                os.kill(p, signal.SIGSTOP)
            except OSError:
                pass
            stopped.add(p)
    for p in stopped:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    return in_cgroup + len(stopped)


def freeze_group(pgid: int) -> None:
    """Stop every process of process group ``pgid`` at once (one ``killpg``: a fork in the group cannot escape it).
    The caller must not be in the group."""
    try:
        os.killpg(pgid, signal.SIGSTOP)
    except OSError:
        pass


def reap_children(wait_s: float = 1.0) -> None:
    """Collect the exit status of this process's ended children (zombies re-parented to a subreaper), waiting up to
    ``wait_s`` for those just killed: where PID 1 does not reap (a container's), a zombie left to it stays."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > deadline or not has_children():
                return
            time.sleep(0.01)


# ------------------------------------------------------------------------------------------------ limits


def _user_tasks() -> int:
    """Processes and threads of this process's real user (what ``RLIMIT_NPROC`` counts)."""
    uid, count = os.getuid(), 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    count += len(os.listdir(f"/proc/{name}/task"))
            except OSError:
                continue
    return count


def limit_resources(file_size: int = FILE_SIZE_LIMIT, nproc_headroom: int = NPROC_HEADROOM) -> dict:
    """Bound what the calling process (a candidate's worker) and its descendants may take: the size of any one
    file (``RLIMIT_FSIZE``) and, for a non-root user, the processes it may add (``RLIMIT_NPROC``, set to the
    user's current count plus ``nproc_headroom``). Returns the limits set."""
    done = {}
    if not _LINUX:
        return done
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
        done["fsize"] = file_size
    except (OSError, ValueError):
        pass
    if os.getuid() != 0:  # root in the initial user namespace is exempt from RLIMIT_NPROC
        try:
            limit = _user_tasks() + nproc_headroom
            _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
            if hard != resource.RLIM_INFINITY:
                limit = min(limit, hard)
            resource.setrlimit(resource.RLIMIT_NPROC, (limit, hard))
            done["nproc"] = limit
        except (OSError, ValueError):
            pass
    return done


# ------------------------------------------------------------------------------------------------ pids cgroup

#: tasks (processes and threads) a worker's pids cgroup allows: its own threads (torch's pools) and a few more than
#: :data:`MAX_DESCENDANTS` processes. Kept this low because a fork bomb forking in the worker's own main thread
#: holds the GIL through each fork and starves the :class:`ParentWatch` until its forks fail
MAX_TASKS = MAX_DESCENDANTS + 32 + 2 * (os.cpu_count() or 1)
_PIDS_V1 = "/sys/fs/cgroup/pids"


def _own_pids_cgroup() -> str | None:
    """This process's folder in the cgroup-v1 ``pids`` hierarchy, if it is mounted and writable."""
    if not os.access(os.path.join(_PIDS_V1, "cgroup.procs"), os.W_OK):
        return None
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "pids" in controllers.split(","):
                    return os.path.join(_PIDS_V1, path.lstrip("/"))
    except (OSError, ValueError):
        return None
    return None


def cgroup_of(pid: int, parent: str | None = None) -> str | None:
    """The pids cgroup folder of child ``pid`` (see :func:`join_pids_cgroup`)."""
    parent = parent or _own_pids_cgroup()
    return os.path.join(parent, f"kbstudy-child-{pid}") if parent else None


#: the pids cgroup this process made and joined (:func:`join_pids_cgroup`)
_joined: str | None = None


def cgroup_members(path: str) -> list[int]:
    """The processes of a cgroup (one read of its ``cgroup.procs``)."""
    try:
        with open(os.path.join(path, "cgroup.procs")) as fh:
            return [int(x) for x in fh.read().split()]
    except (OSError, ValueError):
        return []


def kill_cgroup(path: str, keep: int | None = None, rounds: int = 100) -> int:
    """SIGKILL every process of cgroup ``path`` but ``keep``, until none is left; returns how many were killed.
    A cgroup holds every descendant whatever its session or parent, and reading its members is one file: the way
    to end a fork bomb from inside the process it started from (walking ``/proc`` would race it for the GIL)."""
    killed: set[int] = set()
    for _ in range(rounds):
        left = [p for p in cgroup_members(path) if p != keep]
        if not left:
            break
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        killed.update(left)
        time.sleep(0.01)
    return len(killed)


def join_pids_cgroup(max_tasks: int = MAX_TASKS) -> str | None:
    """Move this process into a cgroup-v1 ``pids`` group of its own, allowing ``max_tasks`` tasks: the kernel's
    bound on a fork bomb, which holds for root too (``RLIMIT_NPROC`` does not). Returns its folder, or None where
    the hierarchy is absent or not writable (then :class:`ParentWatch`'s descendant limit is the bound)."""
    parent = _own_pids_cgroup()
    path = cgroup_of(os.getpid(), parent)
    if path is None:
        return None
    try:
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "pids.max"), "w") as fh:
            fh.write(str(max_tasks))
        with open(os.path.join(path, "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))
    except OSError:
        try:
            os.rmdir(path)
        except OSError:
            pass
        return None
    global _joined
    _joined = path
    return path


def leave_pids_cgroup() -> None:
    """Move this process back to its parent's pids cgroup and remove its own (the end of a child)."""
    own = _own_pids_cgroup()
    if not own or not os.path.basename(own).startswith("kbstudy-child-"):
        return
    try:
        with open(os.path.join(os.path.dirname(own), "cgroup.procs"), "w") as fh:
            fh.write(str(os.getpid()))
        os.rmdir(own)
    except OSError:
        pass


def remove_pids_cgroup(pid: int, wait_s: float = 1.0) -> None:
    """Remove child ``pid``'s pids cgroup once its tasks are gone (the orchestrator, after killing it)."""
    path = cgroup_of(pid)
    if not path or not os.path.isdir(path):
        return
    deadline = time.monotonic() + wait_s
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:  # tasks still exiting
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)


def tmpdir_of(pid: int) -> str:
    """The private temporary folder of child ``pid`` (see :func:`private_tmpdir`)."""
    return os.path.join(tempfile.gettempdir(), f"kbstudy-child-{pid}")


def private_tmpdir() -> str | None:
    """Give this process a temporary folder of its own (``TMPDIR`` and ``tempfile.tempdir``): what a candidate
    writes there goes when the candidate does (:func:`remove_tmpdir`). Returns its path, None if none was made."""
    path = tmpdir_of(os.getpid())
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        return None
    os.environ["TMPDIR"] = path
    tempfile.tempdir = path
    return path


def remove_tmpdir(pid: int) -> None:
    """Remove child ``pid``'s private temporary folder, if any."""
    shutil.rmtree(tmpdir_of(pid), ignore_errors=True)


#: where torch's ``file_system`` sharing strategy keeps its files, ``torch_<creator pid>_<random>_<n>``
SHM_DIR = "/dev/shm"


def remove_shared_memory(pid: int) -> int:
    """Unlink the shared-memory files torch made for process ``pid`` (called once it has ended, or by itself as it
    ends: a process that maps one keeps it mapped). Normally its ``torch_shm_manager`` does this; a manager killed,
    or broken by bytes a candidate wrote into its socket, leaves them behind. Returns how many were removed."""
    prefix, removed = f"torch_{pid}_", 0
    try:
        names = [n for n in os.listdir(SHM_DIR) if n.startswith(prefix)]
    except OSError:
        return 0
    for name in names:
        try:
            os.unlink(os.path.join(SHM_DIR, name))
            removed += 1
        except OSError:
            pass
    return removed


# ------------------------------------------------------------------------------------------------ the watch


class ParentWatch(threading.Thread):
    """Watches a child's connection to the orchestrator and its number of descendants (a daemon thread).

    When the connection hangs up (the orchestrator died: its end of the socket closed with it), or when more than
    ``max_descendants`` descendants live, every descendant is killed and the process exits at once
    (:data:`EXIT_PARENT_GONE`, :data:`EXIT_PROCESS_LIMIT`). :meth:`stop` before closing the connection."""

    def __init__(self, fd: int, interval_s: float = 0.1, max_descendants: int = MAX_DESCENDANTS):
        super().__init__(name="kbstudy-parent-watch", daemon=True)
        self.fd = fd
        self.interval_s = interval_s
        self.max_descendants = max_descendants
        self._stopped = threading.Event()

    def stop(self) -> None:
        self._stopped.set()

    def run(self) -> None:
        poller = select.poll()
        poller.register(self.fd, 0)  # no events asked: hang-up, error and a closed descriptor are reported anyway
        while not self._stopped.is_set():
            try:
                events = poller.poll(self.interval_s * 1000)
            except (OSError, ValueError):
                return
            if self._stopped.is_set():
                return
            if events:
                closed = any(mask & select.POLLNVAL for _, mask in events)
                self._end(EXIT_CONNECTION_CLOSED if closed else EXIT_PARENT_GONE)
            if self.max_descendants and self._descendants() > self.max_descendants:
                self._end(EXIT_PROCESS_LIMIT)

    @staticmethod
    def _descendants() -> int:
        if _joined:  # one read, whatever is forking in this process meanwhile
            return max(0, len(cgroup_members(_joined)) - 1)
        return len(descendants(os.getpid())) if has_children() else 0

    def _end(self, status: int) -> None:
        kill_descendants()
        reap_children()
        remove_tmpdir(os.getpid())
        remove_shared_memory(os.getpid())
        leave_pids_cgroup()
        os._exit(status)


def start_watch(conn) -> ParentWatch | None:
    """Start a :class:`ParentWatch` on a ``multiprocessing`` connection; None where there is no ``/proc``."""
    if not _LINUX:
        return None
    watch = ParentWatch(conn.fileno())
    watch.start()
    return watch


class EndedProcess:
    """What is left of a child's ``multiprocessing.Process`` once it is joined and closed (its descriptors
    released): its pid and exit status, answering the calls made on a process that has ended."""

    def __init__(self, pid: int | None, exitcode: int | None):
        self.pid = pid
        self.exitcode = exitcode

    def is_alive(self) -> bool:
        return False

    def join(self, timeout: float | None = None) -> None:
        return None

    def kill(self) -> None:
        return None

    def close(self) -> None:
        return None


def wait_gone(pids, timeout_s: float = 5.0) -> list[int]:
    """Wait until none of ``pids`` is a live process; returns those still alive after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    alive = list(pids)
    while alive:
        alive = [p for p in alive if (_stat(p) or ("X", 0))[0] not in ("Z", "X")]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return alive


def candidate_notes(escaped: int, exit_report: dict | None) -> dict:
    """The record metadata of a candidate's containment: ``escaped_processes`` (processes it left running, all
    killed), a ``containment_note`` when it left any, and ``candidate_output`` (its process's captured stdout and
    stderr, ``kbstudy.harness.capture``) when it wrote any."""
    notes: dict = {"escaped_processes": int(escaped)}
    if escaped:
        notes["containment_note"] = (f"the candidate left {escaped} process(es) running when it ended; the harness "
                                     f"killed them")
    output = (exit_report or {}).get("output")
    if isinstance(output, dict) and output.get("bytes"):
        notes["candidate_output"] = output
    return notes

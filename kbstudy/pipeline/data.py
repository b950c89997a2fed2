"""The study's public inputs (``kbstudy data``): fetched from their public sources at pinned commits, and the one
resolution of the KernelBench data folder that every loader reads.

``fetch`` writes exactly the files of ``../shared/kernelbench`` (its README.md describes them), byte for byte: every
file it builds is checked against the SHA-256 in :data:`TARGETS`, which are those of that folder. What each comes from
(raw files at the pinned commit of each :data:`SOURCES` entry):

* ``kernelbench_levels_1-3.jsonl``: ScalingIntelligence/KernelBench ``KernelBench/level{1,2,3}/<name>.py``, one JSON
  object a line (``json.dumps`` defaults: ``code`` the file's text, ``level``, ``name`` the file name, ``problem_id``
  the number the name starts with), ordered by level and problem id;
* ``kernelbench_v0_problems.jsonl``: the leaderboard site's original problems, ``docs/assets/problems/l<level>_p<id>.py``
  (the files its ``docs/index.html`` links each problem to), ``{level, problem_id, code}`` in file-name order;
* ``leaderboard_kernels.jsonl``: the leaderboard's ``docs/assets/raw_data.json`` (every kernel it publishes, with
  its model and timings; ``docs/assets/data.json`` holds only the top five per problem, without timings), the timing
  fields renamed with their unit (``baseline_torch_time`` -> ``baseline_torch_time_ms``, ``kernel_eval_time`` ->
  ``kernel_time_ms``), ordered by level, problem id and model;
* ``baseline_timing/<hardware>__<set>.json``: KernelBench ``results/timing/<hardware>/<set>.json``, re-serialized
  (H100_Modal indented by 4, H100_PCIe_LambdaLabs on one line: the upstream file has stray blank lines);
* ``LICENSE``: KernelBench's, without its final newline; ``README.md``: kbstudy's description of the folder
  (``kernelbench_data_README.md`` beside this module).

Each problem file is also checked on arrival against its own SHA-256 (``kernelbench_inputs.json`` beside this
module, derived from the same folder). Downloads go to a staging folder beside the destination
(``.<name>.fetch``), written under a temporary name and renamed once complete and verified; the built files are
checked there and only then renamed into the destination. A corrupted download raises :class:`ChecksumError` and
leaves nothing in the destination; an interrupted fetch leaves its verified downloads in the staging folder, and the
next fetch reuses them (files already in the destination with the right SHA-256 are not fetched again either).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import http.client
import json
import os
import shutil
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable, Iterable, Mapping

from kbstudy.pipeline.paths import find_project_root

#: Environment variable naming the KernelBench data folder (after ``--kernelbench-dir``, before the defaults).
KERNELBENCH_DIR_ENV = "KBSTUDY_KERNELBENCH_DIR"
#: Environment variables overriding the base URL of every source / of one source (``..._KERNELBENCH``, ...).
BASE_URL_ENV = "KBSTUDY_DATA_BASE_URL"
#: Where ``kbstudy data fetch`` writes, relative to the project root (git-ignored).
FETCHED_DIR = Path("data") / "kernelbench"
#: The folder beside the repository that the study was first run from, relative to the project root.
SHARED_DIR = Path("..") / "shared" / "kernelbench"
DEFAULT_BASE_URL = "https://raw.githubusercontent.com"
URL_TEMPLATE = "{base}/{repo}/{commit}/{path}"
USER_AGENT = "kbstudy-data (+https://github.com/ScalingIntelligence/KernelBench)"
FETCH_COMMAND = "kbstudy data fetch"

_HERE = Path(__file__).resolve().parent
INPUTS_FILE = _HERE / "kernelbench_inputs.json"
README_FILE = _HERE / "kernelbench_data_README.md"


class DataError(Exception):
    """A fetch that cannot complete (message says which file and why)."""


class DownloadError(DataError):
    """A source file that could not be downloaded (HTTP error, connection lost, truncated body)."""


class ChecksumError(DataError):
    """A downloaded or built file whose SHA-256 is not the pinned one."""


class KernelBenchDataNotFound(FileNotFoundError):
    """No KernelBench data folder where one was asked for or expected."""


# ------------------------------------------------------------------------------------------------ the manifest


@dataclasses.dataclass(frozen=True)
class Source:
    """A public repository read at one commit, file by file (``URL_TEMPLATE``)."""

    name: str
    repo: str
    commit: str

    def url(self, path: str, base: str = DEFAULT_BASE_URL) -> str:
        return URL_TEMPLATE.format(base=base.rstrip("/"), repo=self.repo, commit=self.commit,
                                   path=urllib.parse.quote(path, safe="/"))


SOURCES = {
    "kernelbench": Source("kernelbench", "ScalingIntelligence/KernelBench", "423217d9fda91e0c2d67e4a43bf62f96f6d104f1"),
    "leaderboard": Source("leaderboard", "anneouyang/KernelBenchLeaderboard",
                          "170ca7965f53bba599d1078b6fcaa5dd2658ec50"),
}

#: The leaderboard's raw_data.json field -> the field of leaderboard_kernels.jsonl, in the order written.
LEADERBOARD_FIELDS = {
    "level": "level", "problem_id": "problem_id", "model": "model", "display_name": "display_name", "code": "code",
    "torch_speedup": "torch_speedup", "torch_compile_speedup": "torch_compile_speedup",
    "baseline_torch_time": "baseline_torch_time_ms", "baseline_torch_compile_time": "baseline_torch_compile_time_ms",
    "kernel_eval_time": "kernel_time_ms", "file": "file",
}


@dataclasses.dataclass(frozen=True)
class Target:
    """One file of the data folder: its SHA-256 and size (those of ``../shared/kernelbench``), what it is built from
    (paths in one source, or none) and how (a key of :data:`BUILDERS`)."""

    path: str
    sha256: str
    size: int
    build: str
    source: str | None = None
    inputs: tuple[str, ...] = ()
    options: tuple[tuple[str, object], ...] = ()


def _timing(hardware: str, name: str, sha256: str, size: int, indent: int | None) -> Target:
    return Target(f"baseline_timing/{hardware}__{name}.json", sha256, size, "json", "kernelbench",
                  (f"results/timing/{hardware}/{name}.json",), (("indent", indent),))


def _pinned_inputs() -> dict[str, dict[str, str]]:
    data = json.loads(INPUTS_FILE.read_text())
    return {name: data[name] for name in SOURCES}


#: SHA-256 of each problem file downloaded, by source and path (``kernelbench_inputs.json``).
INPUT_SHA256 = _pinned_inputs()

TARGETS = (
    Target("kernelbench_levels_1-3.jsonl", "3e2b738ca3a3cbbecf00aeb457e7bc63f21fc81c816389358b430156db1bdf08", 448438,
           "levels", "kernelbench", tuple(INPUT_SHA256["kernelbench"])),
    Target("kernelbench_v0_problems.jsonl", "52f25722a33f8c1132e22d6b727ad720442cd4d62a99fe5035f2e9c292d4f11a", 436005,
           "v0", "leaderboard", tuple(INPUT_SHA256["leaderboard"])),
    Target("leaderboard_kernels.jsonl", "df06377ede2496fc280d6c9432e16b43ec2474a9d073bbb5d69f8183892498c3", 1323883,
           "leaderboard", "leaderboard", ("docs/assets/raw_data.json",)),
    _timing("H100_Modal", "baseline_time_torch",
            "8e8f4c262ce4ad0aa074c095ba90690f89cc4d0cdb644b842e3a6bea3762bd22", 68053, 4),
    _timing("H100_Modal", "baseline_time_torch_compile_inductor_default",
            "893d6e8836aad252a5b927350a2c196931793fd4f95157d4f8af80f211a45459", 67976, 4),
    _timing("H100_PCIe_LambdaLabs", "baseline_time_torch",
            "0da6e4a2e97916dc1cbc8fa5ee61985e85badda6b3f45f1d49fc91939130f699", 41244, None),
    _timing("H100_PCIe_LambdaLabs", "baseline_time_torch_compile_inductor_default",
            "5973a32e2645e67580b42fde462616ad072d4236885c1f999b1114b9fb812a13", 41237, None),
    Target("LICENSE", "fb5917dd8e4476fa75e89ef6f03dccf07d4859636bc23c7db50e6c0413887b9e", 1143, "license",
           "kernelbench", ("LICENSE",)),
    Target("README.md", "2b127dc2f2dd8714a59a3ad4f7ff2b6d851d5b713685703b375ce68c9fd8d112", 2229, "readme"),
)
#: The files a data folder must hold for the resolution to take it.
REQUIRED_FILES = tuple(t.path for t in TARGETS)


# ------------------------------------------------------------------------------------------------ builders


def _dumps_lines(rows: Iterable[dict]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def _build_levels(inputs: Mapping[str, bytes], **_) -> bytes:
    rows = []
    for path, raw in inputs.items():
        level_dir, name = path.split("/")[-2:]
        rows.append({"code": raw.decode("utf-8"), "level": int(level_dir.removeprefix("level")), "name": name,
                     "problem_id": int(name.split("_", 1)[0])})
    return _dumps_lines(sorted(rows, key=lambda r: (r["level"], r["problem_id"])))


def _build_v0(inputs: Mapping[str, bytes], **_) -> bytes:
    rows = []
    for path in sorted(inputs, key=lambda p: p.rsplit("/", 1)[1]):
        level, problem_id = path.rsplit("/", 1)[1].removesuffix(".py").split("_")  # l<level>_p<id>.py
        rows.append({"level": int(level[1:]), "problem_id": int(problem_id[1:]), "code": inputs[path].decode("utf-8")})
    return _dumps_lines(rows)


def _build_leaderboard(inputs: Mapping[str, bytes], **_) -> bytes:
    (raw,) = inputs.values()
    kernels = json.loads(raw)
    rows = [{out: kernel[field] for field, out in LEADERBOARD_FIELDS.items()} for kernel in kernels]
    return _dumps_lines(sorted(rows, key=lambda r: (r["level"], r["problem_id"], r["model"])))


def _build_json(inputs: Mapping[str, bytes], *, indent: int | None = None, **_) -> bytes:
    (raw,) = inputs.values()
    return json.dumps(json.loads(raw), indent=indent).encode()


def _build_license(inputs: Mapping[str, bytes], **_) -> bytes:
    (raw,) = inputs.values()
    return raw.rstrip(b"\n")


def _build_readme(inputs: Mapping[str, bytes], **_) -> bytes:
    return README_FILE.read_bytes()


BUILDERS: dict[str, Callable[..., bytes]] = {
    "levels": _build_levels, "v0": _build_v0, "leaderboard": _build_leaderboard, "json": _build_json,
    "license": _build_license, "readme": _build_readme,
}


def build_target(target: Target, inputs: Mapping[str, bytes]) -> bytes:
    """The bytes of ``target`` from its source files (``inputs``: upstream path -> bytes)."""
    try:
        return BUILDERS[target.build](inputs, **dict(target.options))
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ChecksumError(f"{target.path}: its source files do not have the expected form "
                            f"({type(exc).__name__}: {exc})") from exc


# ------------------------------------------------------------------------------------------------ resolution


def holds_data(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` holds every file of the data folder (present; :func:`check_folder` compares contents)."""
    return all((Path(folder) / name).is_file() for name in REQUIRED_FILES)


def kernelbench_dir_candidates(explicit: str | os.PathLike | None = None, *,
                               root: str | os.PathLike | None = None) -> list[tuple[str, Path]]:
    """The places looked at, in order, each with what names it: ``--kernelbench-dir``, ``$KBSTUDY_KERNELBENCH_DIR``,
    the fetched folder ``<root>/data/kernelbench``, then ``<root>/../shared/kernelbench``. Relative paths are relative
    to the project root."""
    root = Path(root) if root is not None else find_project_root()
    places = []
    if explicit:
        places.append(("--kernelbench-dir", root / Path(explicit)))
    if os.environ.get(KERNELBENCH_DIR_ENV):
        places.append((f"${KERNELBENCH_DIR_ENV}", root / Path(os.environ[KERNELBENCH_DIR_ENV])))
    places.append((f"fetched by {FETCH_COMMAND}", root / FETCHED_DIR))
    places.append(("beside the repository", root / SHARED_DIR))
    return [(label, Path(os.path.normpath(path))) for label, path in places]


def _given(label: str) -> bool:
    """Whether a place was asked for (the option or the environment) rather than a default."""
    return label == "--kernelbench-dir" or label.startswith("$")


def locate_kernelbench_dir(explicit: str | os.PathLike | None = None, *,
                           root: str | os.PathLike | None = None) -> tuple[Path | None, str, list[tuple[str, Path]]]:
    """``(folder or None, the rule that chose it, the places looked at)``. A folder asked for (``explicit`` or the
    environment) is the answer even when absent (``None``, with its rule): it is never silently replaced by a
    default. Otherwise the fetched folder when it holds every file, then ``../shared/kernelbench`` when it exists."""
    places = kernelbench_dir_candidates(explicit, root=root)
    for label, path in places:
        if _given(label):
            return (path if path.is_dir() else None), label, places
        if holds_data(path) if label.startswith("fetched") else path.is_dir():
            return path, label, places
    return None, "", places


def resolve_kernelbench_dir(explicit: str | os.PathLike | None = None, *, root: str | os.PathLike | None = None,
                            required: bool = True) -> Path:
    """THE KernelBench data folder: ``explicit`` (``--kernelbench-dir``), then ``$KBSTUDY_KERNELBENCH_DIR``, then the
    folder ``kbstudy data fetch`` writes (``<root>/data/kernelbench``) if it holds the files, then
    ``<root>/../shared/kernelbench``.

    Raises :class:`KernelBenchDataNotFound` (a ``FileNotFoundError``) naming ``kbstudy data fetch`` when the folder
    is not there. With ``required=False`` it returns, instead of raising, the folder asked for or else the path the
    fetch writes to (for callers that may never read the data)."""
    folder, label, places = locate_kernelbench_dir(explicit, root=root)
    if folder is not None:
        return folder
    fetched = next(path for lbl, path in places if lbl.startswith("fetched"))
    if not required:
        return places[0][1] if label else fetched
    if label:
        raise KernelBenchDataNotFound(
            f"KernelBench data folder not found: {places[0][1]} (from {label}). Run `{FETCH_COMMAND}` to fetch the "
            f"data into {fetched}, or point {label} at a folder that holds it")
    looked = "; ".join(f"{path} ({lbl})" for lbl, path in places)
    raise KernelBenchDataNotFound(
        f"no KernelBench data folder (looked in: {looked}). Run `{FETCH_COMMAND}` to fetch it from its public sources "
        f"into {fetched}, or pass --kernelbench-dir / set ${KERNELBENCH_DIR_ENV}")


def file_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_folder(folder: str | os.PathLike) -> dict[str, str]:
    """Each data file's state in ``folder``: ``"ok"`` (the pinned SHA-256), ``"differs"`` or ``"missing"``."""
    folder = Path(folder)
    states = {}
    for target in TARGETS:
        path = folder / target.path
        states[target.path] = ("missing" if not path.is_file()
                               else "ok" if file_sha256(path) == target.sha256 else "differs")
    return states


# ------------------------------------------------------------------------------------------------ fetching


def base_urls(overrides: Iterable[str] | Mapping[str, str] | None = None) -> dict[str, str]:
    """The base URL of each source: ``overrides`` (``"URL"`` for every source or ``"<source>=URL"`` for one, as
    ``--source-base-url`` takes them; or a mapping), else ``$KBSTUDY_DATA_BASE_URL_<SOURCE>``, else
    ``$KBSTUDY_DATA_BASE_URL``, else raw.githubusercontent.com. Raises ``ValueError`` for an unknown source name."""
    urls = {name: os.environ.get(f"{BASE_URL_ENV}_{name.upper()}") or os.environ.get(BASE_URL_ENV)
            or DEFAULT_BASE_URL for name in SOURCES}
    if isinstance(overrides, Mapping):
        overrides = [f"{name}={url}" for name, url in overrides.items()]
    everyone, per_source = None, {}
    for item in overrides or ():
        name, sep, url = item.partition("=")
        if sep and "://" not in name:
            if name not in SOURCES:
                raise ValueError(f"unknown source {name!r} in {item!r} (sources: {', '.join(SOURCES)})")
            per_source[name] = url
        else:
            everyone = item
    for name in SOURCES:
        urls[name] = per_source.get(name) or everyone or urls[name]
    return urls


def _write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` under a temporary name in the same folder, then rename: readers see all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        part.write_bytes(data)
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)


def _download(url: str, *, retries: int, timeout: float, backoff: float) -> bytes:
    """The body at ``url``; transient failures (connection errors, truncated bodies, 429 and 5xx) are retried."""
    for attempt in range(retries + 1):
        try:
            request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
            with urllib.request.urlopen(request, timeout=timeout) as response:
                body = response.read()
                length = response.headers.get("Content-Length")
            if length is not None and len(body) != int(length):
                raise DownloadError(f"truncated: {len(body)} of {length} bytes")
            return body
        except urllib.error.HTTPError as exc:
            reason = f"HTTP {exc.code} {exc.reason}"
            if exc.code != 429 and exc.code < 500:
                raise DownloadError(f"could not download {url}: {reason}") from exc
        except (urllib.error.URLError, http.client.HTTPException, OSError, DownloadError) as exc:
            reason = str(getattr(exc, "reason", None) or exc) or type(exc).__name__
        if attempt == retries:
            raise DownloadError(f"could not download {url}: {reason}")
        time.sleep(backoff * 2 ** attempt)
    raise AssertionError("unreachable")


@dataclasses.dataclass
class FetchResult:
    """What :func:`fetch` did: the folder, the files it wrote, those already there, and the downloads it made or
    reused from an earlier, interrupted fetch."""

    folder: Path
    written: list[str]
    already_present: list[str]
    downloaded: int
    reused: int


def _staging_dir(dest: Path) -> Path:
    return dest.parent / f".{dest.name}.fetch"


def fetch(dest: str | os.PathLike | None = None, *, sources: Iterable[str] | Mapping[str, str] | None = None,
          root: str | os.PathLike | None = None, workers: int = 8, retries: int = 2, timeout: float = 60.0,
          backoff: float = 1.0, echo: Callable[[str], None] | None = None) -> FetchResult:
    """Fetch the data folder into ``dest`` (default ``<root>/data/kernelbench``) from the pinned sources (base URLs
    per :func:`base_urls` of ``sources``); see the module docstring. Raises :class:`DownloadError`,
    :class:`ChecksumError`; the destination then holds only files that were already there."""
    say = echo or (lambda message: None)
    dest = Path(dest) if dest is not None else (Path(root) if root is not None else find_project_root()) / FETCHED_DIR
    bases = base_urls(sources)
    staging = _staging_dir(dest)
    present = [t.path for t in TARGETS if (dest / t.path).is_file() and file_sha256(dest / t.path) == t.sha256]
    needed = [t for t in TARGETS if t.path not in present]
    if not needed:
        say(f"{dest}: all {len(TARGETS)} files present with their pinned SHA-256; nothing to fetch")
        shutil.rmtree(staging, ignore_errors=True)
        return FetchResult(dest, [], present, 0, 0)

    def cached(source: str, path: str) -> Path:
        return staging / "downloads" / source / path

    wanted = {(t.source, path) for t in needed if t.source for path in t.inputs}
    missing = sorted(item for item in wanted if not cached(*item).is_file())
    reused = len(wanted) - len(missing)
    if missing:
        where = ", ".join(sorted({f"{SOURCES[s].repo}@{SOURCES[s].commit[:12]} ({bases[s]})" for s, _ in missing}))
        say(f"downloading {len(missing)} files from {where}" + (f"; {reused} kept from an earlier fetch" if reused
                                                                  else ""))

    def get(item: tuple[str, str]) -> None:
        source, path = item
        url = SOURCES[source].url(path, bases[source])
        body = _download(url, retries=retries, timeout=timeout, backoff=backoff)
        expected = INPUT_SHA256[source].get(path)
        digest = hashlib.sha256(body).hexdigest() if expected is not None else None
        if digest != expected:
            raise ChecksumError(f"checksum mismatch for {url}: SHA-256 {digest}, pinned "
                                f"{expected} ({SOURCES[source].repo} at {SOURCES[source].commit}); nothing written")
        _write_atomic(cached(source, path), body)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(get, item) for item in missing]
        try:
            for future in concurrent.futures.as_completed(futures):
                future.result()
        finally:
            for future in futures:
                future.cancel()

    build = staging / "build"
    shutil.rmtree(build, ignore_errors=True)  # built files are cheap: never trust a half-finished build
    for target in needed:
        inputs = {path: cached(target.source, path).read_bytes() for path in target.inputs}
        data = build_target(target, inputs)
        digest = hashlib.sha256(data).hexdigest()
        if digest != target.sha256:
            for path in target.inputs:  # unpinned downloads are only judged here: fetch them again next time
                if path not in INPUT_SHA256.get(target.source or "", {}):
                    cached(target.source, path).unlink(missing_ok=True)
            origin = (f" from {SOURCES[target.source].repo} at {SOURCES[target.source].commit} ({bases[target.source]})"
                      if target.source else "")
            raise ChecksumError(f"checksum mismatch for {target.path} built{origin}: SHA-256 {digest} ({len(data)} "
                                f"bytes), pinned {target.sha256} ({target.size} bytes); nothing written to {dest}")
        _write_atomic(build / target.path, data)

    if not dest.exists():  # one rename puts the whole folder in place
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(build, dest)
    else:
        for target in needed:
            (dest / target.path).parent.mkdir(parents=True, exist_ok=True)
            os.replace(build / target.path, dest / target.path)
    shutil.rmtree(staging, ignore_errors=True)
    say(f"{dest}: wrote {len(needed)} files" + (f", {len(present)} already present" if present else "")
        + f"; all {len(TARGETS)} match their pinned SHA-256")
    return FetchResult(dest, [t.path for t in needed], present, len(missing), reused)

"""``kbstudy data``: the fetch against a loopback HTTP server laid out like the upstream repositories (raw files at
``/<owner>/<repo>/<commit>/<path>``), whose files are made at test time from the KernelBench data folder by reversing
each transformation; and the one resolution of the data folder.

No HTTP client is mocked: ``kbstudy.pipeline.data.fetch`` talks HTTP to a real ``http.server`` over a socket.
"""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kbstudy.cli.app import app
from kbstudy.pipeline import data
from kbstudy.pipeline.study_config import load_study

DATA_DIR = data.resolve_kernelbench_dir(required=False)


@pytest.fixture(scope="module")
def shared() -> Path:
    """The reference data folder (``../shared/kernelbench`` or wherever the resolution finds it), checked first."""
    if not data.holds_data(DATA_DIR):
        pytest.skip(f"KernelBench data not found in {DATA_DIR} (set {data.KERNELBENCH_DIR_ENV})")
    assert set(data.check_folder(DATA_DIR).values()) == {"ok"}, data.check_folder(DATA_DIR)
    return DATA_DIR


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def upstream_files(folder: Path) -> dict[str, bytes]:
    """The upstream repositories' files, as URL paths -> bytes, rebuilt from a data folder: the reverse of each
    transformation in kbstudy.pipeline.data (each served in a form the fetch must normalize, where it has one)."""
    kb, lb = data.SOURCES["kernelbench"], data.SOURCES["leaderboard"]
    files = {}

    def put(source, path: str, body: bytes) -> None:
        files[f"/{source.repo}/{source.commit}/{path}"] = body

    for row in _jsonl(folder / "kernelbench_levels_1-3.jsonl"):
        put(kb, f"KernelBench/level{row['level']}/{row['name']}", row["code"].encode())
    for row in _jsonl(folder / "kernelbench_v0_problems.jsonl"):
        put(lb, f"docs/assets/problems/l{row['level']}_p{row['problem_id']}.py", row["code"].encode())
    renamed = {out: field for field, out in data.LEADERBOARD_FIELDS.items()}
    raw = [{renamed[k]: v for k, v in row.items()} for row in _jsonl(folder / "leaderboard_kernels.jsonl")]
    random.Random(0).shuffle(raw)  # upstream order is not the file's: the fetch sorts
    # upstream is a compact dump with escaped slashes (a JSON encoder's choice the fetch must not depend on)
    put(lb, "docs/assets/raw_data.json", json.dumps(raw, separators=(",", ":")).replace("/", "\\/").encode())
    for target in data.TARGETS:
        if target.build == "json":  # served re-indented: the fetch re-serializes
            put(kb, target.inputs[0], json.dumps(json.loads((folder / target.path).read_text()), indent=2).encode())
    put(kb, "LICENSE", (folder / "LICENSE").read_bytes() + b"\n")
    return files


@pytest.fixture(scope="module")
def files(shared) -> dict[str, bytes]:
    return upstream_files(shared)


class Upstream:
    """A loopback HTTP server serving ``files``; ``drop_after``: answer that many files, then close every later
    connection unanswered; ``corrupt``: URL path -> bytes served instead."""

    def __init__(self, files: dict[str, bytes]):
        self.files = files
        self.drop_after: int | None = None
        self.corrupt: dict[str, bytes] = {}
        self.requests: list[str] = []
        self.served = 0
        self.lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802 (http.server's name)
                with upstream.lock:
                    upstream.requests.append(self.path)
                    drop = upstream.drop_after is not None and upstream.served >= upstream.drop_after
                    if not drop and self.path in upstream.files:
                        upstream.served += 1
                if drop:
                    self.close_connection = True
                    return
                body = upstream.corrupt.get(self.path, upstream.files.get(self.path))
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def upstream(files):
    server = Upstream(files)
    yield server
    server.close()


def _fetch(dest: Path, upstream: Upstream, **kwargs) -> data.FetchResult:
    return data.fetch(dest, sources=[upstream.url], retries=0, backoff=0, **kwargs)


def _tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): data.file_sha256(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def _leftovers(staging: Path) -> list[str]:
    return [p.name for p in staging.rglob("*.part")] if staging.exists() else []


def test_fetch_builds_the_data_folder_byte_for_byte(tmp_path, upstream, shared, files):
    dest = tmp_path / "data" / "kernelbench"
    result = _fetch(dest, upstream)
    assert _tree(dest) == _tree(shared)  # exactly its files, each with its SHA-256
    assert _tree(dest) == {t.path: t.sha256 for t in data.TARGETS}
    assert result.downloaded == len(files) == len(upstream.requests) and result.reused == 0
    assert not (tmp_path / "data" / ".kernelbench.fetch").exists()
    # a second fetch finds every file verified and asks for nothing
    again = _fetch(dest, upstream)
    assert again.written == [] and len(upstream.requests) == len(files)
    # a file that differs is fetched again, alone
    (dest / "LICENSE").write_text("not the license")
    repaired = _fetch(dest, upstream)
    assert repaired.written == ["LICENSE"] and upstream.requests[len(files):] == [
        f"/{data.SOURCES['kernelbench'].repo}/{data.SOURCES['kernelbench'].commit}/LICENSE"]
    assert _tree(dest) == _tree(shared)


def test_a_corrupted_problem_file_is_refused_and_nothing_is_written(tmp_path, upstream):
    source = data.SOURCES["kernelbench"]
    path = f"/{source.repo}/{source.commit}/KernelBench/level1/19_ReLU.py"
    upstream.corrupt[path] = upstream.files[path].replace(b"torch.relu", b"torch.tanh")
    dest = tmp_path / "kernelbench"
    with pytest.raises(data.ChecksumError, match=r"checksum mismatch for http://.*19_ReLU\.py"):
        _fetch(dest, upstream)
    assert not dest.exists()
    staging = tmp_path / ".kernelbench.fetch"
    assert not (staging / "downloads" / "kernelbench" / "KernelBench" / "level1" / "19_ReLU.py").exists()
    assert _leftovers(staging) == []


def test_a_corrupted_leaderboard_is_refused_then_refetched(tmp_path, upstream, files, shared):
    source = data.SOURCES["leaderboard"]
    path = f"/{source.repo}/{source.commit}/docs/assets/raw_data.json"
    upstream.corrupt[path] = upstream.files[path].replace(b'"torch_speedup":0.', b'"torch_speedup":1.', 1)
    dest = tmp_path / "kernelbench"
    with pytest.raises(data.ChecksumError, match="checksum mismatch for leaderboard_kernels.jsonl"):
        _fetch(dest, upstream)
    assert not dest.exists()
    staging = tmp_path / ".kernelbench.fetch"
    assert not (staging / "downloads" / "leaderboard" / "docs" / "assets" / "raw_data.json").exists()
    del upstream.corrupt[path]
    result = _fetch(dest, upstream)
    assert (result.downloaded, result.reused) == (1, len(files) - 1)
    assert upstream.requests[len(files):] == [path]
    assert _tree(dest) == _tree(shared)


def test_an_interrupted_fetch_resumes(tmp_path, upstream, files, shared):
    dest = tmp_path / "kernelbench"
    upstream.drop_after = 40
    with pytest.raises(data.DownloadError, match="could not download http://127.0.0.1"):
        _fetch(dest, upstream)
    assert not dest.exists()
    staging = tmp_path / ".kernelbench.fetch"
    assert len([p for p in (staging / "downloads").rglob("*") if p.is_file()]) == 40
    assert _leftovers(staging) == []
    upstream.drop_after, first = None, len(upstream.requests)
    result = _fetch(dest, upstream)
    assert (result.downloaded, result.reused) == (len(files) - 40, 40)
    assert len(upstream.requests) - first == len(files) - 40  # the verified downloads are not asked for again
    assert _tree(dest) == _tree(shared)
    assert not staging.exists()


def test_the_cli_fetches_through_a_mirror_and_where_checks_it(tmp_path, upstream, shared, monkeypatch):
    monkeypatch.delenv(data.BASE_URL_ENV, raising=False)
    dest = tmp_path / "kb"
    runner = CliRunner()
    out = runner.invoke(app, ["data", "fetch", "--dir", str(dest), "--source-base-url", f"kernelbench={upstream.url}",
                              "--source-base-url", f"leaderboard={upstream.url}"])
    assert out.exit_code == 0, out.output
    assert "ScalingIntelligence/KernelBench at 423217d9fda91e0c2d67e4a43bf62f96f6d104f1" in out.output
    assert _tree(dest) == _tree(shared)
    where = runner.invoke(app, ["data", "where", "--kernelbench-dir", str(dest)])
    assert where.exit_code == 0 and where.output.count(" ok ") == len(data.TARGETS), where.output
    path_only = runner.invoke(app, ["data", "where", "--path-only", "--kernelbench-dir", str(dest)])
    assert (path_only.exit_code, path_only.output) == (0, f"{dest}\n")
    (dest / "README.md").unlink()
    where = runner.invoke(app, ["data", "where", "--kernelbench-dir", str(dest)])
    assert where.exit_code == 1 and "missing  README.md" in where.output
    bad = runner.invoke(app, ["data", "fetch", "--dir", str(dest), "--source-base-url", "nosuch=http://x"])
    assert bad.exit_code == 2 and "unknown source 'nosuch'" in bad.output


def test_base_urls_option_then_environment_then_github(monkeypatch):
    monkeypatch.delenv(data.BASE_URL_ENV, raising=False)
    monkeypatch.delenv(f"{data.BASE_URL_ENV}_LEADERBOARD", raising=False)
    assert set(data.base_urls().values()) == {"https://raw.githubusercontent.com"}
    monkeypatch.setenv(data.BASE_URL_ENV, "http://mirror")
    monkeypatch.setenv(f"{data.BASE_URL_ENV}_LEADERBOARD", "http://lb")
    assert data.base_urls() == {"kernelbench": "http://mirror", "leaderboard": "http://lb"}
    assert data.base_urls(["http://all"]) == {"kernelbench": "http://all", "leaderboard": "http://all"}
    assert data.base_urls({"kernelbench": "http://kb"}) == {"kernelbench": "http://kb", "leaderboard": "http://lb"}
    assert data.SOURCES["kernelbench"].url("KernelBench/level1/1_a.py", "http://m/") == (
        "http://m/ScalingIntelligence/KernelBench/423217d9fda91e0c2d67e4a43bf62f96f6d104f1/KernelBench/level1/1_a.py")


# ------------------------------------------------------------------------------------------------ resolution


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """A project root with a complete fetched folder and a ``../shared/kernelbench`` beside it; no environment."""
    monkeypatch.delenv(data.KERNELBENCH_DIR_ENV, raising=False)
    root, fetched, shared = tmp_path / "proj", tmp_path / "proj" / "data" / "kernelbench", tmp_path / "shared" / "kernelbench"
    for name in data.REQUIRED_FILES:
        (fetched / name).parent.mkdir(parents=True, exist_ok=True)
        (fetched / name).write_text("")
    shared.mkdir(parents=True)
    (tmp_path / "mine").mkdir()
    return root, fetched, shared


def test_resolution_order(layout, tmp_path, monkeypatch):
    root, fetched, shared = layout
    monkeypatch.setenv(data.KERNELBENCH_DIR_ENV, str(tmp_path / "shared" / "kernelbench"))
    assert data.resolve_kernelbench_dir(tmp_path / "mine", root=root) == tmp_path / "mine"  # the option first
    assert data.resolve_kernelbench_dir("../mine", root=root) == tmp_path / "mine"  # relative to the project root
    assert data.resolve_kernelbench_dir(root=root) == shared  # then the environment
    monkeypatch.delenv(data.KERNELBENCH_DIR_ENV)
    assert data.resolve_kernelbench_dir(root=root) == fetched  # then the fetched folder, when it holds the files
    (fetched / "LICENSE").unlink()
    assert data.resolve_kernelbench_dir(root=root) == shared  # then ../shared/kernelbench
    folder, why, _ = data.locate_kernelbench_dir(root=root)
    assert (folder, why) == (shared, "beside the repository")


def test_an_absent_folder_is_one_clear_error(layout, tmp_path, monkeypatch):
    root, fetched, shared = layout
    (fetched / "LICENSE").unlink()
    shared.rmdir()
    with pytest.raises(data.KernelBenchDataNotFound, match="no KernelBench data folder.*Run `kbstudy data fetch`"):
        data.resolve_kernelbench_dir(root=root)
    assert data.resolve_kernelbench_dir(root=root, required=False) == fetched
    # a folder asked for is never replaced by a default, and its absence names the fetch too
    with pytest.raises(FileNotFoundError, match=r"not found: .*nowhere \(from --kernelbench-dir\)\. Run `kbstudy data"):
        data.resolve_kernelbench_dir(tmp_path / "nowhere", root=root)
    monkeypatch.setenv(data.KERNELBENCH_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(data.KernelBenchDataNotFound, match=r"from \$KBSTUDY_KERNELBENCH_DIR"):
        data.resolve_kernelbench_dir(root=root)


def test_a_study_reads_the_resolved_folder(layout, tmp_path, monkeypatch):
    root, fetched, shared = layout
    study_file = root / "study.yaml"
    study_file.write_text(yaml.safe_dump({"name": "t", "runs": [{
        "run": "t", "problems": "{kernelbench_dir}/kernelbench_levels_1-3.jsonl", "candidates": ["null:zeros"],
        "records": "outputs/records/t"}]}))
    assert load_study(study_file, root=root).runs[0].problems["path"] == fetched / "kernelbench_levels_1-3.jsonl"
    assert load_study(study_file, root=root, kernelbench_dir=str(tmp_path / "mine")).kernelbench_dir == tmp_path / "mine"
    (fetched / "LICENSE").unlink()
    shared.rmdir()
    with pytest.raises(FileNotFoundError, match="kbstudy data fetch"):
        load_study(study_file, root=root)
    study_file.write_text(yaml.safe_dump({"name": "t", "runs": []}))  # no runs: the folder is not needed
    assert load_study(study_file, root=root).kernelbench_dir == fetched

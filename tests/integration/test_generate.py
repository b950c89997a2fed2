"""Generation against a real loopback HTTP server: every reply kept, retries, fatal errors, resume, concurrency,
replay with no network."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest
from support.chat_server import API_KEY, API_KEY_ENV, REPO, SERVED_MODEL, Reply, error_reply, recorded

from kbstudy.generate.client import EndpointAuthError, ModelNotFoundError
from kbstudy.generate.config import ModelConfigError, load_model_config
from kbstudy.generate.prompts import extract_code, load_template, render_prompt
from kbstudy.generate.replay import replay_generations
from kbstudy.generate.run import generate_candidates
from kbstudy.generate.store import GenerationStore, GenerationStoreError
from kbstudy.harness.candidates import load_candidates

OK = recorded("vllm_ok_triton")
OK_CONTENT = OK["choices"][0]["message"]["content"]


def _generate(config_path, problems, out, **overrides):
    config = load_model_config(config_path).with_overrides(**overrides)
    return generate_candidates(problems, config, out, progress=False)


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_every_reply_kept_as_candidate_set(server, write_config, problems, tmp_path, api_key_env):
    out = tmp_path / "gen"
    summary = _generate(write_config(), problems, out)

    assert (summary.requested, summary.skipped, summary.ok) == (6, 0, 6)
    assert (summary.prompt_tokens, summary.completion_tokens) == (6 * 1187, 6 * 279)
    chat = server.chat_requests
    assert len(chat) == 6
    assert {r.authorization for r in chat} == {f"Bearer {API_KEY}"}
    assert sorted(r.body["seed"] for r in chat) == [100, 100, 100, 101, 101, 101]
    assert {(r.body["model"], r.body["temperature"], r.body["max_tokens"]) for r in chat} == {(SERVED_MODEL, 0.7, 2048)}
    for problem in problems:  # each problem's reference source went out verbatim in the user message
        assert sum(problem.source.strip() in r.body["messages"][1]["content"] for r in chat) == 2

    template = load_template("kernelbench_v1", "triton")
    rows = _lines(out / "generations.jsonl")
    assert len(rows) == 6
    by_problem = {p.problem_id: p for p in problems}
    for row in rows:
        assert row["status"] == "ok" and row["failure_reason"] is None
        assert row["reply"] == OK_CONTENT  # verbatim
        assert row["response"] == OK  # the whole body, verbatim
        assert row["usage"]["completion_tokens"] == 279 and row["finish_reason"] == "stop"
        assert row["latency_s"] > 0 and row["total_s"] >= row["latency_s"] and row["attempts"] == 1
        assert row["template_sha256"] == template.sha256
        prompt = render_prompt(template, by_problem[row["problem_id"]])
        assert row["messages"] == prompt.messages and row["prompt_sha256"] == prompt.sha256
        assert row["model_configuration"]["api_key_env"] == API_KEY_ENV
        assert row["code"] == extract_code(OK_CONTENT).code

    candidates = load_candidates(out / "candidates.jsonl")
    assert summary.candidates_path == out / "candidates.jsonl" and summary.candidates == 6
    assert sorted((c.problem_id, c.sample_id) for c in candidates) == [(p, s) for p in (1, 19, 23) for s in (0, 1)]
    for c in candidates:
        assert c.model_config == "test-coder-triton" and c.backend == "triton"
        assert c.source == extract_code(OK_CONTENT).code and "class ModelNew" in c.source
        assert c.metadata["template_sha256"] == template.sha256
        assert c.metadata["finish_reason"] == "stop" and c.metadata["usage"]["prompt_tokens"] == 1187
        assert c.metadata["samples_per_problem"] == 2
    assert {c.metadata["generation_id"] for c in candidates} == {r["generation_id"] for r in rows}

    # the key is sent, never written
    for path in out.rglob("*"):
        assert API_KEY not in path.read_text(), path


def test_rerun_resumes_without_asking_again(server, write_config, problems, tmp_path, api_key_env):
    out = tmp_path / "gen"
    config = write_config()
    _generate(config, problems, out)
    assert len(server.chat_requests) == 6

    again = _generate(config, problems, out)
    assert (again.requested, again.skipped, again.candidates) == (0, 6, 6)
    assert len(server.chat_requests) == 6  # nothing asked again
    assert len(_lines(out / "generations.jsonl")) == 6

    more = _generate(config, problems, out, samples_per_problem=3)  # a third sample per problem: only those
    assert (more.requested, more.skipped, more.candidates) == (3, 6, 9)
    assert sorted(r.body["seed"] for r in server.chat_requests[6:]) == [102, 102, 102]


def test_other_request_settings_need_another_folder(server, write_config, problems, tmp_path, api_key_env):
    out = tmp_path / "gen"
    _generate(write_config(), problems[:1], out, samples_per_problem=1)
    with pytest.raises(GenerationStoreError, match="temperature"):
        _generate(write_config(temperature=0.2), problems[:1], out, samples_per_problem=1)
    # endpoint, concurrency and retry settings may change
    _generate(write_config(concurrency=1, max_retries=0), problems[:1], out, samples_per_problem=1)
    assert len(server.chat_requests) == 1


def test_rate_limit_then_success_backs_off(server, write_config, problems, tmp_path, api_key_env):
    server.responder = lambda body, n: error_reply(429, "Rate limit reached") if n < 3 else Reply(200, OK)
    out = tmp_path / "gen"
    summary = _generate(write_config(backoff_initial_s=0.1, backoff_max_s=5), problems[:1], out,
                        samples_per_problem=1)
    assert summary.ok == 1
    times = [r.received_s for r in server.chat_requests]
    assert len(times) == 4
    gaps = [b - a for a, b in zip(times, times[1:])]
    for k, gap in enumerate(gaps):  # exponential: 0.1, 0.2, 0.4 s, minus at most 25 % jitter
        assert gap >= 0.75 * 0.1 * 2**k - 0.01, gaps
    assert gaps[2] > gaps[0]
    (row,) = _lines(out / "generations.jsonl")
    assert row["status"] == "ok" and row["attempts"] == 4
    assert len(row["retry_errors"]) == 3 and all("429" in e for e in row["retry_errors"])


def test_retry_after_header_is_honoured(server, write_config, problems, tmp_path, api_key_env):
    server.responder = lambda body, n: (error_reply(429, "slow down", {"Retry-After": "0.4"}) if n == 0
                                        else Reply(200, OK))
    _generate(write_config(backoff_initial_s=0.01, backoff_max_s=2), problems[:1], tmp_path / "gen",
              samples_per_problem=1)
    first, second = server.chat_requests
    assert second.received_s - first.received_s >= 0.39


def test_server_error_then_success(server, write_config, problems, tmp_path, api_key_env):
    server.responder = lambda body, n: error_reply(500, "CUDA out of memory on the server") if n == 0 \
        else Reply(200, OK)
    summary = _generate(write_config(), problems[:1], tmp_path / "gen", samples_per_problem=1)
    assert summary.ok == 1 and len(server.chat_requests) == 2
    (row,) = _lines(tmp_path / "gen" / "generations.jsonl")
    assert row["attempts"] == 2 and "500" in row["retry_errors"][0]


def test_request_timeout_is_retried(server, write_config, problems, tmp_path, api_key_env):
    server.responder = lambda body, n: Reply(200, OK, delay_s=1.0 if n == 0 else 0.0)
    summary = _generate(write_config(request_timeout_s=0.3), problems[:1], tmp_path / "gen", samples_per_problem=1)
    assert summary.ok == 1 and len(server.chat_requests) == 2
    (row,) = _lines(tmp_path / "gen" / "generations.jsonl")
    assert row["retry_errors"] == ["timeout"] and row["latency_s"] < 0.3 <= row["total_s"]


def test_retries_exhausted_recorded_and_asked_again(server, write_config, problems, tmp_path, api_key_env):
    server.responder = lambda body, n: error_reply(503, "overloaded")
    out = tmp_path / "gen"
    config = write_config(max_retries=2)
    summary = _generate(config, problems[:1], out, samples_per_problem=1)
    assert (summary.ok, summary.request_errors, summary.candidates_path) == (0, 1, None)
    assert len(server.chat_requests) == 3
    (row,) = _lines(out / "generations.jsonl")
    assert row["status"] == "request_error" and row["attempts"] == 3 and "3 tries" in row["failure_reason"]
    assert row["reply"] is None and len(row["retry_errors"]) == 3
    assert summary.last_request_error == row["failure_reason"]  # the console says why, without opening the store

    server.responder = lambda body, n: Reply(200, OK)
    again = _generate(config, problems[:1], out, samples_per_problem=1)
    assert (again.requested, again.ok) == (1, 1) and len(server.chat_requests) == 4
    assert [r.status for r in GenerationStore(out).records()] == ["ok"]


def test_bad_request_is_not_retried(server, write_config, problems, tmp_path, api_key_env):
    server.responder = lambda body, n: error_reply(400, "This model's maximum context length is 2048 tokens")
    summary = _generate(write_config(), problems[:1], tmp_path / "gen", samples_per_problem=1)
    assert summary.request_errors == 1 and len(server.chat_requests) == 1
    (row,) = _lines(tmp_path / "gen" / "generations.jsonl")
    assert "maximum context length" in row["failure_reason"]


def test_bad_key_is_a_clear_error(server, write_config, problems, tmp_path, monkeypatch):
    monkeypatch.setenv(API_KEY_ENV, "sk-wrong-key-0000")
    out = tmp_path / "gen"
    with pytest.raises(EndpointAuthError) as info:
        _generate(write_config(), problems, out)
    message = str(info.value)
    assert API_KEY_ENV in message and "401" in message and "sk-wrong-key-0000" not in message
    assert not (out / "generations.jsonl").exists()  # a configuration error is not a sample's outcome

    monkeypatch.delenv(API_KEY_ENV)
    # requests already on the wire when the 401 cancelled the batch may reach the (threaded) server a little later:
    # count once the server has seen nothing new for 0.3 s (under load, `make test` once saw one arrive late)
    asked, deadline = -1, time.monotonic() + 10
    while asked != len(server.requests) and time.monotonic() < deadline:
        asked = len(server.requests)
        time.sleep(0.3)
    with pytest.raises(ModelConfigError, match=API_KEY_ENV):
        _generate(write_config(), problems, out)
    assert len(server.requests) == asked  # nothing sent without a key


def test_unknown_model_is_a_clear_error(server, write_config, problems, tmp_path, api_key_env):
    with pytest.raises(ModelNotFoundError) as info:
        _generate(write_config(model="no-such/model"), problems, tmp_path / "gen")
    message = str(info.value)
    assert "no-such/model" in message and "404" in message and SERVED_MODEL in message
    assert any(r.path == "/v1/models" for r in server.requests)

    with pytest.raises(ModelNotFoundError, match="base_url"):  # a base_url without /v1
        _generate(write_config(base_url=server.base_url[:-3]), problems, tmp_path / "gen2")


def test_replies_without_usable_code_are_generation_failures(server, write_config, problems, tmp_path, api_key_env):
    replies = {100: Reply(200, recorded("vllm_no_code")), 101: Reply(200, recorded("vllm_truncated")),
               102: Reply(200, "<html><body>502 Bad Gateway</body></html>"),
               103: Reply(200, {"id": "x", "object": "chat.completion"}),
               104: Reply(200, OK)}
    server.responder = lambda body, n: replies[body["seed"]]
    out = tmp_path / "gen"
    config = write_config()
    summary = _generate(config, problems[:1], out, samples_per_problem=5)
    assert (summary.ok, summary.generation_failures, summary.request_errors) == (1, 4, 0)
    rows = {r["sample_id"]: r for r in _lines(out / "generations.jsonl")}
    assert len(rows) == 5
    assert rows[0]["status"] == "generation_failure" and rows[0]["failure_reason"] == "no fenced code block"
    assert rows[0]["reply"] == recorded("vllm_no_code")["choices"][0]["message"]["content"]
    assert rows[1]["failure_reason"].startswith("unterminated code block") and "max_tokens" in rows[1]["failure_reason"]
    assert rows[1]["finish_reason"] == "length" and rows[1]["usage"]["completion_tokens"] == 2048
    assert rows[2]["failure_reason"] == "malformed response: response body is not JSON"
    assert rows[2]["response"] == "<html><body>502 Bad Gateway</body></html>"  # kept verbatim
    assert rows[3]["failure_reason"] == "malformed response: response has no choices"
    assert rows[4]["status"] == "ok"
    assert all(rows[s]["code"] is None for s in range(4))
    assert [(c.sample_id, c.problem_id) for c in load_candidates(out / "candidates.jsonl")] == [(4, 1)]

    again = _generate(config, problems[:1], out, samples_per_problem=5)  # failures are final: not asked again
    assert again.requested == 0 and len(server.chat_requests) == 5


def test_concurrency_limit_honoured(server, write_config, problems, tmp_path, api_key_env):
    server.responder = lambda body, n: Reply(200, OK, delay_s=0.15)
    started = time.perf_counter()
    summary = _generate(write_config(concurrency=3), problems[:1], tmp_path / "gen", samples_per_problem=8)
    elapsed = time.perf_counter() - started
    assert summary.ok == 8
    assert server.max_in_flight == 3  # never more than the limit, and the limit is used
    assert elapsed >= 3 * 0.15  # ceil(8 / 3) rounds


def test_replay_rebuilds_candidates_without_network(server, write_config, problems, tmp_path, api_key_env,
                                                    monkeypatch):
    server.responder = lambda body, n: Reply(200, recorded("vllm_no_code") if body["seed"] == 101 else OK)
    out = tmp_path / "gen"
    _generate(write_config(), problems, out)
    stored = load_candidates(out / "candidates.jsonl")
    server.stop()

    def no_network(*args, **kwargs):
        raise AssertionError("replay tried to open a connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    result = replay_generations(out, tmp_path / "replayed.jsonl", problems=problems)
    assert (result.records, len(result.candidates), result.generation_failures, result.request_errors) == (6, 3, 3, 0)
    assert (result.code_mismatches, result.problem_mismatches, result.prompt_mismatches) == ([], [], [])
    replayed = load_candidates(tmp_path / "replayed.jsonl")
    key = lambda c: (c.level, c.problem_id, c.sample_id)  # noqa: E731
    assert [(key(c), c.sha256, c.model_config, c.backend, c.metadata) for c in sorted(replayed, key=key)] == \
        [(key(c), c.sha256, c.model_config, c.backend, c.metadata) for c in sorted(stored, key=key)]

    # a problem whose source changed since the generation is reported
    changed = [p if p.problem_id != 19 else type(p)(**{**p.__dict__, "sha256": "0" * 64}) for p in problems]
    assert len(replay_generations(out, problems=changed).problem_mismatches) == 2


def test_replay_needs_no_openai_package(server, write_config, problems, tmp_path, api_key_env):
    out = tmp_path / "gen"
    _generate(write_config(), problems[:1], out, samples_per_problem=1)
    script = (
        "import sys, socket\n"
        "sys.modules['openai'] = None\n"  # any import of openai fails
        "def refuse(*a, **k): raise OSError('network disabled')\n"
        "socket.socket.connect = refuse\n"
        "from kbstudy.generate.replay import replay_generations\n"
        f"r = replay_generations({str(out)!r}, {str(tmp_path / 'c.jsonl')!r})\n"
        "print(len(r.candidates))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
    assert load_candidates(tmp_path / "c.jsonl")[0].sha256 == load_candidates(out / "candidates.jsonl")[0].sha256

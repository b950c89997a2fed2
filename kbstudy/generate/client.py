"""A client for any OpenAI-compatible chat-completions endpoint (hosted APIs, vLLM, SGLang, Ollama).

Transport and error classes are the official ``openai`` package's (:class:`openai.AsyncOpenAI`); the retry policy is
kbstudy's own, so that every try is counted and recorded and the delays come from the model configuration:

* retried, up to ``max_retries`` times with exponential backoff (``backoff_initial_s * 2**k``, capped at
  ``backoff_max_s``, minus up to 25 % jitter) or the server's ``Retry-After`` when it sends one (capped the same):
  :class:`openai.RateLimitError` (429), :class:`openai.InternalServerError` (5xx), 408 and 409 statuses,
  :class:`openai.APIConnectionError` and :class:`openai.APITimeoutError` (``request_timeout_s`` exceeded);
* fatal for the whole run (raised at once): :class:`openai.AuthenticationError` (401) and
  :class:`openai.PermissionDeniedError` (403) as :class:`EndpointAuthError`; :class:`openai.NotFoundError` (404) as
  :class:`ModelNotFoundError`, whose message lists the models the endpoint serves;
* failed for this request only (:class:`RequestFailedError`, recorded as a ``request_error`` and asked again on the
  next run): any other 4xx status, and a retryable error that outlived its retries.

The ``openai`` client's own retries are switched off (``max_retries=0``) so that these rules are the only ones.
A reply whose body is not a chat completion (not JSON, no ``choices``) is returned, verbatim, with ``malformed`` set:
it is a reply, and is kept.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import json
import random
import time
from typing import Any

try:
    import openai
except ImportError:  # the generate extra: absent on the GPU image, where candidates are only replayed and evaluated
    openai = None

from kbstudy.generate.config import ModelConfig

#: HTTP statuses retried besides 429 and 5xx (request timeout, conflict), as the openai package does.
_RETRY_STATUSES = {408, 409}


class EndpointError(RuntimeError):
    """A problem with the endpoint or its configuration that no retry can fix; stops the run."""


class EndpointAuthError(EndpointError):
    """The endpoint refused the API key (401) or the key may not use this model (403)."""


class ModelNotFoundError(EndpointError):
    """The endpoint answered 404: an unknown model name, or a ``base_url`` that is not an OpenAI-compatible API."""


class RequestFailedError(RuntimeError):
    """One request failed for good: a non-retryable 4xx status, or a retryable error after every retry.

    Attributes:
        attempts: how many times the request was sent.
        errors: one short description per failed try, in order.
        status_code: the last HTTP status, or ``None`` for a connection error or timeout.
    """

    def __init__(self, message: str, *, attempts: int, errors: list[str], status_code: int | None):
        super().__init__(message)
        self.attempts = attempts
        self.errors = errors
        self.status_code = status_code


@dataclasses.dataclass
class Completion:
    """One reply of the endpoint.

    Attributes:
        reply: the assistant message's ``content`` (``None`` if the body has none).
        finish_reason: the first choice's ``finish_reason`` (``"stop"``, ``"length"``, ...) or ``None``.
        usage: the body's ``usage`` (``prompt_tokens``, ``completion_tokens``, ``total_tokens``, ...) or ``None``.
        response: the response body verbatim: the parsed JSON object, or the raw text if it is not JSON.
        response_id: the body's ``id``, if any.
        response_model: the model name the endpoint reports, if any.
        latency_s: seconds from sending the successful try to reading its whole body.
        total_s: seconds from the first try to the reply, backoff included.
        attempts: tries sent (1 + retries).
        retry_errors: one short description per failed try before the successful one.
        malformed: why the body is not a usable chat completion, else ``None``.
    """

    reply: str | None
    finish_reason: str | None
    usage: dict | None
    response: Any
    response_id: str | None
    response_model: str | None
    latency_s: float
    total_s: float
    attempts: int
    retry_errors: list[str]
    malformed: str | None = None


def backoff_delay(retry: int, config: ModelConfig, retry_after_s: float | None = None,
                  rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number ``retry`` (0 for the first retry).

    ``min(backoff_initial_s * 2**retry, backoff_max_s)`` reduced by a random 0-25 % (so that concurrent requests
    spread out); a server's ``Retry-After`` of ``retry_after_s`` seconds replaces it, capped at ``backoff_max_s``.
    """
    if retry_after_s is not None and retry_after_s >= 0:
        return min(retry_after_s, config.backoff_max_s)
    base = min(config.backoff_initial_s * (2.0 ** min(retry, 60)), config.backoff_max_s)
    return base * (1.0 - 0.25 * (rng or random).random())


def _retry_after_s(response) -> float | None:
    """The ``Retry-After``/``retry-after-ms`` header of an error response in seconds, or ``None``."""
    if response is None:
        return None
    headers = response.headers
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return None if parsed is None else max(0.0, parsed.timestamp() - time.time())


def _describe(exc: Exception) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {_error_message(exc)}"
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    return f"{type(exc).__name__}: {exc}"


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:300]
        if isinstance(inner, str):
            return inner[:300]
    return str(exc.message)[:300]


def parse_chat_completion(text: str) -> tuple[Any, dict]:
    """Read a chat-completions response body.

    Returns ``(response, fields)``: ``response`` is the parsed JSON (or ``text`` itself if it is not JSON);
    ``fields`` holds ``reply``, ``finish_reason``, ``usage``, ``response_id``, ``response_model`` and ``malformed``
    (``None``, or why the body is not a chat completion with a message).
    """
    fields: dict[str, Any] = {"reply": None, "finish_reason": None, "usage": None, "response_id": None,
                              "response_model": None, "malformed": None}
    try:
        body = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        fields["malformed"] = "response body is not JSON"
        return text, fields
    if not isinstance(body, dict):
        fields["malformed"] = "response body is not a JSON object"
        return body, fields
    fields["response_id"] = body.get("id") if isinstance(body.get("id"), str) else None
    fields["response_model"] = body.get("model") if isinstance(body.get("model"), str) else None
    usage = body.get("usage")
    fields["usage"] = usage if isinstance(usage, dict) else None
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        fields["malformed"] = "response has no choices"
        return body, fields
    choice = choices[0]
    fields["finish_reason"] = choice.get("finish_reason")
    message = choice.get("message")
    if not isinstance(message, dict):
        fields["malformed"] = "first choice has no message"
        return body, fields
    content = message.get("content")
    if isinstance(content, list):  # content parts: keep the text parts, in order
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if content is not None and not isinstance(content, str):
        fields["malformed"] = f"message content is a {type(content).__name__}, not text"
        return body, fields
    fields["reply"] = content
    return body, fields


class ChatClient:
    """Chat-completions requests for one model configuration; use as ``async with ChatClient(...) as client``.

    Args:
        config: the model configuration (endpoint, model, sampling settings, timeouts, retry policy).
        api_key: the key to send (from :func:`kbstudy.generate.config.resolve_api_key`); kept in memory only.
    """

    def __init__(self, config: ModelConfig, api_key: str):
        if openai is None:
            raise ModuleNotFoundError("generating candidates needs the openai package: pip install 'kbstudy[generate]'")
        self.config = config
        self._client = openai.AsyncOpenAI(base_url=config.base_url, api_key=api_key, max_retries=0,
                                          timeout=config.request_timeout_s)
        self._rng = random.Random()

    async def __aenter__(self) -> "ChatClient":
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()

    def request_body(self, messages: list, seed: int | None = None) -> dict[str, Any]:
        """The request's fields besides ``messages`` and ``extra_body`` (and never the key): model, sampling, seed."""
        body: dict[str, Any] = {"model": self.config.model, "temperature": self.config.temperature,
                                "max_tokens": self.config.max_tokens}
        if self.config.top_p is not None:
            body["top_p"] = self.config.top_p
        if seed is not None:
            body["seed"] = seed
        return body

    async def served_models(self) -> list[str] | None:
        """The model ids the endpoint lists at ``GET /models``, or ``None`` if it cannot list them."""
        try:
            page = await self._client.models.list()
            return sorted(m.id for m in page.data)
        except (openai.OpenAIError, AttributeError, TypeError):
            return None

    async def complete(self, messages: list, *, seed: int | None = None) -> Completion:
        """Send one chat-completions request, retrying as the module docstring says.

        Args:
            messages: the chat messages (``[{"role": ..., "content": ...}, ...]``).
            seed: the request's seed, or ``None`` to send none.

        Returns the :class:`Completion` (possibly ``malformed``: it is still a reply).

        Raises:
            EndpointAuthError: 401 or 403.
            ModelNotFoundError: 404.
            RequestFailedError: another 4xx status, or retries exhausted.
        """
        settings = self.request_body(messages, seed)
        extra_body = dict(self.config.extra_body) or None
        errors: list[str] = []
        started = time.perf_counter()
        for attempt in range(self.config.max_retries + 1):
            sent = time.perf_counter()
            try:
                raw = await self._client.chat.completions.with_raw_response.create(
                    messages=messages, extra_body=extra_body, **settings)
                text = raw.http_response.text
            except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
                raise EndpointAuthError(self._auth_message(exc)) from None
            except openai.NotFoundError as exc:
                raise ModelNotFoundError(await self._not_found_message(exc)) from None
            except (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError,
                    openai.APIStatusError) as exc:
                status = getattr(exc, "status_code", None)
                retryable = not isinstance(exc, openai.APIStatusError) or status == 429 or status >= 500 or \
                    status in _RETRY_STATUSES
                errors.append(_describe(exc))
                if not retryable:
                    raise RequestFailedError(f"{self.config.model}: request rejected ({errors[-1]})",
                                             attempts=attempt + 1, errors=errors, status_code=status) from None
                if attempt == self.config.max_retries:
                    raise RequestFailedError(
                        f"{self.config.model}: no reply after {attempt + 1} tries (last: {errors[-1]})",
                        attempts=attempt + 1, errors=errors, status_code=status) from None
                response = getattr(exc, "response", None)
                await asyncio.sleep(backoff_delay(attempt, self.config, _retry_after_s(response), self._rng))
                continue
            done = time.perf_counter()
            response, fields = parse_chat_completion(text)
            return Completion(latency_s=done - sent, total_s=done - started, attempts=attempt + 1,
                              retry_errors=errors, response=response, **fields)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _auth_message(self, exc: openai.APIStatusError) -> str:
        key_from = (f"the key in ${self.config.api_key_env}" if self.config.api_key_env
                    else "no key (api_key_env is null)")
        what = "refused" if exc.status_code == 401 else "does not allow"
        return (f"{self.config.base_url} {what} {key_from} (HTTP {exc.status_code}: {_error_message(exc)}); "
                f"check the key, or api_key_env in {self.config.source or self.config.name}")

    async def _not_found_message(self, exc: openai.APIStatusError) -> str:
        served = await self.served_models()
        if served is None:
            hint = (f"{self.config.base_url}/models does not list models either: is base_url right "
                    f"(an OpenAI-compatible API, usually ending in /v1)?")
        elif self.config.model in served:
            hint = f"the endpoint lists {self.config.model!r} but its chat-completions route answered 404"
        else:
            hint = f"models served there: {served}"
        return (f"model {self.config.model!r} not found at {self.config.base_url} "
                f"(HTTP 404: {_error_message(exc)}); {hint}")

"""Prompts in KernelBench's style, and the code taken back out of a reply.

A prompt template is a versioned folder under ``kbstudy/generate/templates/`` (``kernelbench_v1``, ...): a system
message, a user message, per-backend notes and a one-shot example (an architecture and its ``ModelNew`` for each
target backend), all written for kbstudy. A template is never edited once released; a change is a new folder. The
SHA-256 of the files a backend uses (:attr:`PromptTemplate.sha256`) goes on every generation and candidate, and so
does the SHA-256 of each rendered prompt.

Code extraction (:func:`extract_code`): the reply's reasoning (``<think>...</think>``) is set aside, then the last
fenced code block that defines ``class ModelNew`` is the candidate's source. A reply with no such block, or whose
block is cut off before its closing fence, yields no code: a *generation failure*. Whether the code compiles is the
evaluator's question, not this module's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import string
from pathlib import Path

from kbstudy.generate.config import TARGET_BACKENDS
from kbstudy.harness.problems import Problem, sha256_text

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
#: How each target backend is named in the prompt.
BACKEND_NAMES = {"triton": "Triton", "cuda": "CUDA"}


class PromptTemplateError(ValueError):
    """An unknown template, a template without files for a backend, or a template with unfilled placeholders."""


@dataclasses.dataclass(frozen=True)
class PromptTemplate:
    """A prompt template for one target backend.

    Attributes:
        name: the template's folder name, e.g. ``"kernelbench_v1"``.
        backend: ``"triton"`` or ``"cuda"``.
        files: file name -> text, the files this backend uses.
        sha256: SHA-256 (hex) of the name-sorted files (each as ``name\\0text\\0``); identifies the template version.
    """

    name: str
    backend: str
    files: dict = dataclasses.field(hash=False, compare=False)
    sha256: str = ""


@dataclasses.dataclass(frozen=True)
class Prompt:
    """A rendered prompt: chat ``messages`` (``[{"role": ..., "content": ...}, ...]``) and their SHA-256."""

    messages: list
    template: str
    template_sha256: str
    sha256: str


def available_templates() -> list[str]:
    """Names of the templates shipped with kbstudy (folders under :data:`TEMPLATES_DIR`), sorted."""
    return sorted(p.name for p in TEMPLATES_DIR.iterdir() if p.is_dir() and (p / "user.txt").is_file())


def load_template(name: str, backend: str, *, templates_dir: str | Path | None = None) -> PromptTemplate:
    """Load template ``name`` for target ``backend``.

    Args:
        name: the template's folder name.
        backend: ``"triton"`` or ``"cuda"``.
        templates_dir: where templates live (default: the package's :data:`TEMPLATES_DIR`).

    Raises:
        PromptTemplateError: unknown backend or template, or a file the backend needs is missing.
    """
    if backend not in TARGET_BACKENDS:
        raise PromptTemplateError(f"unknown target backend {backend!r} (expected one of {TARGET_BACKENDS})")
    folder = Path(templates_dir) if templates_dir is not None else TEMPLATES_DIR
    folder = folder / name
    if not folder.is_dir() or "/" in name or name.startswith("."):
        known = available_templates() if templates_dir is None else []
        raise PromptTemplateError(f"unknown prompt template {name!r} (known: {known})")
    needed = ["system.txt", "user.txt", f"notes_{backend}.txt", "example_model.py", f"example_{backend}.py"]
    missing = [f for f in needed if not (folder / f).is_file()]
    if missing:
        raise PromptTemplateError(f"prompt template {name!r} has no {missing} for backend {backend!r}")
    files = {f: (folder / f).read_text() for f in sorted(needed)}
    digest = hashlib.sha256()
    for file_name, text in files.items():
        digest.update(file_name.encode() + b"\0" + text.encode() + b"\0")
    return PromptTemplate(name=name, backend=backend, files=files, sha256=digest.hexdigest())


def render_prompt(template: PromptTemplate, problem: Problem) -> Prompt:
    """The chat messages asking for a ``ModelNew`` for ``problem``: a system message and a user message holding the
    instructions, the one-shot example and the problem's reference source (verbatim).

    Raises:
        PromptTemplateError: the template has a placeholder this function does not fill.
    """
    backend = template.backend
    values = {
        "backend_name": BACKEND_NAMES[backend],
        "backend_notes": template.files[f"notes_{backend}.txt"].rstrip("\n"),
        "example_model": template.files["example_model.py"].strip("\n"),
        "example_new": template.files[f"example_{backend}.py"].strip("\n"),
        "reference_source": problem.source.strip("\n"),
    }
    messages = []
    for role, file_name in (("system", "system.txt"), ("user", "user.txt")):
        try:
            content = string.Template(template.files[file_name]).substitute(values)
        except (KeyError, ValueError) as exc:
            raise PromptTemplateError(f"template {template.name!r}, {file_name}: bad placeholder ({exc})") from exc
        messages.append({"role": role, "content": content.strip("\n")})
    return Prompt(messages=messages, template=template.name, template_sha256=template.sha256,
                  sha256=prompt_sha256(messages))


def prompt_sha256(messages: list) -> str:
    """SHA-256 (hex) of chat messages, as canonical JSON."""
    return sha256_text(json.dumps(messages, sort_keys=True, ensure_ascii=False))


# -------------------------------------------------------------------------------------------------- code extraction

_OPEN_FENCE_RE = re.compile(r"^[ \t]{0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)[^`]*$")
_THINK_RE = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_MODELNEW_RE = re.compile(r"^\s*class\s+ModelNew\b", re.MULTILINE)
#: Info strings of blocks that can hold the module (an untagged block counts too).
_PYTHON_TAGS = {"", "python", "python3", "py"}


@dataclasses.dataclass(frozen=True)
class CodeExtraction:
    """What :func:`extract_code` found: ``code`` (``None`` if none is usable) and, then, the ``failure`` reason."""

    code: str | None
    failure: str | None = None
    blocks: int = 0


def extract_code(reply: str | None) -> CodeExtraction:
    """Take the candidate's source out of a model's reply.

    Rules, in order: text inside ``<think>...</think>`` is ignored; the fenced blocks (``` or ~~~) are found; among
    those tagged python/py or untagged, the last that defines ``class ModelNew`` (at any indentation) is returned,
    stripped of surrounding blank lines. A block whose closing fence is missing (a reply cut off by ``max_tokens``)
    is not usable.

    Returns a :class:`CodeExtraction`; its ``failure`` is one of ``"empty reply"``, ``"no fenced code block"``,
    ``"unterminated code block"`` or ``"no fenced code block defines ModelNew"``.
    """
    if reply is None or not reply.strip():
        return CodeExtraction(None, "empty reply")
    text = _THINK_RE.sub("", reply)
    blocks = _fenced_blocks(text)
    if not blocks:
        return CodeExtraction(None, "no fenced code block")
    usable = [(info, body) for info, body, term in blocks
              if term and info in _PYTHON_TAGS and _MODELNEW_RE.search(body)]
    if usable:
        return CodeExtraction(usable[-1][1].strip("\n") + "\n", None, len(blocks))
    if any(not term and _MODELNEW_RE.search(body) for _, body, term in blocks):
        return CodeExtraction(None, "unterminated code block", len(blocks))
    return CodeExtraction(None, "no fenced code block defines ModelNew", len(blocks))


def _fenced_blocks(text: str) -> list[tuple[str, str, bool]]:
    """The fenced blocks of a Markdown text as (info tag, body, terminated), in order. A block ends at a line holding
    only a fence of the same character at least as long as its opening one; one that never ends runs to the end."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _OPEN_FENCE_RE.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group("fence")
        close = re.compile(r"^[ \t]{0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$")
        body, j, terminated = [], i + 1, False
        while j < len(lines):
            if close.match(lines[j]):
                terminated = True
                break
            body.append(lines[j])
            j += 1
        blocks.append((m.group("info").lower(), "\n".join(body), terminated))
        i = j + 1
    return blocks

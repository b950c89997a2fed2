"""Prompt templates (versioned, hashed, our own one-shot examples) and code extraction from replies."""

from __future__ import annotations

import ast
import shutil

import pytest
import torch

from kbstudy.generate.prompts import (
    TEMPLATES_DIR,
    PromptTemplateError,
    available_templates,
    extract_code,
    load_template,
    render_prompt,
)
from kbstudy.harness.candidates import detect_backend


def test_template_hash_is_stable_and_per_backend():
    triton, cuda = load_template("kernelbench_v1", "triton"), load_template("kernelbench_v1", "cuda")
    assert triton.sha256 == load_template("kernelbench_v1", "triton").sha256
    assert triton.sha256 != cuda.sha256 and len(triton.sha256) == 64
    assert "kernelbench_v1" in available_templates()


def test_template_hash_changes_with_any_file(tmp_path):
    shutil.copytree(TEMPLATES_DIR / "kernelbench_v1", tmp_path / "kernelbench_v1")
    before = load_template("kernelbench_v1", "cuda", templates_dir=tmp_path).sha256
    assert before == load_template("kernelbench_v1", "cuda").sha256
    notes = tmp_path / "kernelbench_v1" / "notes_cuda.txt"
    notes.write_text(notes.read_text() + "- one more rule\n")
    assert load_template("kernelbench_v1", "cuda", templates_dir=tmp_path).sha256 != before
    # a file the cuda backend does not use leaves its hash alone
    notes.write_text(notes.read_text().replace("- one more rule\n", ""))
    (tmp_path / "kernelbench_v1" / "notes_triton.txt").write_text("changed")
    assert load_template("kernelbench_v1", "cuda", templates_dir=tmp_path).sha256 == before


def test_unknown_template_or_backend():
    with pytest.raises(PromptTemplateError, match="kernelbench_v1"):
        load_template("kernelbench_v9", "triton")
    with pytest.raises(PromptTemplateError, match="backend"):
        load_template("kernelbench_v1", "tilelang")


@pytest.mark.parametrize("backend, marker", [("triton", "@triton.jit"), ("cuda", "load_inline")])
def test_prompt_holds_reference_example_and_instructions(problems, backend, marker):
    template = load_template("kernelbench_v1", backend)
    problem = problems[1]
    prompt = render_prompt(template, problem)
    system, user = prompt.messages
    assert system["role"] == "system" and user["role"] == "user"
    assert problem.source.strip() in user["content"]
    assert user["content"].rstrip().endswith("```") and marker in user["content"]
    assert template.files[f"example_{backend}.py"].strip() in user["content"]
    assert "$" not in system["content"] + user["content"].replace(problem.source, "")  # every placeholder filled
    assert prompt.template_sha256 == template.sha256
    assert prompt.sha256 != render_prompt(template, problems[0]).sha256


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_one_shot_examples_are_modelnew_sources_of_their_backend(backend):
    source = (TEMPLATES_DIR / "kernelbench_v1" / f"example_{backend}.py").read_text()
    tree = ast.parse(source)
    assert "ModelNew" in {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    assert detect_backend(source) == backend
    assert extract_code(f"```python\n{source}```").code == source  # a reply like the example is usable


def test_one_shot_reference_runs():
    namespace: dict = {}
    exec((TEMPLATES_DIR / "kernelbench_v1" / "example_model.py").read_text(), namespace)  # noqa: S102
    model = namespace["Model"](*namespace["get_init_inputs"]())
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    assert torch.equal(model(x, y), torch.clamp(x * 0.5 + y, min=0))


@pytest.mark.parametrize("reply, code, failure", [
    ("Sure.\n```python\nimport torch\nclass ModelNew(nn.Module):\n    pass\n```\nDone.",
     "import torch\nclass ModelNew(nn.Module):\n    pass\n", None),
    ("```\nclass ModelNew:\n    a = 1\n```", "class ModelNew:\n    a = 1\n", None),
    ("```python\nclass ModelNew: first\n```\nbetter:\n~~~py\nclass ModelNew: second\n~~~", "class ModelNew: second\n",
     None),
    ("<think>\n```python\nclass ModelNew: draft\n```\n</think>\n```python\nclass ModelNew: final\n```",
     "class ModelNew: final\n", None),
    ("```python\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return", None,
     "unterminated code block"),
    ("```cpp\n__global__ void k() {}\n```\n```python\nx = 1\n```", None, "no fenced code block defines ModelNew"),
    ("class ModelNew(nn.Module): pass", None, "no fenced code block"),
    ("", None, "empty reply"),
    (None, None, "empty reply"),
    ("<think>```python\nclass ModelNew: only thought\n```", None, "no fenced code block"),
    ("````python\nclass ModelNew:\n    doc = '''\n```\n'''\n````", "class ModelNew:\n    doc = '''\n```\n'''\n", None),
])
def test_extract_code(reply, code, failure):
    extraction = extract_code(reply)
    assert (extraction.code, extraction.failure) == (code, failure)

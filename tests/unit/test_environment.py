"""pyproject.toml is the single source of dependencies; environment.yml, the Makefile and CI must agree with it."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_environment_yml_installs_the_project_with_its_test_extra_and_the_cpu_torch_pin():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    pip_section = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    assert "-e .[test]" in pip_section
    # no package is listed twice: everything but python/pip/torch comes from pyproject's extras
    conda_pkgs = [d for d in deps if isinstance(d, str)]
    assert {re.split(r"[=<>]", d)[0] for d in conda_pkgs} <= {"python", "pip"}
    torch_pins = [p for p in pip_section if p.startswith("torch")]
    makefile = (ROOT / "Makefile").read_text()
    assert torch_pins == [re.search(r"^TORCH_SPEC \?= (\S+)", makefile, re.M).group(1)]


def test_python_version_of_environment_satisfies_requires_python():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    major, minor = map(int, python.split("=")[1].split(".")[:2])
    floor = re.search(r">=\s*(\d+)\.(\d+)", _pyproject()["project"]["requires-python"])
    assert (major, minor) >= (int(floor.group(1)), int(floor.group(2)))


def test_user_design_card_packages_are_declared():
    project = _pyproject()["project"]
    declared = " ".join(project["dependencies"] + [d for ds in project["optional-dependencies"].values() for d in ds])
    for package in ("torch", "pandas", "seaborn", "papermill", "nbval", "jupyterlab", "pyarrow", "triton"):
        assert re.search(rf"\b{package}\b", declared), package


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    commands = re.search(r"```bash\n(.*?)```", readme, re.S).group(1).strip().splitlines()
    assert len(commands) == 2, "the README opens with exactly two commands"
    test_command = commands[1].split("#")[0].strip()
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_command in ci


def test_make_study_and_render_pass_another_kernelbench_folder_to_the_cli():
    """``make study KERNELBENCH_DIR=...`` (and ``render``) hand the folder to ``kbstudy study --kernelbench-dir``;
    without it the CLI's default applies (``make -n`` prints the commands without running them)."""
    import shutil
    import subprocess

    import pytest

    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    for target in ("study", "render"):
        given = subprocess.run(["make", "-n", target, "KERNELBENCH_DIR=/data/kb copy"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout
        assert '--kernelbench-dir "/data/kb copy"' in given, given
        default = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        assert "-m kbstudy study" in default and "--kernelbench-dir" not in default, default

"""The ``kbstudy`` command line: the Typer app, one module per command group.

* ``eval``                            -- :mod:`kbstudy.cli.evaluate`
* ``calibrate``, ``calibration-report`` -- :mod:`kbstudy.cli.calibrate`
* ``export``, ``summary``             -- :mod:`kbstudy.cli.records`
* ``study``                           -- :mod:`kbstudy.cli.study` (``make study``, ``make render``)
* ``release``, ``throughput``         -- :mod:`kbstudy.cli.release`
* ``generate``, ``replay``            -- :mod:`kbstudy.cli.generate`
* ``profile ...``                     -- :mod:`kbstudy.cli.profile`
* ``data fetch``, ``data where``       -- :mod:`kbstudy.cli.data`
* ``substitute``                      -- :mod:`kbstudy.cli.substitute`

Every module imports without the optional packages (papermill and the other notebook packages, openai): the GPU
image, which lacks them, runs ``kbstudy eval``; a command that needs one loads it when it runs.
"""

from __future__ import annotations

import typer

from kbstudy.cli.calibrate import calibrate_command, calibration_report_command
from kbstudy.cli.data import app as data_app
from kbstudy.cli.evaluate import eval_command
from kbstudy.cli.generate import generate_command, replay_command
from kbstudy.cli.profile import app as profile_app
from kbstudy.cli.records import export_command, summary_command
from kbstudy.cli.release import release_command, throughput_command
from kbstudy.cli.study import study_command
from kbstudy.cli.substitute import substitute_command

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Compile, verify and time LLM-generated GPU kernels; profile real workloads.")
app.command("eval")(eval_command)
app.command("calibrate")(calibrate_command)
app.command("calibration-report")(calibration_report_command)
app.command("export")(export_command)
app.command("summary")(summary_command)
app.command("study")(study_command)
app.command("release")(release_command)
app.command("throughput")(throughput_command)
app.command("generate")(generate_command)
app.command("replay")(replay_command)
app.command("substitute")(substitute_command)
app.add_typer(profile_app, name="profile")
app.add_typer(data_app, name="data")


def main() -> None:
    app()


if __name__ == "__main__":
    main()

"""``python -m kbstudy.generate generate|replay ...`` (the same commands as ``kbstudy generate|replay``)."""

from kbstudy.generate.cli import app

app(prog_name="python -m kbstudy.generate")

"""Example candidates written by the kbstudy authors (not by an LLM); see ``examples/triton/README.md``."""

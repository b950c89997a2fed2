"""``python -m kbstudy ...``: the same command line as ``kbstudy`` (the GPU image runs it this way, uninstalled)."""

from kbstudy.cli.app import main

if __name__ == "__main__":
    main()

"""The fraglab command line installed with the Python package: runs the executable the wheel carries."""

import os
import sys


def executable() -> str:
    """The fraglab executable inside this package (the wheel puts it in fraglab/bin)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "fraglab")


def main() -> None:
    path = executable()
    if not os.access(path, os.X_OK):
        sys.exit(f"fraglab: {path} is missing: this package was not installed from a wheel (pip install .)")
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    main()

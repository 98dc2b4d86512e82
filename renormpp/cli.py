"""The ``renormpp`` command line: ``renormpp demo [--out DIR]``."""
from __future__ import annotations

import sys


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    commands = {"demo": "run the built-in theory sweep on a synthetic teacher"}
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        print("usage: renormpp COMMAND [options]\n\ncommands:")
        for name, text in commands.items():
            print(f"  {name:10s} {text}")
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    from . import demo

    return demo.main(argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())

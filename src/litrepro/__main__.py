"""``python -m litrepro``: see :mod:`litrepro.cli`."""

from litrepro.cli import main

raise SystemExit(main())

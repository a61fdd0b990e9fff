"""``python -m litrepro.book``: build the reader's edition (see :mod:`litrepro.book`)."""

import sys

from litrepro.book import main

sys.exit(main())

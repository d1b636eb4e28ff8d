"""``python -m broker.admin ...``: the admin tools without the ``odradek`` entry point."""

import sys

from broker.admin import main

sys.exit(main())

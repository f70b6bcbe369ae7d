"""Wall-clock limits for tests that start processes, sized for a busy 2-core machine.

A limit only has to catch a hang (pytest-timeout stops any test at 600 s); on a machine
shared by many jobs, starting torch in a fresh process alone took 10-15 s, so limits of
60 s failed healthy runs. GNNFORGE_TEST_SPAWN_TIMEOUT overrides the default.
"""

from __future__ import annotations

import os

SPAWN_TIMEOUT_S = float(os.environ.get("GNNFORGE_TEST_SPAWN_TIMEOUT", "300"))
SUBPROCESS_TIMEOUT_S = SPAWN_TIMEOUT_S + 200

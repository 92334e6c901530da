from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHECK = (
    "import workflows.engine, sys; "
    "assert not any(m.split('.')[0] in {'django','celery','channels','pydantic'} "
    "for m in sys.modules), sorted(m for m in sys.modules if m.split('.')[0] in "
    "{'django','celery','channels','pydantic'})"
)


def test_importing_the_engine_loads_no_django_celery_channels_or_pydantic() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr

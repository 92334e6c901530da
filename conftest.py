"""Test-run defaults: the suite runs with DEBUG off, so it needs a throwaway secret key."""

import os

os.environ.setdefault("SECRET_KEY", "test-only-not-secret")
# Tests start the workers they need themselves.
os.environ.setdefault("EMBEDDED_WORKER", "0")

"""Test-run defaults: the suite runs with DEBUG off, so it needs a throwaway secret key."""

import os

os.environ.setdefault("SECRET_KEY", "test-only-not-secret")

"""Fixtures for the operations tests (metrics, health endpoints, logs, admin CLI)."""

import sys
from pathlib import Path

# Test helper modules beside this file (ops_helpers) import by name under --import-mode=importlib.
sys.path.insert(0, str(Path(__file__).parent))

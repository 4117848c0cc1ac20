"""``python -m imagectl``."""

from .cli import main

raise SystemExit(main())

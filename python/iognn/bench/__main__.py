"""``python -m iognn.bench``."""
from .cli import main

raise SystemExit(main())

"""``python -m iognn <command>``: the same as the ``iognn`` console command."""
from .cli import main

raise SystemExit(main())

"""``python -m shapelens`` is the ``shapelens`` command."""

from shapelens.cli.main import main

raise SystemExit(main())

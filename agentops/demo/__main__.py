"""``python -m agentops.demo --port 8000``: set Django up, then run the demo launcher.

The launcher imports the seed, which imports models, so Django must be set up before it is
imported: that order is this file's only job.
"""
import os
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentops.settings")
django.setup()

from agentops.demo.launch import main  # noqa: E402  (after django.setup(), on purpose)

sys.exit(main())

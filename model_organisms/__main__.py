"""``python -m headwatch.model_organisms``: the training child (see runner.py)."""
import sys

from headwatch.model_organisms.runner import child_main
from headwatch.processes import as_child

as_child()  # stopped by SIGTERM whatever it inherited; ends with the step that started it
sys.exit(child_main())

"""A panel's missing measurements as parallel tasks (docs/scale-out.md).

- :mod:`.tasks`: ``plan_panel`` turns the revisions the cache lacks into picklable ``MeasureTask`` objects;
  ``run_task`` is a worker's whole job and never raises.
- :mod:`.executors`: where the tasks run: a local process pool, a Ray cluster, a Slurm array
  (submitit); Ray and submitit are imported only inside their executors (optional extras).
"""

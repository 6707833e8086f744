"""Measuring inside a training loop: each checkpoint measured as it is saved, on the model training
holds, into the run's own records, under the keys the claims look up (docs/training-loop.md).

- :mod:`.trainloop`: ``TrainingProbe`` (a hand-written loop), the run's panel file, the cost bound.
- :mod:`.trainer_callback`: ``HeadwatchCallback`` for ``transformers.Trainer`` (the one module that
  imports the Trainer's callback class).
- :mod:`.heldmodel`: the model as training holds it, measured as its checkpoint loads.
- :mod:`.training_child`: ``python -m headwatch.training.training_child``, the organisms' training
  child with the in-training probe (``headwatch.model_organisms.runner.child_main``).
"""

"""headwatch: hypothesis tests for when attention circuits form during training."""
__version__ = "0.1.0"

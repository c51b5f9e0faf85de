"""The package's version: a leaf module, so that recording it imports nothing else."""

__version__ = "0.2.0"

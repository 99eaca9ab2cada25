"""The package's version, in a module that imports nothing: any module may import it
without importing the package root (whose lazy API imports everything: a hidden cycle),
the root re-exports it, and pyproject.toml reads it for the distribution's version."""

__version__ = "0.1.0"

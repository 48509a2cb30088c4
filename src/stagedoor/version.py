"""The package version, in a module of its own: the layers below the facade (stagedoor/__init__
imports them for its public names) read it from here, not from the package."""

__version__ = "0.1.0"

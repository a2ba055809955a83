"""serverlab: compare server architectures under load, against one common spec."""

__version__ = "0.1.0"

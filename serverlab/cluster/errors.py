"""The one error of a distributed run that a user meets, importable without Ray."""


class ClusterError(RuntimeError):
    """A cluster a run cannot use; the message says why, naming the node."""

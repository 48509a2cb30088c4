"""The one line the CLI prints for an outage, with the cause looked up when the error
alone does not name it.

errors.outage_line reads the exception only.  For a Cluster, a refused connect to a
dead master (or a CLUSTERDOWN) is what redis-py raises while the cause an operator
acts on is `cluster_state:fail`: ask a seed for CLUSTER INFO, and name that.
"""

from __future__ import annotations

from ..config import Settings
from . import cluster
from .errors import OUTAGE_ERRORS, cluster_not_ready, first_line, outage_line


def outage(settings: Settings, exc: BaseException) -> str:
    """'cluster not ready: ...' or 'cannot reach Redis at <url>: <why>'."""
    if (cluster.is_cluster_url(settings.redis_url) and isinstance(exc, OUTAGE_ERRORS)
            and cluster_not_ready(exc) is None):
        try:
            state = cluster.not_ready(settings)
        except Exception:  # a diagnosis, never a second error
            state = None
        if state:
            return f"cluster not ready: {state}; redis-py said: {first_line(exc)}"
    return outage_line(settings.redis_url, exc)

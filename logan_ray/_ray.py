"""Ray plumbing shared by the client, producer and consumer.

Actor errors arrive wrapped by Ray; users should see logan-ray's typed error with
its own message, so ``get`` unwraps them.
"""
from __future__ import annotations

from typing import Any

import ray

from .actors.names import NAMESPACE  # noqa: F401  (re-exported for the client side)
from .errors import LoganError, NotRunningError, RequestTimedOutError

#: A call's actor is dead, unreachable, or cannot be placed (its node is gone or drained): the
#: partition's leadership moved or is moving; the caller refreshes its route and tries again.
ACTOR_GONE = (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError,
              ray.exceptions.ActorUnschedulableError)


def get(refs: Any, timeout: float | None = None) -> Any:
    try:
        return ray.get(refs, timeout=timeout)
    except ray.exceptions.RayTaskError as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, LoganError):
            raise cause from None
        raise
    except ray.exceptions.GetTimeoutError:
        raise RequestTimedOutError(f"no answer from logan-ray within {timeout} s") from None
    except ray.exceptions.RayActorError as e:
        raise NotRunningError(f"a logan-ray actor is not available: {e}") from None

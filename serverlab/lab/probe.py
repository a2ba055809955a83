"""`python -m serverlab.lab.probe ADDRESS COUNT`: waits until a Ray cluster has COUNT live
nodes (run inside the lab's head namespace by `lab up`); exit 0 when it has, 1 if not."""

import sys
import time

import ray

from serverlab.lab.nodes import READY_TIMEOUT_S


def main() -> int:
    address, wanted = sys.argv[1], int(sys.argv[2])
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    deadline = time.monotonic() + READY_TIMEOUT_S
    alive = 0
    while time.monotonic() < deadline:
        alive = sum(1 for node in ray.nodes() if node["Alive"])
        if alive >= wanted:
            return 0
        time.sleep(0.5)
    print(f"{alive} of {wanted} Ray nodes alive after {READY_TIMEOUT_S} s", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

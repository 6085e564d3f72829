"""Low-cost proxies of a claimed candidate, computed in the agent's own process for them.

They need the model built and run forward and backward, which is exactly what an agent can
do and the API process must not (the server has no torch and must stay responsive). They
run in a fresh process after the measurement, so their allocations never reach the
measurement's memory high-water mark.
"""

from __future__ import annotations

from archvocab.registry import ArchSpec
from archvocab.wire import ProxyRequest


def compute_proxies(spec: ArchSpec, request: ProxyRequest, threads: int) -> dict[str, float]:
    """name -> value of every proxy `request` names, on its seeded random minibatch, with
    the measurement's thread count (torch's default oversubscribes a busy small device)."""
    import torch

    from proxies.inputs import ProxyInputs  # the proxies' torch side, only in this process
    from proxies.registry import get_proxy

    torch.set_num_threads(threads)
    settings = request.inputs
    inputs = ProxyInputs(
        batch_size=settings.batch_size, seq_len=settings.seq_len, seed=settings.seed
    )
    return {name: get_proxy(name).score(spec, inputs) for name in request.names}

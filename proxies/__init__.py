"""Training-free architecture scorers, by name. Pure library: values in, values out."""

from proxies.registry import PROXIES, Proxy, get_proxy

__all__ = ["PROXIES", "Proxy", "get_proxy"]

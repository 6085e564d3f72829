"""The search strategies, by the name a search request gives (`SearchCreate.strategy`).

Each is an ask/tell engine on `search.engine.Engine`, in a module named after its strategy.
A new strategy is a module here and one line in `ENGINES` (and its name in the wire's
`SearchCreate.strategy`; `tests/search/test_search_strategies.py` checks that they agree).
"""

from search.engine import Engine
from search.strategies.hwnas import SteadyStateEngine
from search.strategies.layer_scaled import LayerScaledEngine
from search.strategies.lts import LTSEngine
from search.strategies.nsga2 import NSGA2Engine

ENGINES: dict[str, type[Engine]] = {
    engine.strategy: engine
    for engine in (LTSEngine, NSGA2Engine, SteadyStateEngine, LayerScaledEngine)
}

__all__ = ["ENGINES", "LTSEngine", "LayerScaledEngine", "NSGA2Engine", "SteadyStateEngine"]

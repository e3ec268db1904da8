"""Token prices (USD per million tokens) for cost estimates; extend with `[prices]` in the config."""

from __future__ import annotations

# model -> (input, output) USD per 1M tokens, as the providers list them.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
}


def price_for(model: str, extra: dict[str, list[float]] | None = None) -> tuple[float, float] | None:
    """The (input, output) price of a model, user prices first; local models are free."""
    table: dict[str, tuple[float, float]] = {
        **DEFAULT_PRICES,
        **{k: (v[0], v[1]) for k, v in (extra or {}).items()},
    }
    if model in table:
        return table[model]
    base = model.split("/")[-1]
    return table.get(base)


def cost(prompt_tokens: int, completion_tokens: int, price: tuple[float, float] | None) -> float | None:
    if price is None:
        return None
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000

"""Order events and product references: their JSON form, a seeded generator, and the expected answer."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import asdict, dataclass

WINDOW_MS = 60_000


@dataclass(frozen=True)
class Order:
    order_id: str
    product_id: str
    quantity: int
    unit_price_cents: int
    event_time_ms: int

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()


@dataclass(frozen=True)
class Product:
    product_id: str
    name: str
    category: str

    def to_json(self) -> bytes:
        return json.dumps({"name": self.name, "category": self.category}).encode()


@dataclass(frozen=True)
class WindowTotal:
    """One row of the output table: a product's orders and revenue in one window."""

    window_start_ms: int
    product_id: str
    name: str
    category: str
    orders: int
    revenue_cents: int

    @property
    def key(self) -> str:
        return f"{self.window_start_ms}|{self.product_id}"

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "WindowTotal":
        return cls(**json.loads(data))


def generate(count: int, *, seed: int, start_ms: int, products: int = 8,
             rate_per_s: float = 20.0) -> tuple[list[Product], list[Product], list[Order]]:
    """`count` orders from `start_ms` on, in event-time order, over `products` products.

    Returns (first product versions, later versions of some products, orders): the reference topic gets
    both lists in that order, so the join must use the latest version of each product.
    """
    rng = random.Random(seed)
    categories = ["books", "garden", "kitchen", "toys"]
    first = [Product(f"p{i}", f"product {i}", rng.choice(categories)) for i in range(products)]
    renamed = [Product(p.product_id, p.name + " (v2)", rng.choice(categories))
               for p in first if rng.random() < 0.5]
    orders, clock = [], start_ms
    for n in range(count):
        clock += int(rng.expovariate(rate_per_s) * 1000)
        orders.append(Order(f"o{seed}-{n}", rng.choice(first).product_id, rng.randint(1, 5),
                            rng.choice([199, 499, 1250, 2999]), clock))
    return first, renamed, orders


def latest_products(*versions: list[Product]) -> dict[str, Product]:
    table: dict[str, Product] = {}
    for batch in versions:
        for product in batch:
            table[product.product_id] = product
    return table


def window_totals(orders: list[Order], products: dict[str, Product], *, from_ms: int | None = None,
                  to_ms: int | None = None) -> dict[str, WindowTotal]:
    """The pipeline's answer in plain Python: totals per (window, product), keyed as the output topic."""
    sums: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
    for order in orders:
        if from_ms is not None and order.event_time_ms < from_ms:
            continue
        if to_ms is not None and order.event_time_ms >= to_ms:
            continue
        slot = sums[(order.event_time_ms - order.event_time_ms % WINDOW_MS, order.product_id)]
        slot[0] += 1
        slot[1] += order.quantity * order.unit_price_cents
    totals = {}
    for (start, product_id), (n, revenue) in sums.items():
        product = products[product_id]
        total = WindowTotal(start, product_id, product.name, product.category, n, revenue)
        totals[total.key] = total
    return totals

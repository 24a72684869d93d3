"""examples/market_data's dashboard page alone in chromium: its own files served by Playwright's
routing, snapshots handed to its render() as /ws would (no server: the page's socket fails and
retries meanwhile). What the full run's browser test cannot make happen on purpose: a snapshot
that lands between a click's press and its release."""

from __future__ import annotations

from pathlib import Path

import pytest

STATIC = Path(__file__).parents[2] / "examples" / "market_data" / "static"
ORIGIN = "http://dashboard.test"
NAMES = ["AAA", "BBB", "CCC"]
TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}

pytestmark = pytest.mark.browser


def snapshot(symbol: int) -> dict:
    """A snapshot as dashboard.py's Board.snapshot makes it, of three symbols."""
    return {
        "type": "snapshot",
        "symbol": symbol,
        "series": [],
        "book": [
            [s, 10.0 + s, 10.5 + s, 10.2 + s, 10.25 + s, 100 * (s + 1), s + 1] for s in range(3)
        ],
        "bars": [],
        "stats": {"ticks": 6, "rate": 0.0, "bars": 0, "market_ms": None},
    }


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1400, "height": 900})

    def serve(route):
        path = route.request.url.removeprefix(ORIGIN)
        file = STATIC / ("index.html" if path == "/" else path.removeprefix("/static/"))
        if path != "/" and not path.startswith("/static/") or not file.is_file():
            route.fulfill(status=404, body="")
        else:
            route.fulfill(body=file.read_bytes(), content_type=TYPES[file.suffix])

    page.route(f"{ORIGIN}/**", serve)
    try:
        page.goto(f"{ORIGIN}/")
        page.evaluate("names => hello(names)", NAMES)
        page.evaluate("s => render(s)", snapshot(0))
        yield page
    finally:
        page.close()


def test_a_click_is_kept_when_a_snapshot_lands_between_press_and_release(page):
    box = page.locator("#book tbody tr[data-symbol='2']").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.evaluate("s => render(s)", snapshot(0))  # the next push, while the button is down
    page.mouse.up()
    assert page.evaluate("chosen") == 2
    assert page.input_value("#symbol") == "2" and page.inner_text("#chart-title") == "CCC"
    page.evaluate("s => render(s)", snapshot(2))
    chosen = page.eval_on_selector_all(
        "#book tbody tr.chosen", "rows => rows.map(r => r.dataset.symbol)"
    )
    assert chosen == ["2"]


def test_the_book_rows_are_kept_and_rewritten(page):
    """One row per symbol, the same element from snapshot to snapshot, its cells the newest."""
    before = page.evaluate_handle("document.querySelector(\"#book tbody tr[data-symbol='1']\")")
    later = snapshot(0)
    later["book"][1][6] = 1234
    page.evaluate("s => render(s)", later)
    assert page.evaluate("row => row.isConnected && row.cells[6].textContent", before) == "1,234"
    assert page.eval_on_selector_all("#book tbody tr", "rows => rows.length") == 3

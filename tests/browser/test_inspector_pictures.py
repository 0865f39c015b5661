"""The inspector's pictures in headless Chromium: the overview (counts, per day, importance,
pipeline health with a dead letter replayed), a user's timeline (a memory's label on hover, the
edge to its successor; zoomed onto a session), a memory's page (its history chain as a graph, its
score curve with reinforcements, its source turns) and a recall's explanation (paths, component
bars, what was cut, the prompt block).

The memories are embedded with the bundled E5 model, as the product runs by default, so that the
recall's relevance and its explanation are those a user sees (the tests' hashing embedder makes
every relevance round to 0). Each view is also saved as a screenshot: into
``CUEMEM_SCREENSHOT_DIR`` when set (the docs' images are made with
``CUEMEM_SCREENSHOT_DIR=docs/images pytest tests/browser``), else into the test's temporary
directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from shared.models import MemoryStatus, MemoryType
from shared.queues import TaskName
from shared.settings import Settings
from shared.storage import DeadLetter, HistoryEntry
from tests.support.api import ApiEnv, api_settings, running_api, seed_memory, seed_turn
from tests.support.browser import needs_browser, open_page, open_user, serve, stop

A = "tenant-a"
USER = "u-pics"


@pytest.fixture
def env(it_settings: Settings) -> Iterator[ApiEnv]:
    """The browser tests' API (tests/browser/conftest.py) with the bundled E5 model, as the product
    runs by default."""
    update = {"flower_url": "http://localhost:5555", "embedder": "e5"}
    with running_api(api_settings(it_settings).model_copy(update=update)) as env:
        yield env


def _turn(env: ApiEnv, n: int, at: datetime, content: str, session: str, role: str = "user") -> str:
    return seed_turn(env.container, A, USER, n, content, at=at, session=session, role=role)


def _seed(env: ApiEnv) -> dict[str, Any]:
    """Five days of one user's chats as the pipeline leaves them: a changed coffee preference (the
    old one superseded, the new one repeated and used), a fund asked about daily (episodes and
    the semantic memory they became), an archived fact, and one turn the pipeline gave up on."""
    c = env.container
    # The user writes from Beijing: their turns carry +08:00, and the timeline reads in it.
    beijing = timezone(timedelta(hours=8))
    day0 = (datetime.now(beijing) - timedelta(days=6)).replace(hour=9, minute=0, second=0, microsecond=0)
    at = [
        day0 + timedelta(days=d, minutes=m)
        for d, m in [(0, 0), (0, 1), (0, 5), (1, 0), (1, 2), (2, 0), (3, 0), (3, 1), (4, 0)]
    ]
    said = [
        ("我喜欢喝美式", "day-0", "user"),
        ("好的，记住了：美式。", "day-0", "assistant"),
        ("我那只基金怎么样", "day-0", "user"),
        ("我那只基金怎么样", "day-1", "user"),
        ("生产环境部署端口是8443", "work", "user"),
        ("我那只基金怎么样", "day-2", "user"),
        ("我现在改喝拿铁了", "day-3", "user"),
        ("明白，以后推荐拿铁。", "day-3", "assistant"),
        ("我现在改喝拿铁了", "day-4", "user"),
    ]
    events = [_turn(env, n, at[n], text, session, role) for n, (text, session, role) in enumerate(said)]
    old = seed_memory(
        c, A, USER, "我喜欢喝美式", status=MemoryStatus.SUPERSEDED, n=0, at=at[0], importance=6.0
    )
    new = seed_memory(c, A, USER, "我现在改喝拿铁了", n=6, at=at[6], importance=8.0)
    episodes = [
        seed_memory(c, A, USER, "我那只基金怎么样", kind=MemoryType.EPISODIC, n=n, at=at[n], importance=5.5)
        for n in (2, 3, 5)
    ]
    port = seed_memory(
        c,
        A,
        USER,
        "生产环境部署端口是8443",
        kind=MemoryType.FACT,
        status=MemoryStatus.ARCHIVED,
        n=4,
        at=at[4],
    )
    fund = seed_memory(
        c, A, USER, "用户持续关注自己持有的基金表现", kind=MemoryType.SEMANTIC, n=20, at=at[5], importance=6.5
    )
    with c.uow() as uow:
        replaced = uow.memories.get(A, USER, old.id)
        assert replaced is not None
        replaced.superseded_by, replaced.valid_to = new.id, at[6]
        uow.memories.save(replaced)
        uow.history.add(
            HistoryEntry(
                old.id, A, USER, "superseded", "coffee changed: 美式 -> 拿铁", "rules", at[6], new.id
            )
        )
        uow.history.add(
            HistoryEntry(
                new.id, A, USER, "supersedes", "coffee changed: 美式 -> 拿铁", "rules", at[6], old.id
            )
        )
        uow.history.add(
            HistoryEntry(new.id, A, USER, "reinforced", "repeated", "rules", at[8], None, events[8])
        )
        for e in episodes:
            uow.history.add(
                HistoryEntry(
                    e.id, A, USER, "consolidated_into", "3 mentions over 3 days", "rules", at[5], fund.id
                )
            )
            uow.history.add(
                HistoryEntry(fund.id, A, USER, "consolidated", "3 mentions over 3 days", "rules", at[5], e.id)
            )
        stored = uow.memories.get(A, USER, new.id)
        assert stored is not None
        stored.access_count, stored.last_accessed_at = 3, at[8] + timedelta(hours=20)
        stored.sources = [
            *stored.sources,
            {"event_id": events[8], "session_id": "day-4", "seq": 9, "at": at[8].isoformat()},
        ]
        uow.memories.save(stored)
        lost = _turn(env, 30, at[8] + timedelta(hours=1), "extraction of this turn kept failing", "day-4")
        uow.dead_letters.add(
            DeadLetter(TaskName.EXTRACT.value, "t-1", lost, [lost], "TimeoutError: the LLM did not answer", 5)
        )
        uow.commit()
    return {
        "old": old,
        "new": new,
        "fund": fund,
        "episodes": episodes,
        "port": port,
        "turns": len(said) + 1,
        "lost": lost,
    }


def _turns_drawn(page: Any) -> int:
    """Turns on the timeline: a dot each, or one mark with their count."""
    dots = page.locator("svg.timeline circle.turn").count()
    counts = page.locator("svg.timeline g.turn-cluster").evaluate_all(
        "gs => gs.reduce((n, g) => n + Number(g.dataset.count), 0)"
    )
    return int(dots + counts)


def _shot(page: Any, out: Path, name: str) -> None:
    page.screenshot(path=str(out / f"inspector-{name}.png"), full_page=True)
    assert (out / f"inspector-{name}.png").stat().st_size > 10_000


@needs_browser
def test_the_inspectors_pictures(env, browser, tmp_path):
    out = Path(os.environ.get("CUEMEM_SCREENSHOT_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    s = _seed(env)
    served = serve(env, env.client.app)
    try:
        page, watched = open_page(browser, served.url)
        page.set_viewport_size({"width": 1280, "height": 900})
        open_user(page, env.keys[A], USER)

        # Overview: counts by type and status, memories per day, importance, the pipeline.
        page.click("#tab-overview")
        page.wait_for_selector(".stat.memories-total .stat-value")
        assert page.locator(".stat.memories-total .stat-value").inner_text() == "7"
        assert page.locator(".stat.events-total .stat-value").inner_text() == str(s["turns"])
        assert page.locator("ul.type-status li[data-key='episodic'] .bar-value").inner_text() == "3"
        assert page.locator("svg.per-day rect.col").count() == 90
        days = page.locator("svg.per-day rect.col").evaluate_all(
            "cols => cols.map(c => Number(c.dataset.value))"
        )
        assert sum(days) == 7
        assert page.locator("svg.importance rect.col").count() == 10
        letter = page.locator("table.letters tbody tr")
        assert letter.count() == 1 and "TimeoutError" in letter.inner_text()
        assert page.locator("a.flower-link").get_attribute("href") == "http://localhost:5555"
        _shot(page, out, "overview")
        letter.locator("button.replay").click()
        page.wait_for_selector("table.letters td.replayed:not(:text('—'))")
        assert "replayed" in page.locator("#notice").inner_text()
        assert [(f.task, list(f.args)) for f in env.sent if f.task == TaskName.EXTRACT.value] == [
            (TaskName.EXTRACT.value, [s["lost"]])
        ]

        # Timeline: every turn on its session's lane (turns too close to tell apart as one mark
        # with their count), the memories below, marked by status, the old coffee pointing at the
        # new one; a memory's label on hover.
        page.click("#tab-timeline")
        page.wait_for_selector("svg.timeline path.mem")
        assert _turns_drawn(page) == s["turns"]
        assert page.locator("#timeline-list li.turn-row.role-assistant").count() == 2
        assert (
            page.locator(f"svg.timeline path.mem[data-id='{s['old'].id}']").get_attribute("data-status")
            == "superseded"
        )
        assert (
            page.locator(f"svg.timeline path.mem[data-id='{s['port'].id}']").get_attribute("data-status")
            == "archived"
        )
        assert page.locator("svg.timeline line.link").count() >= 6
        successor = f"svg.timeline path.successor[data-from='{s['old'].id}'][data-to='{s['new'].id}']"
        assert page.locator(successor).count() == 1
        page.locator(f"svg.timeline path.mem[data-id='{s['old'].id}']").hover()
        page.locator("#timeline-tip").wait_for(state="visible")
        tip = page.locator("#timeline-tip").inner_text()
        assert "superseded by: 我现在改喝拿铁了" in tip and "09:00 UTC+08:00" in tip, tip
        _shot(page, out, "timeline")
        # A session zoomed onto: its turns apart, each memory labelled.
        page.locator("svg.timeline text.session-link[data-session='day-0']").click()
        assert page.locator("svg.timeline circle.turn[data-session='day-0']").count() == 3
        assert "我喜欢喝美式" in page.locator("svg.timeline text.mem-label").all_text_contents()
        whole = page.locator(".timeline-range").inner_text()
        page.click("#zoom-all")
        assert page.locator(".timeline-range").inner_text() != whole
        page.click("#zoom-in")
        page.click("#zoom-in")
        assert 0 < _turns_drawn(page) < s["turns"]
        page.click("#zoom-all")
        assert _turns_drawn(page) == s["turns"]

        # A memory's page, opened from the timeline: its chain, its score, its source turns.
        page.locator(f"svg.timeline path.mem[data-id='{s['new'].id}']").click()
        page.wait_for_selector("svg.chain-graph g.node")
        assert page.locator("#memory-page-of").inner_text() == s["new"].id
        nodes = page.locator("svg.chain-graph g.node")
        assert {nodes.nth(i).get_attribute("data-id") for i in range(nodes.count())} == {
            s["old"].id,
            s["new"].id,
        }
        edge = page.locator("svg.chain-graph path.edge")
        assert edge.count() == 1 and edge.get_attribute("data-label") == "superseded by"
        assert (edge.get_attribute("data-from"), edge.get_attribute("data-to")) == (s["old"].id, s["new"].id)
        assert page.locator("svg.score-curve path.series").count() == 1
        assert page.locator("svg.score-curve circle.marker.repeat").count() == 1
        assert page.locator("svg.score-curve circle.marker.recall").count() == 1
        assert page.locator("ol.source-turns li").count() == 2
        _shot(page, out, "memory")
        # The consolidated memory's chain: its three episodes point at it.
        page.click("#tab-memories")
        page.locator(f"article.memory[data-id='{s['fund'].id}'] .act-page").click()
        page.wait_for_selector(f"svg.chain-graph g.node.focus[data-id='{s['fund'].id}']")
        assert page.locator("svg.chain-graph path.edge[data-label='consolidated into']").count() == 3
        _shot(page, out, "memory-consolidated")

        # A recall explained: paths, component bars, the floor and the budget, the prompt block.
        page.click("#tab-recall")
        page.fill("#query", "我现在喝什么咖啡？")
        page.fill("#recall-budget", "200")
        page.click("#run-recall")
        first = page.locator("#recall-result .recall-item").first
        first.wait_for()
        assert first.get_attribute("data-id") == s["new"].id
        # The relevance a user sees: the model's, on the bundled model's cosines (not a hash's 0).
        relevance = first.locator(".components li[data-key='relevance'] .bar-value").inner_text()
        assert float(relevance) >= 0.001, relevance
        assert first.locator("ul.paths-found li").count() >= 1
        assert first.locator(".components li[data-key='cue_score']").count() == 1
        floor_text = page.locator("#recall-result .floor-cut").inner_text()
        assert floor_text.startswith("The relevance floor (minimum relevance "), floor_text
        # What the floor left out is listed below the cut, never "left out nothing" beside it.
        below = page.locator("#recall-result ol.below-cut li.below-item")
        assert ("left out nothing" in floor_text) == (below.count() == 0)
        assert first.locator("dd.moved-by").count() == 1
        assert page.locator("#recall-result .budget-cut").inner_text().startswith("Budget 200 tokens: kept")
        assert "我现在改喝拿铁了" in page.locator("#recall-result pre.prompt-block").inner_text()
        _shot(page, out, "recall")

        assert page.locator("img").count() == 0
        watched.clean()
    finally:
        stop(served)

"""The memory list and a memory's page show every time in the user's zone, in headless Chromium:
u1 writes from Beijing (+08:00), u10 from New York in winter (-05:00), and the browser is set to
New York in October (-04:00), so neither UTC, nor the browser's zone, nor the other user's zone
passes for the user's. Times are named with their zone.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from shared.models import Memory, MemoryType
from tests.support.api import ApiEnv, seed_memory, seed_turn
from tests.support.browser import needs_browser, open_page, open_user, serve, stop

A = "tenant-a"
BEIJING = timezone(timedelta(hours=8))
NEW_YORK_WINTER = timezone(timedelta(hours=-5))
TOLD = datetime(2026, 10, 5, 20, 3, tzinfo=BEIJING)  # 12:03 UTC
LATE = datetime(2026, 10, 6, 1, 30, tzinfo=BEIJING)  # 17:30 UTC the day before
U10_TOLD = datetime(2026, 10, 5, 21, 0, tzinfo=NEW_YORK_WINTER)  # 02:00 UTC the day after


def _turn(env: ApiEnv, user: str, n: int, at: datetime, content: str, role: str = "user") -> None:
    seed_turn(env.container, A, user, n, content, at=at, role=role)


def _seed(env: ApiEnv) -> dict[str, Memory]:
    c = env.container
    _turn(env, "u1", 0, TOLD, "下周三下午三点要去医院复查")
    _turn(env, "u1", 1, TOLD + timedelta(minutes=1), "我会提醒你。", role="assistant")
    _turn(env, "u1", 2, LATE, "我喜欢喝美式")
    _turn(env, "u10", 0, U10_TOLD, "dentist on Friday at 9am")
    task = seed_memory(c, A, "u1", "下周三下午三点要去医院复查", kind=MemoryType.TASK, n=0, at=TOLD)
    coffee = seed_memory(c, A, "u1", "我喜欢喝美式", n=2, at=LATE)
    dentist = seed_memory(c, A, "u10", "dentist on Friday at 9am", kind=MemoryType.TASK, n=0, at=U10_TOLD)
    with c.uow() as uow:
        stored = uow.memories.get(A, "u1", task.id)
        assert stored is not None
        stored.due_at = datetime(2026, 10, 14, 15, 0, tzinfo=BEIJING)  # 07:00 UTC
        uow.memories.save(stored)
        uow.commit()
    return {"task": task, "coffee": coffee, "dentist": dentist}


def _card(page: Any, memory: Memory) -> Any:
    card = page.locator(f"article.memory[data-id='{memory.id}']")
    card.wait_for()
    return card


@needs_browser
def test_memory_list_and_page_show_times_in_the_users_zone(env, browser):
    from playwright.sync_api import expect

    m = _seed(env)
    served = serve(env, env.client.app)
    try:
        page, watched = open_page(browser, served.url, timezone_id="America/New_York")
        open_user(page, env.keys[A], "u1")

        # The list: validity, creation, due time and sources in Beijing time, named.
        task = _card(page, m["task"])
        assert task.locator("dd.valid-from").inner_text() == "2026-10-05 20:03 UTC+08:00"
        assert task.locator("dd.created").inner_text() == "2026-10-05 20:03 UTC+08:00"
        assert task.locator("dd.due").inner_text() == "2026-10-14 15:00 UTC+08:00"
        task.locator("details.sources summary").click()
        assert "at 2026-10-05 20:03 UTC+08:00" in task.locator("details.sources").inner_text()
        # Said after midnight in Beijing: the Beijing day, not UTC's day before.
        coffee = _card(page, m["coffee"])
        assert coffee.locator("dd.valid-from").inner_text() == "2026-10-06 01:30 UTC+08:00"
        assert "UTC+08:00, the user's zone" in page.locator("#memory-zone").inner_text()

        # The history table of the list.
        task.locator(".act-history").click()
        created = page.locator("#history-body tr[data-action='created'] td.at")
        expect(created).to_have_text("2026-10-05 20:03 UTC+08:00")

        # The memory's page: its validity, due time, source turn and history in Beijing time.
        task.locator(".act-page").click()
        summary = page.locator(f"#memory-page-body .memory-summary[data-id='{m['task'].id}']")
        summary.wait_for()
        assert summary.locator("dd.valid-from").inner_text() == "2026-10-05 20:03 UTC+08:00"
        assert summary.locator("dd.due").inner_text() == "2026-10-14 15:00 UTC+08:00"
        assert "UTC+08:00, the user's zone" in page.locator("#memory-page-body .page-zone").inner_text()
        turn_at = page.locator("#memory-page-body .source-turns .turn-at").inner_text()
        assert "2026-10-05 20:03 UTC+08:00" in turn_at, turn_at
        history_at = page.locator("#memory-page-body table.entries tr[data-action='created'] td.at")
        assert history_at.inner_text() == "2026-10-05 20:03 UTC+08:00"
        # The score curve of the memory told after midnight in Beijing: its axis starts on that
        # Beijing day (UTC's is the day before).
        page.click("#tab-memories")
        coffee.locator(".act-page").click()
        page.locator(f"#memory-page-body .memory-summary[data-id='{m['coffee'].id}']").wait_for()
        ticks = page.locator("#memory-page-body svg.score-curve text.tick").all_text_contents()
        dates = [t for t in ticks if t.startswith("2026-")]
        assert dates and dates[0] == "2026-10-06", ticks

        # u10 (a user whose id extends u1's) is read in their own zone, not u1's nor the browser's.
        page.click("#tab-memories")
        page.locator("#user-list button[data-user='u10']").click()
        dentist = _card(page, m["dentist"])
        assert dentist.locator("dd.valid-from").inner_text() == "2026-10-05 21:00 UTC−05:00"
        assert "UTC−05:00, the user's zone" in page.locator("#memory-zone").inner_text()
        assert page.locator(f"article.memory[data-id='{m['task'].id}']").count() == 0
        watched.clean()
    finally:
        stop(served)

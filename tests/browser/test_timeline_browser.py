"""The inspector's timeline read at any range, in headless Chromium: eight weeks of a user who
writes from Beijing (+08:00), read in a browser set to New York, with nothing in the middle weeks.

One test per guarantee: a session's turns minutes apart are one mark with their count over eight
weeks and spread apart once zoomed onto the session; a superseded memory has an edge to its
successor; every mark has a label on hover and on keyboard focus; "Zoom in" keeps data in view;
every time (axis, labels, list) is in the user's zone, or the browser's when none of the turns is
the user's. A user whose id extends this one's ("u1", "u10") has turns in the empty weeks: none
of them shows.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

from shared.models import Memory, MemoryStatus, MemoryType
from tests.support.api import ApiEnv, seed_memory, seed_turn
from tests.support.browser import needs_browser, open_page, open_user, serve, stop

A = "tenant-a"
USER, OTHER = "u1", "u10"
BEIJING = timezone(timedelta(hours=8))
XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
DAY0 = datetime(2026, 10, 5, 20, 3, tzinfo=BEIJING)  # a Monday evening in Beijing, 12:03 UTC

# (session, day, minute, role, content): five sessions in weeks 0, 1, 7 and 8, none in between.
TURNS = [
    ("w0-home", 0, 0, "user", "我住在上海浦东"),
    ("w0-home", 0, 1, "assistant", "好的，记住了。"),
    ("w0-home", 0, 3, "user", "下周三下午三点要去医院复查"),
    ("w0-home", 0, 4, "assistant", "我会提醒你。"),
    ("w0-home", 0, 6, "user", "我喜欢喝美式"),
    ("w0-home", 0, 8, "assistant", "好的，美式。"),
    ("w0-later", 3, 0, "user", "今天加班到很晚"),
    ("w0-later", 3, 2, "assistant", "辛苦了。"),
    ("w1", 7, 0, "user", "周末去爬山了"),
    ("w1", 7, 1, "assistant", "听起来不错。"),
    ("w7", 49, 0, "user", "我搬到深圳了"),
    ("w7", 49, 1, "assistant", "恭喜乔迁！"),
    ("w7", 49, 5, "user", "新家离公司很近"),
    ("w8", 56, 0, "user", "深圳的天气很好"),
    ("w8", 56, 2, "assistant", "是的，很暖和。"),
]


def _turn(env: ApiEnv, user: str, n: int, at: datetime, content: str, session: str, role: str) -> str:
    return seed_turn(env.container, A, user, n, content, at=at, session=session, role=role)


def _seed(env: ApiEnv) -> dict[str, Memory]:
    c = env.container
    at = []
    for n, (session, day, minute, role, content) in enumerate(TURNS):
        at.append(DAY0 + timedelta(days=day, minutes=minute))
        _turn(env, USER, n, at[-1], content, session, role)
    # The other user: only the host's turns, sent in UTC, in the weeks the first user left empty.
    for n in range(3):
        _turn(env, OTHER, n, DAY0 + timedelta(days=28, minutes=n), f"note {n}", "mid", "assistant")
    old = seed_memory(c, A, USER, "我住在上海浦东", kind=MemoryType.PROFILE, n=0, at=at[0])
    task = seed_memory(c, A, USER, "下周三下午三点要去医院复查", kind=MemoryType.TASK, n=2, at=at[2])
    coffee = seed_memory(c, A, USER, "我喜欢喝美式", n=4, at=at[4])
    new = seed_memory(c, A, USER, "我搬到深圳了", kind=MemoryType.PROFILE, n=10, at=at[10])
    xss = seed_memory(c, A, USER, XSS, kind=MemoryType.FACT, n=8, at=at[8])
    # As the pipeline leaves a change of home: the old value superseded, pointing at the new one.
    with c.uow() as uow:
        stored = uow.memories.get(A, USER, old.id)
        assert stored is not None
        stored.status, stored.superseded_by, stored.valid_to = MemoryStatus.SUPERSEDED, new.id, at[10]
        stored.status_reason = "home changed (rules)"
        uow.memories.save(stored)
        due = uow.memories.get(A, USER, task.id)
        assert due is not None
        due.due_at = datetime(2026, 10, 14, 15, 0, tzinfo=BEIJING)  # Wednesday next week, 3 pm
        uow.memories.save(due)
        uow.commit()
    return {"old": old, "task": task, "coffee": coffee, "new": new, "xss": xss}


def _turns_in_view(page: Any) -> int:
    """Turns drawn: a dot each, or a mark with their count."""
    dots = page.locator("svg.timeline circle.turn").count()
    counts = page.locator("svg.timeline g.turn-cluster").evaluate_all(
        "gs => gs.reduce((n, g) => n + Number(g.dataset.count), 0)"
    )
    return int(dots + counts)


def _tick_labels(page: Any) -> list[str]:
    labels: list[str] = page.locator("svg.timeline text.tick").all_text_contents()
    return labels


def _tip_after_hover(page: Any, selector: str) -> str:
    page.mouse.move(0, 0)
    if "path.successor" in selector:
        # A curve's box centre is off the curve: the pointer goes to the curve's middle.
        point = page.locator(selector).evaluate(
            """p => { const at = p.getPointAtLength(p.getTotalLength() / 2);
                      const m = p.getScreenCTM(); return [at.x * m.a + m.e, at.y * m.d + m.f]; }"""
        )
        page.mouse.move(point[0], point[1])
    else:
        page.locator(selector).hover()
    tip = page.locator("#timeline-tip")
    tip.wait_for(state="visible")
    text: str = tip.inner_text()
    return text


@contextmanager
def _timeline(env: ApiEnv, browser: Any) -> Iterator[tuple[Any, dict[str, Memory]]]:
    """u1's timeline over its whole range, in a browser set to New York; the page is clean after."""
    m = _seed(env)
    served = serve(env, env.client.app)
    try:
        page, watched = open_page(browser, served.url, timezone_id="America/New_York")
        page.set_viewport_size({"width": 1280, "height": 900})
        open_user(page, env.keys[A], USER)
        page.click("#tab-timeline")
        page.wait_for_selector("svg.timeline")
        # The whole range: every turn of u1's, none of u10's.
        ids = page.locator("#timeline-list li.turn-row").evaluate_all("rs => rs.map(r => r.dataset.eventId)")
        assert sorted(ids) == sorted(f"ev-{A}-{USER}-{n}" for n in range(len(TURNS)))
        yield page, m
        assert page.locator("img").count() == 0
        watched.clean()
    finally:
        stop(served)


@needs_browser
def test_a_sessions_turns_spread_when_zoomed_onto_it(env, browser):
    from playwright.sync_api import expect

    with _timeline(env, browser) as (page, _):
        assert _turns_in_view(page) == len(TURNS)
        # Over eight weeks the six turns of eight minutes are one mark with their count...
        cluster = page.locator("svg.timeline g.turn-cluster[data-session='w0-home']")
        assert cluster.count() == 1 and cluster.get_attribute("data-count") == "6"
        # ...on the session (its name clicked) they are six dots well apart.
        page.locator("svg.timeline text.session-link[data-session='w0-home']").click()
        dots = page.locator("svg.timeline circle.turn[data-session='w0-home']")
        expect(dots).to_have_count(6)
        xs = sorted(float(x) for x in dots.evaluate_all("cs => cs.map(c => c.getAttribute('cx'))"))
        assert min(b - a for a, b in zip(xs, xs[1:], strict=False)) >= 20, xs
        # The mark with the count zooms the same way.
        page.click("#zoom-all")
        expect(dots).to_have_count(0)
        cluster.click()
        expect(dots).to_have_count(6)


@needs_browser
def test_a_superseded_memory_has_an_edge_to_its_successor(env, browser):
    with _timeline(env, browser) as (page, m):
        edge = page.locator(
            f"svg.timeline path.successor[data-from='{m['old'].id}'][data-to='{m['new'].id}']"
        )
        assert edge.count() == 1
        assert page.locator("svg.timeline path.successor").count() == 1
        # Still there, to the chart's edge, with the successor out of view.
        page.locator("svg.timeline text.session-link[data-session='w0-home']").click()
        assert page.locator(f"svg.timeline path.mem[data-id='{m['new'].id}']").count() == 0
        assert edge.count() == 1


@needs_browser
def test_every_mark_has_a_label_on_hover_and_focus(env, browser):
    from playwright.sync_api import expect

    with _timeline(env, browser) as (page, m):
        # A memory says what it is, when it was said and what replaced it.
        old_tip = _tip_after_hover(page, f"svg.timeline path.mem[data-id='{m['old'].id}']")
        assert "profile · superseded" in old_tip and "我住在上海浦东" in old_tip
        assert "superseded by: 我搬到深圳了" in old_tip
        assert "said 2026-10-05 20:03 UTC+08:00" in old_tip
        new_tip = _tip_after_hover(page, f"svg.timeline path.mem[data-id='{m['new'].id}']")
        assert "replaced: 我住在上海浦东" in new_tip
        edge_tip = _tip_after_hover(page, "svg.timeline path.successor")
        assert "我住在上海浦东" in edge_tip and "我搬到深圳了" in edge_tip
        cluster_tip = _tip_after_hover(page, "svg.timeline g.turn-cluster[data-session='w0-home']")
        assert "6 turns" in cluster_tip and "2026-10-05 20:03 UTC+08:00" in cluster_tip
        # Markup in a memory is text in its label, run nowhere.
        xss_tip = _tip_after_hover(page, f"svg.timeline path.mem[data-id='{m['xss'].id}']")
        assert XSS in xss_tip
        assert page.evaluate("window.__xss") is None
        # Where there is room, a memory's words are beside its mark.
        labels = page.locator("svg.timeline text.mem-label").all_text_contents()
        assert "我搬到深圳了" in labels, labels
        # A turn, once its session is zoomed onto: who said what, when.
        page.locator("svg.timeline text.session-link[data-session='w8']").click()
        turn_tip = _tip_after_hover(page, f"svg.timeline circle.turn[data-event-id='ev-{A}-{USER}-13']")
        assert "session w8 #14 · user" in turn_tip and "深圳的天气很好" in turn_tip
        assert "2026-11-30 20:03 UTC+08:00" in turn_tip
        page.click("#zoom-all")
        # The keyboard: a memory mark takes focus, shows its label, and Enter opens its page.
        page.mouse.move(0, 0)
        page.locator(f"svg.timeline path.mem[data-id='{m['coffee'].id}']").focus()
        expect(page.locator("#timeline-tip")).to_contain_text("我喜欢喝美式")
        page.keyboard.press("Enter")
        expect(page.locator("#memory-page-of")).to_have_text(m["coffee"].id)


@needs_browser
def test_zoom_in_lands_on_data(env, browser):
    with _timeline(env, browser) as (page, _):
        # The middle weeks are empty, yet every step keeps turns in view, down to a session
        # whose turns are apart.
        for _ in range(12):
            page.click("#zoom-in")
            assert _turns_in_view(page) > 0, page.locator(".timeline-range").inner_text()
        assert page.locator("svg.timeline circle.turn").count() >= 2
        # Later / Earlier go to the next turns, however far.
        for button in ("#pan-later", "#pan-earlier", "#pan-earlier"):
            before = page.locator("svg.timeline").get_attribute("data-end")
            page.click(button)
            assert page.locator("svg.timeline").get_attribute("data-end") != before
            assert _turns_in_view(page) > 0, page.locator(".timeline-range").inner_text()


@needs_browser
def test_times_are_in_the_users_zone(env, browser):
    from playwright.sync_api import expect

    with _timeline(env, browser) as (page, m):
        # The first day alone (a day of the user's zone): the axis reads 20:0x (Beijing), not
        # 12:0x (UTC) nor 08:0x (this browser's New York).
        page.fill("#timeline-since", "2026-10-05")
        page.fill("#timeline-until", "2026-10-05")
        page.click("#timeline-load")
        expect(page.locator("#timeline-list details.session")).to_have_count(1)
        ticks = _tick_labels(page)
        assert ticks and all(t[-5:-3] == "20" for t in ticks), ticks
        assert "UTC+08:00, the user's zone" in page.locator(".timeline-range").inner_text()
        first_row = page.locator(f"#timeline-list li.turn-row[data-event-id='ev-{A}-{USER}-0'] .hint")
        assert first_row.text_content() == "#1 2026-10-05 20:03:00 user"
        turn_tip = _tip_after_hover(page, f"svg.timeline circle.turn[data-event-id='ev-{A}-{USER}-0']")
        assert "2026-10-05 20:03 UTC+08:00" in turn_tip and "我住在上海浦东" in turn_tip
        # A due time stored as an instant (07:00 UTC) reads as said: 15:00 in Beijing.
        task_tip = _tip_after_hover(page, f"svg.timeline path.mem[data-id='{m['task'].id}']")
        assert "due 2026-10-14 15:00 UTC+08:00" in task_tip, task_tip
        # Another zone when picked: the browser's, then UTC.
        page.select_option("#timeline-zone", "browser")
        assert all(t[-5:-3] == "08" for t in _tick_labels(page)), _tick_labels(page)
        assert "America/New_York" in page.locator(".timeline-range").inner_text()
        page.select_option("#timeline-zone", "utc")
        assert all(t[-5:-3] == "12" for t in _tick_labels(page)), _tick_labels(page)
        page.select_option("#timeline-zone", "user")

        # A user none of whose turns is their own: their times are in this browser's zone.
        page.fill("#timeline-since", "")
        page.fill("#timeline-until", "")
        page.fill("#user-id", OTHER)
        page.click("#open-user")
        page.click("#tab-timeline")
        expect(page.locator(".timeline-range")).to_contain_text("this browser's zone (America/New_York)")
        assert page.locator("#timeline-list li.turn-row .hint").first.text_content() == (
            "#1 2026-11-02 07:03:00 assistant"
        )

"""The memory inspector end to end in headless Chromium (Debian's `chromium`, driven by
Playwright; Playwright's own browsers are never downloaded).

The app runs for real under uvicorn on a free port, on real Postgres and Redis with in-memory
vector indexes (as the API contract tests); memories are seeded as the pipeline leaves them. The
browser enters the key, picks a user, filters, searches, opens a history, edits, invalidates,
restores and forgets, and an HTML/script injection string in a memory renders as text.
"""

from __future__ import annotations

from typing import Any

from shared.models import Memory, MemoryStatus, MemoryType
from tests.support.api import ApiEnv, seed_memory
from tests.support.browser import needs_browser, open_page, serve, stop

A, B = "tenant-a", "tenant-b"
USER = "u-inspect"
XSS = '<img src=x onerror="window.__xss=1;alert(document.domain)"><script>window.__xss=2</script>'


def _card(page: Any, memory: Memory) -> Any:
    return page.locator(f"article.memory[data-id='{memory.id}']")


def _api_memory(env: ApiEnv, memory: Memory) -> dict[str, Any]:
    r = env.client.get(f"/v1/users/{USER}/memories/{memory.id}", headers=env.auth(A))
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def _seed(env: ApiEnv) -> dict[str, Memory]:
    c = env.container
    seeded = {
        "coriander": seed_memory(c, A, USER, "我不吃香菜", n=0),
        "port": seed_memory(c, A, USER, "生产环境部署端口是8443", kind=MemoryType.FACT, n=1),
        "seat": seed_memory(c, A, USER, "I prefer window seats on long flights", n=2),
        "xss": seed_memory(c, A, USER, XSS, kind=MemoryType.FACT, n=3),
        "old": seed_memory(
            c,
            A,
            USER,
            "以前住在上海 (lived in Shanghai)",
            kind=MemoryType.PROFILE,
            status=MemoryStatus.ARCHIVED,
            n=4,
        ),
        "other": seed_memory(c, A, "u-other", "喜欢喝乌龙茶", n=5),
        "b": seed_memory(c, B, "u-of-b", "tenant B's memory", n=6),
    }
    return seeded


@needs_browser
def test_inspector_flows_in_chromium(env, browser):
    from playwright.sync_api import expect

    m = _seed(env)
    served = serve(env, env.client.app)
    try:
        page, watched = open_page(browser, served.url)
        assert page.url == served.url + "/inspector/"
        assert page.title() == "cuemem inspector"

        # Without a key the API's 401 shows in the page, message and all.
        page.click("#load-users")
        error = page.locator("#error")
        error.wait_for(state="visible")
        assert "401" in error.inner_text() and "an API key is required" in error.inner_text()

        # The key: the tenant's users (and only theirs) are listed with their counts.
        page.fill("#api-key", env.keys[A])
        page.click("#use-key")
        page.wait_for_selector(f"#user-list button[data-user='{USER}']")
        users = page.locator("#user-list button.user")
        assert [users.nth(i).get_attribute("data-user") for i in range(users.count())] == [USER, "u-other"]
        assert "4 active / 5" in users.nth(0).inner_text()
        assert page.locator("#error").is_hidden()
        assert page.evaluate("sessionStorage.getItem('cuemem.inspector.key')") == env.keys[A]

        # Pick the user: every memory but forgotten ones, with type, status, score, validity, sources.
        users.nth(0).click()
        cards = page.locator("article.memory")
        page.wait_for_selector(f"article.memory[data-id='{m['old'].id}']")
        assert cards.count() == 5
        assert page.locator("#memory-count").inner_text() == "1–5 of 5 memories"
        coriander = _card(page, m["coriander"])
        assert coriander.locator(".content").inner_text() == "我不吃香菜"  # UTF-8 end to end
        assert coriander.locator(".badge.type").inner_text() == "preference"
        assert coriander.locator(".badge.status").inner_text() == "active"
        assert "score 7" in coriander.inner_text()
        assert coriander.locator("dd.valid-from").inner_text() == "2026-11-01 09:00 UTC"  # no turns: UTC
        assert coriander.locator("dd.valid-to").inner_text() == "—"  # still true
        coriander.locator("details.sources summary").click()
        assert "session s1 #1 at 2026-11-01 09:00 UTC" in coriander.locator("details.sources").inner_text()
        assert f"ev-{A}-{USER}-0" in coriander.locator("details.sources").inner_text()
        assert _card(page, m["port"]).locator(".content").inner_text() == "生产环境部署端口是8443"

        # The injection string is text: no element made from it, no script run, no dialog.
        xss = _card(page, m["xss"])
        assert xss.locator(".content").inner_text() == XSS
        assert xss.locator(".content").evaluate("n => n.childElementCount") == 0
        assert page.locator("img").count() == 0
        assert page.locator("main script").count() == 0
        assert page.evaluate("window.__xss") is None

        # Filter by status and type.
        page.select_option("#status-filter", "archived")
        expect(cards).to_have_count(1)
        assert _card(page, m["old"]).locator(".badge.status").inner_text() == "archived"
        assert _card(page, m["old"]).locator(".act-restore").count() == 1
        page.select_option("#status-filter", "active")
        expect(cards).to_have_count(4)
        page.select_option("#type-filter", "fact")
        expect(cards).to_have_count(2)
        assert {cards.nth(i).get_attribute("data-id") for i in range(2)} == {m["port"].id, m["xss"].id}
        page.select_option("#type-filter", "")
        page.select_option("#status-filter", "current")
        expect(cards).to_have_count(5)

        # Search: a recall with its explanation and trace, in the Recall tab.
        page.click("#tab-recall")
        page.fill("#query", "我不吃香菜吗？")
        page.click("#run-recall")
        first = page.locator("#recall-result .recall-item").first
        first.wait_for()
        assert first.get_attribute("data-id") == m["coriander"].id
        assert first.locator(".content").inner_text() == "我不吃香菜"
        assert "cue" in first.locator("ul.paths-found").inner_text()
        first.locator("details.explained summary").click()  # the explanation in full
        assert "cue" in first.locator("dd.paths").inner_text()
        assert first.locator("dd.matched-cues li").count() >= 1
        assert first.locator("dd.scores li[data-key='cue_score']").count() == 1
        assert first.locator("dd.scores li[data-key='relevance']").count() == 1
        assert first.locator("dd.moved-by").inner_text() != "—"  # the features that moved it most
        stage = page.locator("#recall-result .stage-name").inner_text()
        assert stage == "ranked"
        page.locator("#recall-result details.trace summary").click()
        assert page.locator("#recall-result dd.trace-stage").inner_text() == stage
        assert page.locator("#recall-result dd.trace-candidates li").count() >= 1
        assert page.locator("#recall-result dd.trace-timings li").count() >= 1
        # The injection string found by recall is text there too.
        page.fill("#query", "onerror img window")
        page.click("#run-recall")
        expect(page.locator("#recall-result .recall-item .content", has_text="onerror")).to_have_count(1)
        assert page.locator("img").count() == 0 and page.evaluate("window.__xss") is None

        # History of a memory, back in the Memories tab.
        page.click("#tab-memories")
        coriander.locator(".act-history").click()
        history = page.locator("#history")
        history.wait_for(state="visible")
        assert page.locator("#history-of").inner_text() == m["coriander"].id
        page.wait_for_selector("#history-body tr[data-action='created']")
        assert "seeded" in history.locator("tr[data-action='created'] .reason").inner_text()

        # Edit: an invalid edit shows the API's error (message and field) in the card...
        coriander.locator(".act-edit").click()
        coriander.locator("textarea.edit-content").fill("   ")
        coriander.locator(".save-edit").click()
        card_error = coriander.locator(".card-error")
        card_error.wait_for(state="visible")
        assert "422 invalid_input" in card_error.inner_text()
        assert card_error.locator(".error-fields li").inner_text() == "content: must not be empty"
        # ...a valid one shows the new content, the API returns it, the open history says so.
        coriander.locator("textarea.edit-content").fill("我不吃香菜和葱 (no coriander, no scallions)")
        coriander.locator(".save-edit").click()
        expect(coriander.locator(".content")).to_have_text("我不吃香菜和葱 (no coriander, no scallions)")
        assert _api_memory(env, m["coriander"])["content"] == "我不吃香菜和葱 (no coriander, no scallions)"
        page.wait_for_selector("#history-body tr[data-action='edited']")
        assert "edited" in page.locator("#notice").inner_text()

        # Invalidate: an empty reason is refused with the field named; with one, superseded.
        port = _card(page, m["port"])
        port.locator(".act-invalidate").click()
        port.locator(".confirm-invalidate").click()
        port.locator(".card-error").wait_for(state="visible")
        assert port.locator(".card-error .error-fields li").inner_text() == "reason: must not be empty"
        port.locator("input.invalidate-reason").fill("端口改成了9443 (moved to 9443)")
        port.locator(".confirm-invalidate").click()
        page.wait_for_selector(f"article.memory[data-id='{m['port'].id}'][data-status='superseded']")
        port = _card(page, m["port"])
        assert port.locator("dd.status-reason").inner_text() == "invalidated: 端口改成了9443 (moved to 9443)"
        assert port.locator("dd.valid-to").inner_text() != "—"
        assert _api_memory(env, m["port"])["status"] == "superseded"

        # Restore it: active again.
        port.locator(".act-restore").click()
        page.wait_for_selector(f"article.memory[data-id='{m['port'].id}'][data-status='active']")
        assert _api_memory(env, m["port"])["status"] == "active"

        # Forget: gone from the default list, kept (forgotten) for the audit.
        seat = _card(page, m["seat"])
        seat.locator(".act-forget").click()
        seat.locator(".confirm-forget").click()
        page.wait_for_selector(f"article.memory[data-id='{m['seat'].id}']", state="detached")
        assert cards.count() == 4
        assert page.locator("#memory-count").inner_text() == "1–4 of 4 memories"
        assert _api_memory(env, m["seat"])["status"] == "forgotten"
        page.select_option("#status-filter", "forgotten")
        page.wait_for_selector(f"article.memory[data-id='{m['seat'].id}'][data-status='forgotten']")
        assert cards.count() == 1

        # A reload keeps the key and the user (sessionStorage), and still renders the string as text.
        page.reload()
        page.wait_for_selector("body[data-ready='true']")
        page.wait_for_selector(f"article.memory[data-id='{m['xss'].id}']")
        assert page.locator("#user-id").input_value() == USER
        assert page.locator("img").count() == 0 and page.evaluate("window.__xss") is None

        watched.clean()
    finally:
        stop(served)


@needs_browser
def test_inspector_without_auth_needs_no_key(env, browser):
    from service.http.app import create_app

    tenant = env.container.settings.tenant_id
    memory = seed_memory(env.container, tenant, "u-local", "Remember: 周五下午开会 (Friday meeting)", n=0)
    app = create_app(env.container, auth=False)
    served = serve(env, app)
    try:
        page, watched = open_page(browser, served.url)
        page.fill("#user-id", "u-local")
        page.click("#open-user")
        card = page.locator(f"article.memory[data-id='{memory.id}']")
        card.wait_for()
        assert card.locator(".content").inner_text() == "Remember: 周五下午开会 (Friday meeting)"
        page.click("#load-users")
        page.wait_for_selector("#user-list button[data-user='u-local']")
        # A user id outside the safe alphabet: the API's 422 names the field in the page.
        page.evaluate("document.querySelector('#user-id').value = 'bad user'")
        page.click("#open-user")
        page.locator("#error").wait_for(state="visible")
        assert "422 invalid_input" in page.locator("#error").inner_text()
        assert "user_id" in page.locator("#error .error-fields").inner_text()
        watched.clean()
    finally:
        app.state.close()
        stop(served)

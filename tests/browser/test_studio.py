"""The studio page in a real headless Chromium against a real local server (the banking agent,
offline model): a customer's conversation with a confirmation button clicked, the turn
inspector's matched guideline, tool call and LLM prompt, the sessions list, the journey graphs —
and hostile markup in a message and in a guideline shown as text, never run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from engine.authoring import dump_agent, load_agent
from examples.banking import bank
from examples.banking import load as load_bank
from tests.browser.conftest import offline_bank_server, screenshot
from waypoint.local_server import LocalServer

pytestmark = pytest.mark.browser

KEY = "studio-browser-test-key-0123456789"
WAIT = 90  # seconds: a turn on a loaded two-core machine, with generous headroom
# Markup an attacker would hope the page renders: it must arrive on screen as these characters.
SERVER_URL: list[str] = []  # the module's server, for helpers called from tests
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'


def hostile_bank() -> Any:
    """The banking agent plus a guideline whose condition and action carry markup."""
    document = dump_agent(load_bank())
    document["guidelines"].append(
        {
            "id": "markup_guideline",
            "condition": f"The customer asks about {HOSTILE} gift cards",
            "action": f"Say gift cards are not sold here {HOSTILE}",
        }
    )
    return load_agent(document)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    with offline_bank_server(tmp_path_factory, hostile_bank(), management_api_key=KEY) as s:
        SERVER_URL[:] = [s.base_url]
        yield s


def wait_for(driver: Any, css: str, *, count: int = 1, text: str | None = None) -> list[Any]:
    """The elements matching `css` once there are at least `count` (and the last holds `text`)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def ready(d: Any) -> list[Any] | bool:
        found = d.find_elements(By.CSS_SELECTOR, css)
        if len(found) < count or (text is not None and text not in found[-1].text):
            return False
        return found

    return WebDriverWait(driver, WAIT).until(ready, f"waiting for {css!r} ({text!r})")


def listed_sessions() -> list[str]:
    """The session ids the API lists for the agent (from outside the page)."""
    page = httpx.get(
        f"{SERVER_URL[0]}/api/sessions", params={"limit": "200"}, headers={"X-Api-Key": KEY}
    )
    return sorted(s["session_id"] for s in page.json()["sessions"])


def say(driver: Any, text: str, replies_before: int) -> Any:
    """Type a customer message, send it, and return the agent's reply line."""
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, "chat-input")
    box.send_keys(text)
    driver.find_element(By.ID, "chat-send").click()
    return wait_for(driver, "#transcript li.agent", count=replies_before + 1)[-1]


def click(driver: Any, css: str) -> None:
    wait_for(driver, css)[0].click()


@pytest.fixture(scope="module")
def conversation(browser: Any, server: LocalServer) -> dict[str, str]:
    """The seed conversation typed into the page, the transfer confirmed with its button;
    returns the turn ids of the interesting turns."""
    from selenium.webdriver.common.by import By

    sessions_before = listed_sessions()
    browser.get(f"{server.base_url}/#key={KEY}")
    wait_for(browser, "#status", text="connected to")
    assert KEY not in browser.current_url  # read from the fragment, then taken out of it
    assert listed_sessions() == sessions_before  # opening the page made no session
    turns: dict[str, str] = {}
    script = ["Hi", "Transfer money", "seldo", "monkey", "Checking", "To account ID 1234324", "1k"]
    for i, text in enumerate(script):
        reply = say(browser, text, i)
        turns[text] = reply.find_element(By.CSS_SELECTOR, "a.inspect").get_attribute("data-turn")
    confirm = wait_for(browser, "#transcript li.agent:last-child .options button")
    assert [b.text for b in confirm] == ["Yes, go ahead", "No"]
    confirm[0].click()
    done = wait_for(browser, "#transcript li.agent", count=len(script) + 1)[-1]
    turns["yes"] = done.find_element(By.CSS_SELECTOR, "a.inspect").get_attribute("data-turn")
    turns["session"] = browser.execute_script("return studio.chatSession")
    return turns


def test_a_customer_talks_to_the_agent_and_confirms_with_a_button(
    browser: Any, conversation: dict[str, str]
) -> None:
    lines = [li.text for li in wait_for(browser, "#transcript li")]
    assert "stock price" in lines[1] and "transfer money" in lines[1]  # the greeting
    assert any("username" in line for line in lines)
    assert lines[-2] == "Yes, go ahead"  # the button sent its label as the customer's words
    assert "Done!" in lines[-1]
    assert [t["amount"] for t in bank.BANK.transfers] == ["1000.00"]  # exactly one transfer
    screenshot(browser, "chat")


def test_the_inspector_shows_the_matched_guideline_the_tool_call_and_the_prompt(
    browser: Any, conversation: dict[str, str]
) -> None:
    from selenium.webdriver.common.by import By

    browser.find_element(By.CSS_SELECTOR, f'a.inspect[data-turn="{conversation["Hi"]}"]').click()
    greet = wait_for(browser, '#guidelines tr.matched[data-guideline="greet"]')[0]
    assert "matched" in greet.text and "greets" in greet.text  # verdict and condition
    start = wait_for(browser, '#guidelines tr[data-guideline="journey:stock:condition:0"]')[0]
    assert "price of a stock" in start.text  # a journey's start, by its condition
    calls = wait_for(browser, "#llm-calls details.llm-call")
    calls[0].find_element(By.TAG_NAME, "summary").click()
    prompt = calls[0].find_element(By.CSS_SELECTOR, "pre.prompt")
    assert prompt.is_displayed() and len(prompt.text) > 100
    assert "(not kept" not in prompt.text
    assert calls[0].find_element(By.CSS_SELECTOR, "pre.answer").text.startswith("{")
    # the turn's cost, from the trace's priced calls (the offline model costs nothing per token)
    cost = wait_for(browser, "#turn-cost")[0].text
    assert cost.startswith("cost: $0.00000") and "prompt tokens (0 cached)" in cost
    assert "$0.00000" in calls[0].find_element(By.TAG_NAME, "summary").text
    assert wait_for(browser, "#inspector table")  # stages
    screenshot(browser, "inspector-guidelines")

    show_turn(browser, conversation, "Checking")
    tool = wait_for(browser, '#tool-calls .tool-call[data-tool="lookup_account_id"]')[0]
    assert "account_name" in tool.text and "Checking" in tool.text
    assert "ok" in tool.text
    balance = wait_for(browser, '#tool-calls .tool-call[data-tool="get_account_balance"]')[0]
    assert "1234567890" in balance.text
    walk = wait_for(browser, '#journeys .journey[data-journey="balance"]')[0].text
    assert "the model proposed: ask_account → find_account" in walk
    assert "verification kept: find_account" in walk
    screenshot(browser, "inspector-tools")


def show_turn(browser: Any, conversation: dict[str, str], said: str) -> None:
    """Open the inspector on the turn that answered `said` (through the chat's link)."""
    from selenium.webdriver.common.by import By

    browser.find_element(By.CSS_SELECTOR, '#tabs [data-view="chat"]').click()
    link = f'a.inspect[data-turn="{conversation[said]}"]'
    browser.find_element(By.CSS_SELECTOR, link).click()
    wait_for(browser, "#inspector h2", text=conversation[said])


def test_the_password_turns_prompts_are_not_kept(
    browser: Any, conversation: dict[str, str]
) -> None:
    show_turn(browser, conversation, "monkey")
    prompts = wait_for(browser, "#llm-calls pre.prompt")
    page = browser.find_element("css selector", "#inspector").get_attribute("textContent")
    assert "monkey" not in page
    assert all("not kept" in p.get_attribute("textContent") for p in prompts)


def test_the_sessions_view_lists_the_chat_and_opens_its_turns(
    browser: Any, conversation: dict[str, str]
) -> None:
    from selenium.webdriver.common.by import By

    browser.find_element(By.CSS_SELECTOR, '#tabs [data-view="sessions"]').click()
    row = wait_for(browser, f'#sessions-table tr[data-session="{conversation["session"]}"]')[0]
    assert "api" in row.text and "bank" in row.text
    row.click()
    turns = wait_for(browser, "#turns-table tbody tr", count=8)
    assert turns[0].get_attribute("data-turn") == conversation["Hi"]
    assert "Hi" in turns[0].text
    screenshot(browser, "sessions")
    turns[4].click()
    wait_for(browser, "#inspector h2", text=conversation["Checking"])


def graph_route(server: LocalServer) -> bool:
    response = httpx.get(
        f"{server.base_url}/api/agents/bank/graph",
        params={"format": "svg", "journey": "transfer"},
        headers={"X-Api-Key": KEY},
    )
    return response.status_code == 200


def test_the_journey_step_is_highlighted_on_its_graph(
    browser: Any, conversation: dict[str, str], server: LocalServer
) -> None:
    show_turn(browser, conversation, "To account ID 1234324")
    holder = wait_for(browser, '#journeys .graph[data-graph="transfer"]')[0]
    if not graph_route(server):
        pytest.skip("GET /agents/{id}/graph is not on this branch yet (the graph renderer's)")
    current = wait_for(browser, '#journeys .graph[data-graph="transfer"] g.wp-current')[0]
    assert current.get_attribute("data-step") == "ask_amount"
    assert holder.find_elements("css selector", "g.wp-node")
    screenshot(browser, "inspector-journey")


def test_the_graphs_view_draws_every_journey(
    browser: Any, conversation: dict[str, str], server: LocalServer
) -> None:
    from selenium.webdriver.common.by import By

    browser.find_element(By.CSS_SELECTOR, '#tabs [data-view="graphs"]').click()
    holders = wait_for(browser, "#graphs .graph", count=4)
    journeys = {h.get_attribute("data-graph") for h in holders}
    assert {"authenticate", "balance", "transfer", "stock"} <= journeys
    if not graph_route(server):
        pytest.skip("GET /agents/{id}/graph is not on this branch yet (the graph renderer's)")
    wait_for(browser, '#graphs .graph[data-graph="transfer"] svg g.wp-node')
    screenshot(browser, "graphs")


def test_markup_in_a_message_and_in_a_guideline_is_shown_as_text(
    browser: Any, conversation: dict[str, str]
) -> None:
    from selenium.webdriver.common.by import By

    browser.find_element(By.CSS_SELECTOR, '#tabs [data-view="chat"]').click()
    before = len(browser.find_elements(By.CSS_SELECTOR, "#transcript li.agent"))
    reply = say(browser, f"Do you sell {HOSTILE} gift cards?", before)
    customer = browser.find_elements(By.CSS_SELECTOR, "#transcript li.customer")[-1]
    assert customer.text == f"Do you sell {HOSTILE} gift cards?"
    reply.find_element(By.CSS_SELECTOR, "a.inspect").click()
    rows = wait_for(browser, '#guidelines tr[data-guideline="markup_guideline"]')
    assert HOSTILE in rows[0].text  # condition and action, as characters
    open_all_prompts(browser)
    assert not browser.find_elements(By.CSS_SELECTOR, "main img, main script:not([src])")
    assert browser.execute_script("return window.__pwned") is None


def open_all_prompts(browser: Any) -> None:
    for summary in browser.find_elements("css selector", "#llm-calls summary"):
        summary.click()


def test_a_wrong_key_is_said_plainly(browser: Any, server: LocalServer) -> None:
    browser.get(f"{server.base_url}/#key=not-the-key")
    status = wait_for(browser, "#status.error")[0]
    assert "X-Api-Key" in status.text


def test_a_forms_link_is_only_ever_an_http_address(browser: Any, server: LocalServer) -> None:
    browser.get(f"{server.base_url}/#key={KEY}")
    wait_for(browser, "#status", text="connected to")
    actions = browser.execute_script(
        "return viewActions({url: 'javascript:window.__pwned=1', actions: ["
        "{label: 'Fill in the address', url: 'https://forms.example/a?call=1'},"
        "{label: 'data', url: 'data:text/html,<script>1</script>'}, {label: 'no url'}]})"
    )
    assert actions == [{"label": "Fill in the address", "url": "https://forms.example/a?call=1"}]


def test_a_graph_is_stripped_of_anything_that_could_run(browser: Any, server: LocalServer) -> None:
    browser.get(f"{server.base_url}/#key={KEY}")
    wait_for(browser, "#status", text="connected to")
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"'
        ' onload="window.__pwned=1"><script>window.__pwned=1</script>'
        '<g class="wp-node wp-chat wp-current" data-step="ask" onclick="window.__pwned=1">'
        '<a xlink:href="javascript:window.__pwned=1"><text>ask</text></a></g>'
        "<foreignObject><div>html</div></foreignObject></svg>"
    )
    cleaned = browser.execute_script("return safeSvg(arguments[0]).outerHTML", svg)
    assert "wp-current" in cleaned and 'data-step="ask"' in cleaned  # the marks survive
    for active in ("script", "onload", "onclick", "javascript:", "foreignObject"):
        assert active not in cleaned
    assert browser.execute_script("return window.__pwned") is None


def test_new_session_starts_the_conversation_over(
    browser: Any, conversation: dict[str, str]
) -> None:
    from selenium.webdriver.common.by import By

    browser.find_element(By.CSS_SELECTOR, '#tabs [data-view="chat"]').click()
    browser.find_element(By.ID, "chat-reset").click()
    assert browser.find_elements(By.CSS_SELECTOR, "#transcript li") == []
    reply = say(browser, "Hi", 0)
    assert "stock price" in reply.text  # greeted again: nothing carried over
    fresh = browser.execute_script("return studio.chatSession")
    assert fresh and fresh != conversation["session"]
    assert fresh in listed_sessions()

"""The studio's Handoffs view in a real headless Chromium against a real local server (banking
agent, offline model): a person hands a customer's session over, takes it, writes to the customer
(delivered on their channel by the worker), is refused when a colleague has it and takes it over,
and hands it back; the studio's own chat shows a person's messages; names and messages carrying
markup stay text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from examples.banking import load as load_bank
from tests.browser.conftest import offline_bank_server, screenshot
from tests.browser.test_studio import HOSTILE, WAIT, wait_for
from waypoint.local_server import GenericChatClient, LocalServer

pytestmark = pytest.mark.browser

KEY = "studio-handoff-browser-test-key-0123"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    with offline_bank_server(tmp_path_factory, load_bank(), management_api_key=KEY) as s:
        yield s


@pytest.fixture(scope="module")
def page(browser: Any, server: LocalServer) -> Any:
    browser.get(f"{server.base_url}/#key={KEY}")
    wait_for(browser, "#status", text="connected to")
    return browser


def api(server: LocalServer, method: str, path: str, body: Any = None) -> Any:
    response = httpx.request(
        method, f"{server.base_url}/api{path}", json=body, headers={"X-Api-Key": KEY}, timeout=60
    )
    assert response.status_code < 300, response.text
    return response.json()


def tab(driver: Any, view: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.CSS_SELECTOR, f'#tabs [data-view="{view}"]').click()


def set_person(driver: Any, name: str) -> None:
    from selenium.webdriver.common.by import By

    tab(driver, "handoffs")
    box = driver.find_element(By.ID, "handoff-person")
    box.clear()
    box.send_keys(name)


def hand_over_from_sessions(driver: Any, session_id: str) -> None:
    tab(driver, "sessions")
    wait_for(driver, f'#sessions-table tr[data-session="{session_id}"]')[0].click()
    wait_for(driver, "#session-detail h2", text=session_id)
    wait_for(driver, "#session-detail .handoff-start")[0].click()
    wait_for(driver, "#handoff-detail h2", text=session_id)


def write(driver: Any, text: str, *, result: str) -> None:
    box = wait_for(driver, "#handoff-text")[0]
    box.send_keys(text)
    wait_for(driver, "#handoff-send")[0].click()
    wait_for(driver, "#handoff-result", text=result)


def test_a_person_takes_a_channel_customer_writes_to_them_and_hands_them_back(
    page: Any, server: LocalServer
) -> None:
    from selenium.webdriver.common.by import By

    customer = GenericChatClient(server, "handoff-browser", "carol")
    assert customer.send("Hi")["text"]  # the agent answers while it has the session
    set_person(page, "Dana")
    hand_over_from_sessions(page, customer.session_id)
    summary = wait_for(page, "#handoff-summary", text="waiting for a person")[0]
    assert "taken over from the studio" in summary.text
    listed = wait_for(page, f'#handoffs-table tr[data-session="{customer.session_id}"]')[0]
    assert "waiting" in listed.text and "carol" in listed.text

    write(page, "Hello Carol, Dana from the bank here.", result="sent: the worker delivers")
    delivered = server.replies.wait("handoff-browser", WAIT)
    assert delivered["text"] == "Hello Carol, Dana from the bank here."
    wait_for(page, "#handoff-summary", text="with Dana")  # writing to a waiting handoff takes it
    customer.post("Thanks Dana, my card is stuck")
    # The open session follows the customer without a click; the agent stays quiet.
    wait_for(page, "#handoff-conversation li.customer", count=2, text="my card is stuck")
    assert server.replies.poll("handoff-browser", timeout=3) is None

    # A colleague takes it over (the page follows), and Dana's words, typed before she saw it,
    # are refused naming him, kept in the box, and sent once she takes it back.
    box = wait_for(page, "#handoff-text")[0]
    box.send_keys("Let me unblock it.")
    api(
        server,
        "POST",
        f"/sessions/{customer.session_id}/handoff/take",
        {"person": "Sam", "take_over": True},
    )
    wait_for(page, "#handoff-summary", text="with Sam")
    assert page.find_element(By.ID, "handoff-text").get_attribute("value") == "Let me unblock it."
    page.find_element(By.ID, "handoff-send").click()
    wait_for(page, "#handoff-result", text="Someone else has this session now")
    assert "taken by 'Sam'" in page.find_element(By.ID, "status").text
    assert page.find_element(By.ID, "handoff-text").get_attribute("value") == "Let me unblock it."
    assert server.replies.poll("handoff-browser", timeout=3) is None  # nothing sent
    screenshot(page, "handoff-refused")
    wait_for(page, "#handoff-take-over")[0].click()
    wait_for(page, "#handoff-summary", text="with Dana")
    assert server.replies.wait("handoff-browser", WAIT)["text"] == "Let me unblock it."
    lines = [li.text for li in wait_for(page, "#handoff-conversation li", count=6)]
    assert any("Sam took it over from Dana" in line for line in lines)
    assert any("Dana took it over from Sam" in line for line in lines)
    assert lines[-1].endswith("Let me unblock it.")
    screenshot(page, "handoff")

    note = page.find_element(By.ID, "handoff-note")
    note.send_keys("card unblocked")
    page.find_element(By.ID, "handoff-release").click()
    wait_for(page, "#handoff-summary", text="with the agent")
    assert not page.find_elements(
        By.CSS_SELECTOR, f'#handoffs-table tr[data-session="{customer.session_id}"]'
    )
    assert customer.send("What is the price of Apple stock?")["text"]  # the agent again
    customer.close()


def test_the_studio_chat_shows_a_persons_messages_while_they_have_it(
    page: Any, server: LocalServer
) -> None:
    from selenium.webdriver.common.by import By

    tab(page, "chat")
    page.find_element(By.ID, "chat-reset").click()
    page.find_element(By.ID, "chat-input").send_keys("Hi")
    page.find_element(By.ID, "chat-send").click()
    wait_for(page, "#transcript li.agent")
    session_id = page.execute_script("return studio.chatSession")
    set_person(page, "Dana")
    hand_over_from_sessions(page, session_id)
    write(page, "Dana here: I will look at your account.", result="recorded, not sent")

    tab(page, "chat")  # the chat's client reads the session's events: the message shows there
    line = wait_for(page, "#transcript li.person", text="I will look at your account")[0]
    assert "Dana" in line.text
    page.find_element(By.ID, "chat-input").send_keys("ok, thanks")
    page.find_element(By.ID, "chat-send").click()
    wait_for(page, "#transcript li.note", text="Dana has this conversation")

    api(server, "POST", f"/sessions/{session_id}/handoff/release", {"person": "Dana"})
    wait_for(page, "#transcript li.note", text="handed back to the agent by Dana")
    agent_lines = len(page.find_elements(By.CSS_SELECTOR, "#transcript li.agent"))
    page.find_element(By.ID, "chat-input").send_keys("What is the price of Apple stock?")
    page.find_element(By.ID, "chat-send").click()
    reply = wait_for(page, "#transcript li.agent", count=agent_lines + 1)[-1]
    assert "(no reply this turn)" not in reply.text


def test_markup_in_a_persons_name_and_message_is_shown_as_text(
    page: Any, server: LocalServer
) -> None:
    customer = GenericChatClient(server, "handoff-markup", "mallory")
    customer.send("Hi")
    set_person(page, f"Eve {HOSTILE}")
    hand_over_from_sessions(page, customer.session_id)
    write(page, f"Look {HOSTILE}", result="sent")
    assert server.replies.wait("handoff-markup", WAIT)["text"] == f"Look {HOSTILE}"
    lines = [li.text for li in wait_for(page, "#handoff-conversation li", count=3)]
    assert any(HOSTILE in line and line.endswith(f"Look {HOSTILE}") for line in lines)
    assert any(f"Eve {HOSTILE}" in line for line in lines)
    assert page.execute_script("return window.__pwned") is None
    customer.close()

"""Loads the admin dashboard in headless Chromium, as an operator would, and checks what it shows.

Opens /admin, enters the admin key, waits for two polls, then compares the figures on the page with
/v1/admin/stats fetched at the same moment; reloads and checks that the charts still show what
happened (the history is the server's); optionally waits for a paused environment's banner or the
log sender's warning, and searches an order and checks its timeline. Measures in the page that
nothing scrolls sideways at 1,024 and 1,920 px and on a phone, takes a dark-theme screenshot, and
fails on any Content-Security-Policy violation in the browser console. Every wait is for a
condition, never a fixed time. Prints one JSON object with what it compared; exits 1 on any problem.

usage: check_dashboard.py --url http://127.0.0.1:PORT --key KEY --screenshots DIR [--name NAME]
       [--expect-paused ENVIRONMENT] [--expect-log-sender] [--search NUMBER] [--node NAME]
"""
import argparse
import json
import os
import sys
import time
import traceback
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

WAIT_SECONDS = 120


def fetch(url, key, path):
    request = urllib.request.Request(url + path, headers={"Authorization": "Bearer " + key})
    with urllib.request.urlopen(request) as response:
        return json.load(response)


def number(text):
    return float(text.replace(",", "").split()[0])


def increase(values):
    """What a cumulative counter added over the samples, a drop counted as a restart from 0."""
    total = 0
    for before, after in zip(values, values[1:]):
        total += after - before if after >= before else after
    return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--screenshots", required=True)
    parser.add_argument("--name", default="admin-dashboard")
    parser.add_argument("--expect-paused")
    parser.add_argument("--expect-log-sender", action="store_true")
    parser.add_argument("--search")
    parser.add_argument("--node")
    parser.add_argument("--expect-webhooks-disabled", type=int, default=0,
                        help="webhook endpoints deliveryd disabled: the banner and the table must say so")
    arguments = parser.parse_args()
    os.makedirs(arguments.screenshots, exist_ok=True)
    started_ms = int(time.time() * 1000)

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,1100",
                 "--user-data-dir=" + os.path.join(arguments.screenshots, ".profile-" + arguments.name)):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    problems = []
    compared = {}

    def wait(condition, what):
        try:
            return WebDriverWait(driver, WAIT_SECONDS, ignored_exceptions=[StaleElementReferenceException]).until(
                lambda d: condition())
        except TimeoutException:
            problems.append(f"waited {WAIT_SECONDS} s for {what}")
            return None

    def shown(element_id):
        return driver.find_element(By.ID, element_id).text

    def polls():
        return int(driver.find_element(By.TAG_NAME, "body").get_attribute("data-polls") or 0)

    def no_sideways_scroll(width, height, name):
        driver.set_window_size(width, height)
        wait(lambda: driver.execute_script("return window.innerWidth") > 0, "the resize")
        overflow = driver.execute_script(
            "const e = document.documentElement; return [e.scrollWidth, e.clientWidth];")
        if overflow[0] > overflow[1]:
            problems.append(f"at {width} px the page is {overflow[0]} px wide: it scrolls sideways")
        compared[f"scrollWidth@{width}"] = overflow
        # The whole page in one picture, for a person to look at.
        full_height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(width, min(full_height + 140, 6000))
        driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(os.path.join(arguments.screenshots, f"{name}.png"))

    try:
        driver.get(arguments.url + "/admin")
        if driver.find_element(By.ID, "dashboard").is_displayed():
            problems.append("the dashboard shows before a key was entered")
        driver.find_element(By.ID, "key").send_keys(arguments.key)
        driver.find_element(By.CSS_SELECTOR, "#login button").click()
        wait(lambda: polls() >= 2, "two polls")

        if arguments.expect_log_sender:
            wait(lambda: driver.find_elements(By.CSS_SELECTOR, '#banners [data-kind="log-sender"]'),
                 "the log sender's warning")
            if "not sending" not in shown("failureRate"):
                problems.append("with the log sender the failure rate reads " + shown("failureRate"))
            if "none sent to Apple" not in shown("pushTotals"):
                problems.append("with the log sender the totals read " + shown("pushTotals"))
            no_sideways_scroll(1024, 900, arguments.name + "-1024")
            return

        # Every sample the page draws is taken after the workload: the history is complete.
        wait(lambda: max(t["timesMs"][-1] if t["timesMs"] else 0
                         for t in fetch(arguments.url, arguments.key, "/v1/admin/stats?history=all")
                         ["history"]["tiers"]) > started_ms, "a history sample after the workload")
        initial_polls = polls()
        wait(lambda: polls() >= initial_polls + 2, "two more polls")
        expected = fetch(arguments.url, arguments.key, "/v1/admin/stats?history=all")
        summary = expected["summary"]
        orders = summary["orders"]
        open_orders = sum(orders.get(status, 0) for status in ("placed", "preparing", "pickup", "delivering"))
        compared.update({
            "openOrders": (number(shown("openOrders")), open_orders),
            "queueDepth": (number(shown("queueDepth")), summary["outbox"]["depth"]),
            "deadLetters": (number(shown("deadLetters")), summary["outbox"]["deadLetters"]),
            "pushesAccepted": (number(shown("pushTotals")), summary["pushes"]["accepted"]),
        })
        # Tables are read in one script each: the page redraws them on every poll, and an element
        # found before a redraw is stale after it.
        for status, count in driver.execute_script(
                "return [...document.querySelectorAll('#ordersTable tr[data-status]')]"
                ".map(r => [r.dataset.status, r.cells[1].textContent])"):
            compared["orders." + status] = (number(count), orders.get(status, 0))

        def data_rows(table):
            """The cell texts of each data row (not the header, not a `colspan` placeholder)."""
            return driver.execute_script(
                "return [...document.querySelectorAll(arguments[0] + ' tr')]"
                ".filter(r => r.querySelector('td') && !r.querySelector('td[colspan]'))"
                ".map(r => [...r.cells].map(c => c.textContent))", "#" + table)

        compared["recentFailures"] = (len(data_rows("failuresTable")), len(expected["recentFailures"]))
        compared["stuckOrders"] = (len(data_rows("stuckTable")), len(expected["stuckOrders"]))
        compared["merchants"] = (len(data_rows("merchantsTable")), len(expected["merchants"]))
        compared["deadLetterRows"] = (len(data_rows("deadLettersTable")), min(20, summary["outbox"]["deadLetters"]))
        webhooks = summary.get("webhooks", {})
        queue = webhooks.get("queue", {})
        compared["webhooksPending"] = (number(shown("webhooksPending")), queue.get("pending", 0) + queue.get("sending", 0))
        endpoint_rows = data_rows("webhookEndpointsTable")
        compared["webhookEndpoints"] = (
            sorted((cells[0], cells[2].split()[0]) for cells in endpoint_rows),
            sorted((e["merchantId"], e["health"]) for e in expected.get("webhookEndpoints", [])))
        if arguments.expect_webhooks_disabled:
            disabled = [cells for cells in endpoint_rows if cells[2].startswith("disabled")]
            if len(disabled) != arguments.expect_webhooks_disabled:
                problems.append(f"the webhook endpoints table shows {len(disabled)} disabled: {endpoint_rows}")
            if not driver.find_elements(By.CSS_SELECTOR, "#banners [data-kind='webhooks-disabled']"):
                problems.append("no banner says a webhook endpoint was disabled")
        reasons_shown = {cells[0] for cells in data_rows("reasonsTable")}
        compared["failureReasons"] = (sorted(reasons_shown), sorted(summary["failuresByReason"]))

        # The four Live Activity figures over the hour, from the same history the page reads.
        fine = expected["history"]["tiers"][0]["series"]
        started = increase(fine["activities.started"])
        compared["activitiesStarted"] = (number(shown("laStarted")), started)
        compared["updatesFailed"] = (number(shown("laUpdatesFailed")), increase(fine["updates.failed"]))
        compared["pushesFailed"] = (number(shown("laPushesFailed")), increase(fine["pushes.failed"]))
        compared["endedBySystem"] = (number(shown("laEnded")),
                                     increase(fine["activities.ended.token_dead"]) +
                                     increase(fine["activities.ended.expired"]))
        if started < 1:
            problems.append("the history shows no activity started: the workload is missing from it")
        if arguments.node and arguments.node not in shown("node"):
            problems.append("the page does not say which node it reads: " + shown("node"))
        node = expected["node"]
        build = f"deliveryd {node['version']} ({node['commit']}, built {node['built']})"
        if build not in shown("node"):
            problems.append(f"the header does not name the build ({build}): " + shown("node"))
        for name, (seen, wanted) in compared.items():
            if seen != wanted:
                problems.append(f"{name}: the page shows {seen}, /v1/admin/stats says {wanted}")
        if not driver.find_elements(By.CSS_SELECTOR, "#chartQueue polyline"):
            problems.append("no queue chart was drawn")
        if "updated" not in shown("status"):
            problems.append("the status line does not say it updated: " + shown("status"))

        if arguments.expect_paused:
            wait(lambda: driver.find_elements(
                By.CSS_SELECTOR, f'#banners [data-kind="paused-{arguments.expect_paused}"]'),
                f"the banner of the paused {arguments.expect_paused} environment")

        # A reload forgets nothing: the charts are drawn from the server's history at once.
        driver.refresh()
        wait(lambda: polls() >= 1, "the first poll after the reload")
        chart = driver.find_element(By.ID, "chartRate")
        compared["chartAfterReload"] = (chart.get_attribute("data-points"), chart.get_attribute("data-max"))
        if int(chart.get_attribute("data-points") or 0) < 2 or float(chart.get_attribute("data-max") or 0) <= 0:
            problems.append(f"after a reload the push chart is empty: {compared['chartAfterReload']}")

        if arguments.search:
            box = driver.find_element(By.ID, "searchText")
            box.send_keys(arguments.search)
            driver.find_element(By.CSS_SELECTOR, "#searchForm button").click()
            found = wait(lambda: driver.find_elements(By.CSS_SELECTOR, "#searchResults [data-order]"), "search results")
            wanted = fetch(arguments.url, arguments.key, "/v1/admin/orders?q=" + urllib.parse.quote(arguments.search))
            if found:
                timeline = wanted["orders"][0]["timeline"]
                card = found[0]
                statuses = card.find_elements(By.CSS_SELECTOR, 'tr[data-type="status"]')
                pushes = card.find_elements(By.CSS_SELECTOR, 'tr[data-type="push"]')
                compared["timeline"] = ((len(statuses), len(pushes)),
                                        (sum(e["type"] == "status" for e in timeline),
                                         sum(e["type"] == "push" for e in timeline)))
                if compared["timeline"][0] != compared["timeline"][1]:
                    problems.append(f"timeline: the page shows {compared['timeline'][0]}, the API {compared['timeline'][1]}")
                if not pushes or "accepted" not in pushes[-1].text:
                    problems.append("the timeline shows no accepted push: " + card.text)
                state = next((e["contentState"] for e in reversed(timeline) if e["type"] == "push"), None)
                if not state or state["statusText"] not in card.text:
                    problems.append("the timeline does not show the state the push carried")

        driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                               {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        background = driver.execute_script("return getComputedStyle(document.body).backgroundColor")
        compared["darkBackground"] = background
        channels = [int(c) for c in background[background.index("(") + 1:background.index(")")].split(",")[:3]]
        if sum(channels) > 3 * 64:
            problems.append(f"the dark theme's background is {background}")
        driver.execute_script("window.scrollTo(0, 0)")
        driver.save_screenshot(os.path.join(arguments.screenshots, f"{arguments.name}-dark.png"))
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})

        no_sideways_scroll(1024, 900, arguments.name + "-1024")
        no_sideways_scroll(1920, 1080, arguments.name + "-1920")
        no_sideways_scroll(390, 844, arguments.name + "-phone")
    except Exception:  # the report must say the check broke off: an exit in `finally` would hide it
        problems.append("the check broke off: " + traceback.format_exc())
    finally:
        for entry in driver.get_log("browser"):
            if "Content Security Policy" in entry.get("message", ""):
                problems.append("CSP violation: " + entry["message"])
        driver.quit()
        print(json.dumps({"compared": compared, "problems": problems}, default=str))
        sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()

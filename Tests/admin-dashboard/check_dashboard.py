"""Loads the admin dashboard in headless Chromium, as an operator would, and checks what it shows.

Opens /admin, enters the admin key, waits for two polls, then compares the figures on the page with
/v1/admin/stats fetched at the same moment. Saves a laptop and a phone screenshot. Prints one JSON
object with what it compared; exits 1 on any mismatch.

usage: check_dashboard.py --url http://127.0.0.1:PORT --key KEY --screenshots DIR
"""
import argparse
import json
import os
import sys
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def stats(url, key):
    request = urllib.request.Request(url + "/v1/admin/stats", headers={"Authorization": "Bearer " + key})
    with urllib.request.urlopen(request) as response:
        return json.load(response)


def number(text):
    return float(text.replace(",", "").split()[0])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--screenshots", required=True)
    arguments = parser.parse_args()
    os.makedirs(arguments.screenshots, exist_ok=True)

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,1100", "--user-data-dir=" + os.path.join(arguments.screenshots, ".profile")):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    problems = []
    try:
        driver.get(arguments.url + "/admin")
        if driver.find_element(By.ID, "dashboard").is_displayed():
            problems.append("the dashboard shows before a key was entered")
        driver.find_element(By.ID, "key").send_keys(arguments.key)
        driver.find_element(By.CSS_SELECTOR, "#login button").click()
        WebDriverWait(driver, 30).until(
            lambda d: int(d.find_element(By.TAG_NAME, "body").get_attribute("data-polls") or 0) >= 2)
        expected = stats(arguments.url, arguments.key)
        summary = expected["summary"]

        def shown(element_id):
            return driver.find_element(By.ID, element_id).text

        orders = summary["orders"]
        open_orders = sum(orders.get(status, 0) for status in ("placed", "preparing", "pickup", "delivering"))
        compared = {
            "openOrders": (number(shown("openOrders")), open_orders),
            "queueDepth": (number(shown("queueDepth")), summary["outbox"]["depth"]),
            "deadLetters": (number(shown("deadLetters")), summary["outbox"]["deadLetters"]),
            "pushesAccepted": (number(shown("pushTotals")), summary["pushes"]["accepted"]),
        }
        for row in driver.find_elements(By.CSS_SELECTOR, "#ordersTable tr[data-status]"):
            status = row.get_attribute("data-status")
            compared["orders." + status] = (number(row.find_elements(By.TAG_NAME, "td")[1].text), orders.get(status, 0))
        def data_rows(table):
            return [row for row in driver.find_elements(By.CSS_SELECTOR, f"#{table} tr")
                    if row.find_elements(By.TAG_NAME, "td") and not row.find_elements(By.CSS_SELECTOR, "td[colspan]")]

        compared["recentFailures"] = (len(data_rows("failuresTable")), len(expected["recentFailures"]))
        compared["stuckOrders"] = (len(data_rows("stuckTable")), len(expected["stuckOrders"]))
        reasons_shown = {row.find_elements(By.TAG_NAME, "td")[0].text for row in data_rows("reasonsTable")}
        compared["failureReasons"] = (sorted(reasons_shown), sorted(summary["failuresByReason"]))
        for name, (seen, wanted) in compared.items():
            if seen != wanted:
                problems.append(f"{name}: the page shows {seen}, /v1/admin/stats says {wanted}")
        if not driver.find_element(By.CSS_SELECTOR, "#chartQueue polyline"):
            problems.append("no queue chart was drawn")
        if "updated" not in shown("status"):
            problems.append("the status line does not say it updated: " + shown("status"))

        driver.save_screenshot(os.path.join(arguments.screenshots, "admin-dashboard.png"))
        driver.set_window_size(390, 844)
        time.sleep(0.5)
        width = driver.execute_script("return document.documentElement.scrollWidth")
        if width > 400:
            problems.append(f"on a phone the page is {width} px wide: it scrolls sideways")
        driver.save_screenshot(os.path.join(arguments.screenshots, "admin-dashboard-phone.png"))
        print(json.dumps({"compared": compared, "problems": problems}, default=str))
    finally:
        driver.quit()
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()

"""The chat page's screenshot in docs/figures/, taken in headless Chromium:

    python docs/screenshot_serve.py --out docs/figures/serve_chat.png
    python docs/screenshot_serve.py --ckpt runs/assistant --ask "Name a primary colour." --out chat.png

Without ``--ckpt`` it first trains a small assistant in a temporary folder, on records of its own (each "Add A and
B." answered with the sum, for A and B up to 9: 100 records, 300 steps, a few minutes on 2 busy cores). Then it starts
``scratchformer serve`` on a free port of 127.0.0.1, opens the page, sets the temperature to 0 (greedy), asks each
``--ask`` in one conversation, waits for each answer to finish streaming and saves the page as PNG. Needs selenium
(the dev extra) and the system's chromium and chromedriver (Debian: ``apt-get install chromium chromium-driver``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from scratchformer.app.cli import main as scratchformer

QUESTIONS = ["Add 2 and 3.", "Add 7 and 5.", "Add 4 and 9."]


def train_assistant(root: Path) -> Path:
    records = [{"instruction": f"Add {a} and {b}.", "input": "", "output": f"{a} and {b} make {a + b}."}
               for a in range(10) for b in range(10)]
    data = root / "sums.json"
    data.write_text(json.dumps(records), encoding="utf-8")
    assert scratchformer(["train", "task=instruct", "--data", str(data), "d_model=64", "n_layers=2", "n_heads=2",
                          "d_ff=128", "max_len=256", "max_steps=300", "lr=3e-3", "eval_every=300",
                          "--quiet", "--out", str(root / "assistant")]) == 0
    return root / "assistant"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", help="the model to serve (default: a small assistant trained first)")
    parser.add_argument("--ask", action="append", help=f"a message to send (repeat; default: {QUESTIONS})")
    parser.add_argument("--out", required=True, help="PNG file")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="serve-shot-"))
    ckpt = args.ckpt or train_assistant(tmp)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "scratchformer", "serve", "--ckpt", str(ckpt), "--port",
                               str(port)], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = server.stdout.readline()
    while not line.startswith("OpenAI API at"):  # the server says where it listens once it is ready
        line = server.stdout.readline()
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or ""
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--hide-scrollbars", f"--user-data-dir={tmp / 'chromium'}", "--window-size=1180,720"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"),
                              options=options)
    try:
        driver.get(f"http://127.0.0.1:{port}/")
        WebDriverWait(driver, 30).until(lambda d: "tokens of context" in d.find_element(By.ID, "model-summary").text)
        box = driver.find_element(By.ID, "temperature")
        box.clear()
        box.send_keys("0")
        for n, question in enumerate(args.ask or QUESTIONS, 1):
            driver.find_element(By.ID, "input").send_keys(question)
            driver.find_element(By.ID, "send").click()
            WebDriverWait(driver, 60).until(
                lambda d: len(d.find_elements(By.CSS_SELECTOR, ".message.assistant[data-finish]")) == n)
        driver.save_screenshot(args.out)
        print(f"wrote {args.out}")
    finally:
        driver.quit()
        server.terminate()
        server.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The attention explorer's screenshot in docs/figures/, taken in headless Chromium:

    scratchformer train --out runs/copy
    python docs/screenshot_explorer.py --ckpt runs/copy --text abcdefghij --layer 1 --head 0 --hover 5 5 \\
        --out docs/figures/explore_copy.png

    scratchformer train --preset shakespeare-char --out runs/shakespeare
    python docs/screenshot_explorer.py --ckpt runs/shakespeare --text "ROMEO: But soft, what light" --layer 3 \
        --only lens-card --out docs/figures/explore_lens.png

Serves the checkpoint with ``scratchformer.explore`` on a free port, types the text, runs it, picks the
layer and head, rests the mouse on one cell (so the hover value shows) and saves the whole page as PNG
(``--only ID``: only that part of it, such as the layer-by-layer card, ``lens-card``).
Needs selenium (the dev extra), Pillow (which matplotlib brings) and the system's chromium and
chromedriver (Debian: ``apt-get install chromium chromium-driver``).
"""

from __future__ import annotations

import argparse
import base64
import io
import shutil
import tempfile
import threading
import time

from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from scratchformer.app.explore import make_server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", required=True)
    parser.add_argument("--text", required=True)
    parser.add_argument("--kind", help="the attention to show (default: the page's own choice)")
    parser.add_argument("--layer", type=int, default=0)
    parser.add_argument("--head", type=int, default=0)
    parser.add_argument("--hover", type=int, nargs=2, metavar=("QUERY", "KEY"), help="the cell to rest the mouse on")
    parser.add_argument("--width", type=int, default=1180, help="page width in pixels")
    parser.add_argument("--only", metavar="ID", help="keep only the element with this id (e.g. lens-card)")
    parser.add_argument("--out", required=True, help="PNG file")
    args = parser.parse_args()

    server = make_server(args.ckpt, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    user_dir = tempfile.mkdtemp(prefix="explore-shot-")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser") or ""
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--hide-scrollbars", f"--user-data-dir={user_dir}", f"--window-size={args.width},900"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"),
                              options=options)
    try:
        driver.get(server.url)
        WebDriverWait(driver, 20).until(lambda d: "·" in d.find_element(By.ID, "model-summary").text)
        driver.find_element(By.ID, "text").send_keys(args.text)
        driver.find_element(By.ID, "run").click()
        WebDriverWait(driver, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#heatmap .cell"))
        if args.kind:
            driver.find_element(By.CSS_SELECTOR, f'#kinds button[data-kind="{args.kind}"]').click()
        thumb = f'#overview canvas[data-layer="{args.layer}"][data-head="{args.head}"]'
        driver.find_element(By.CSS_SELECTOR, thumb).click()
        # the viewport as tall as the page, so a screenshot of it holds all of it (capturing beyond the
        # viewport instead would resize the page and take the mouse off the cell)
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": args.width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        time.sleep(0.3)  # the new layout first: a mouse moved while it changes sends no mousemove
        if args.hover:
            q, k = args.hover
            cell = driver.find_element(By.CSS_SELECTOR, f'#heatmap .cell[data-q="{q}"][data-k="{k}"]')
            ActionChains(driver).move_to_element(cell).move_by_offset(1, 1).perform()
            time.sleep(0.3)
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})
        # 256 colours are plenty for a page of flat panels and one colour map, at about half the bytes
        image = Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")
        if args.only:
            box = driver.execute_script("const r = document.getElementById(arguments[0]).getBoundingClientRect();"
                                        "return [r.left, r.top, r.right, r.bottom].map(Math.round);", args.only)
            image = image.crop(tuple(box))
        image.quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(args.out, optimize=True)
    finally:
        driver.quit()
        server.shutdown()
        server.server_close()
        shutil.rmtree(user_dir, ignore_errors=True)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The real services the web service's tests run against, checked for themselves: a PostgreSQL server through
SQLAlchemy 2 and psycopg 3, and headless Chromium through Selenium 4. scripts/services.sh starts them and says where
(CONVBENCH_TEST_POSTGRES, CONVBENCH_TEST_CHROMIUM, CONVBENCH_TEST_CHROMEDRIVER; .ci/run does both). Where one is
absent its test skips with the reason, except in CI (CI=true), where a service test that skips is a service untested.
"""

import http.server
import threading
import uuid

from servicehelp import package, service


def test_postgresql_through_sqlalchemy():
    (url,) = service("CONVBENCH_TEST_POSTGRES")
    sqlalchemy = package("sqlalchemy")
    package("psycopg")
    from sqlalchemy import Column, Integer, MetaData, String, Table, func, select, text

    engine = sqlalchemy.create_engine(url)
    # a name of its own: a run beside this one (or one that died mid-test) leaves no table in its way
    table = Table(
        f"infra_check_{uuid.uuid4().hex[:12]}",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("name", String(40), nullable=False),
    )
    try:
        with engine.begin() as conn:
            assert conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg"
            assert conn.execute(text("SELECT version()")).scalar_one().startswith("PostgreSQL ")
            table.create(conn)
            try:
                conn.execute(table.insert(), [{"name": "gpu-basic"}, {"name": "cudnn"}, {"name": "ünïcode"}])
                rows = conn.execute(select(table.c.name).order_by(table.c.id)).scalars().all()
                assert rows == ["gpu-basic", "cudnn", "ünïcode"]
                assert conn.execute(select(func.count()).select_from(table)).scalar_one() == 3
            finally:
                table.drop(conn)
        with engine.connect() as conn:  # the drop was committed: the table is gone for a new connection too
            assert not sqlalchemy.inspect(conn).has_table(table.name)
    finally:
        engine.dispose()


PAGE = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>convbench infra check</title></head>
<body>
<p id="status">waiting</p>
<button id="go" onclick="document.getElementById('status').textContent = 'clicked ' + (6 * 7)">Go</button>
</body></html>
"""


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args):  # no request lines on the test's stderr
        pass


def test_headless_chromium_through_selenium():
    chromium, chromedriver = service("CONVBENCH_TEST_CHROMIUM", "CONVBENCH_TEST_CHROMEDRIVER")
    webdriver = package("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)  # a free port, this machine only
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    options = webdriver.ChromeOptions()
    # --no-sandbox: Chromium's sandbox cannot start as root (CI runs as root); --disable-dev-shm-usage: containers'
    # /dev/shm is often too small for it
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.binary_location = chromium
    try:
        driver = webdriver.Chrome(options=options, service=Service(executable_path=chromedriver))
        try:
            driver.set_page_load_timeout(30)
            driver.get(f"http://127.0.0.1:{server.server_address[1]}/")
            assert driver.title == "convbench infra check"
            assert driver.find_element(By.ID, "status").text == "waiting"
            driver.find_element(By.ID, "go").click()
            clicked = expected_conditions.text_to_be_present_in_element((By.ID, "status"), "clicked")
            WebDriverWait(driver, 10).until(clicked)
            assert driver.find_element(By.ID, "status").text == "clicked 42"
        finally:
            driver.quit()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

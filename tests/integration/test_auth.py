"""Everything the api-server serves for us sits behind Airflow's authentication: these tests run the
normal auth manager, not the all-admins mode the other integration tests use for headless screenshots."""

from __future__ import annotations

import pytest
import requests

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def secured(airflow_server_factory, tmp_path_factory):
    """One Airflow with logins required, its data folder holding a Data Docs page and a secret beside it."""
    root = tmp_path_factory.mktemp("secured")
    page = root / "data" / "validation-docs" / "wc" / "epoch=1" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text("<html>epoch 1: 70 of 70 expectations met</html>")
    (root / "data" / "secret.txt").write_text("not for the web")
    env = {"AIRFLOW_ALL_ADMINS": "0", "DS2_DATA_DIR": str(root / "data")}
    return airflow_server_factory(dags_folder=root / "dags", extra_env=env, reuse=False)


def test_validation_docs_refuse_anonymous_requests(secured):
    url = f"{secured.base_url}/ds2-docs/wc/epoch=1/"
    anonymous = requests.get(url, timeout=30)
    assert anonymous.status_code == 401 and "expectations" not in anonymous.text
    assert requests.get(url, cookies={"_token": "forged"}, timeout=30).status_code in (401, 403)
    with_cookie = requests.get(url, cookies={"_token": secured.token()}, timeout=30)  # how the UI's browser asks
    assert with_cookie.status_code == 200 and "70 of 70" in with_cookie.text
    assert requests.get(url, headers={"Authorization": f"Bearer {secured.token()}"}, timeout=30).status_code == 200
    outside = requests.get(f"{secured.base_url}/ds2-docs/..%2F..%2Fsecret.txt", cookies={"_token": secured.token()}, timeout=30)
    assert outside.status_code == 404 and "not for the web" not in outside.text


def test_each_instance_gets_its_own_admin_password(secured):
    password_file = secured.home / "admin-password"
    password = password_file.read_text().strip()
    assert len(password) >= 20 and password != "admin" and password_file.stat().st_mode & 0o077 == 0
    assert password in secured.up_log and "shown once" in secured.up_log  # printed by the first 'up'
    refused = requests.post(f"{secured.base_url}/auth/token", json={"username": "admin", "password": "admin"}, timeout=30)
    assert refused.status_code in (401, 403)
    assert secured.token()  # the generated one works
    again = secured.script("up")  # idempotent: the password stays, and is not printed again
    assert password_file.read_text().strip() == password and password not in again.stdout + again.stderr

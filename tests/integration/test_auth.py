"""Everything the api-server serves for us sits behind Airflow's authentication (normal auth manager,
not the all-admins mode the other integration tests use for headless screenshots)."""

from __future__ import annotations

import pytest
import requests

pytestmark = pytest.mark.slow


def test_validation_docs_refuse_anonymous_requests(airflow_server_factory, tmp_path):
    data = tmp_path / "data"
    page = data / "validation-docs" / "wc" / "epoch=1" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text("<html>epoch 1: 70 of 70 expectations met</html>")
    (data / "secret.txt").write_text("not for the web")
    server = airflow_server_factory(
        dags_folder=tmp_path / "dags", extra_env={"AIRFLOW_ALL_ADMINS": "0", "DS2_DATA_DIR": str(data)}, reuse=False
    )
    url = f"{server.base_url}/ds2-docs/wc/epoch=1/"
    anonymous = requests.get(url, timeout=30)
    assert anonymous.status_code == 401 and "expectations" not in anonymous.text
    assert requests.get(url, cookies={"_token": "forged"}, timeout=30).status_code in (401, 403)
    with_cookie = requests.get(url, cookies={"_token": server.token()}, timeout=30)  # how the UI's browser asks
    assert with_cookie.status_code == 200 and "70 of 70" in with_cookie.text
    with_token = requests.get(url, headers={"Authorization": f"Bearer {server.token()}"}, timeout=30)
    assert with_token.status_code == 200
    outside = requests.get(f"{server.base_url}/ds2-docs/..%2F..%2Fsecret.txt", cookies={"_token": server.token()}, timeout=30)
    assert outside.status_code == 404 and "not for the web" not in outside.text
